package watch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/verify"
)

// TestSettingsConfig: good settings make the Config they say; bad ones are
// all listed at once, in the flags' words.
func TestSettingsConfig(t *testing.T) {
	good := Settings{Every: time.Minute, Budget: "2%", FailOn: "warning", Dir: "d", Keep: 3, KeepBytes: 9, Once: true}
	tests := []struct {
		name      string
		edit      func(*Settings)
		wantAddr  string
		wantProbs []string
	}{
		{"good", func(*Settings) {}, "", nil},
		{"metrics default host", func(s *Settings) { s.MetricsListen = ":0" }, "127.0.0.1:0", nil},
		{"metrics public", func(s *Settings) { s.MetricsListen, s.Public = "0.0.0.0:9464", true }, "0.0.0.0:9464", nil},
		{"every zero is the default", func(s *Settings) { s.Every = 0 }, "", nil},
		{"all bad", func(s *Settings) {
			s.Budget, s.FailOn, s.Every, s.MetricsListen = "2", "fatal", -time.Second, "0.0.0.0:9464"
		}, "", []string{"--budget \"2\"", "--fail-on: must be info, warning or error", "--every must be positive", "is not loopback"}},
		{"budget above 100", func(s *Settings) { s.Budget = "101%" }, "", []string{"at most 100"}},
		{"metrics not host:port", func(s *Settings) { s.MetricsListen = "9464" }, "", []string{"want host:port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			cfg, addr, probs := s.Config()
			if len(probs) != len(tc.wantProbs) {
				t.Fatalf("problems %q, want %d like %q", probs, len(tc.wantProbs), tc.wantProbs)
			}
			for i, want := range tc.wantProbs {
				if !strings.Contains(probs[i].String(), want) {
					t.Errorf("problem %d %q, want it to say %q", i, probs[i], want)
				}
			}
			if addr != tc.wantAddr || (cfg.Metrics != nil) != (tc.wantAddr != "") {
				t.Errorf("metrics address %q (metrics %v), want %q", addr, cfg.Metrics != nil, tc.wantAddr)
			}
			if len(probs) > 0 {
				return
			}
			want := Dir{Path: "d", Keep: 3, KeepBytes: 9}
			if cfg.Every != s.Every || cfg.Share != 0.02 || cfg.FailOn != verify.SeverityWarning || cfg.Dir != want || !cfg.Once || cfg.Infer {
				t.Errorf("config %+v from %+v", cfg, s)
			}
		})
	}
}

// TestNewLogger: text lines on errOut (quiet keeps drifts and findings),
// JSON lines on out.
func TestNewLogger(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	events := []Event{{Time: at, Kind: KindStart, Message: "start"}, {Time: at, Kind: KindCycle, Message: "cycle 1"},
		{Time: at, Kind: KindFinding, Message: "a finding"}, {Time: at, Kind: KindDrift, Message: "a drift"}}
	tests := []struct {
		name             string
		asJSON, quiet    bool
		wantOut, wantErr int // lines
		wantErrHas       string
	}{
		{"text", false, false, 0, 4, "2026-12-01T17:00:00Z rlprobe watch: cycle 1\n"},
		{"quiet text", false, true, 0, 2, "2026-12-01T17:00:00Z rlprobe watch: a finding\n"},
		{"json", true, false, 4, 0, ""},
		{"json ignores quiet", true, true, 4, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			log := NewLogger(&out, &errOut, tc.asJSON, tc.quiet)
			for _, ev := range events {
				log(ev)
			}
			if n := strings.Count(out.String(), "\n"); n != tc.wantOut {
				t.Errorf("%d lines on out, want %d:\n%s", n, tc.wantOut, out.String())
			}
			if n := strings.Count(errOut.String(), "\n"); n != tc.wantErr || !strings.Contains(errOut.String(), tc.wantErrHas) {
				t.Errorf("%d lines on errOut, want %d with %q:\n%s", n, tc.wantErr, tc.wantErrHas, errOut.String())
			}
			if tc.quiet && strings.Contains(errOut.String(), "start") {
				t.Errorf("quiet let a start event through:\n%s", errOut.String())
			}
			for line := range strings.Lines(out.String()) {
				var ev Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Message == "" {
					t.Errorf("not an event line %q: %v", line, err)
				}
			}
		})
	}
}
