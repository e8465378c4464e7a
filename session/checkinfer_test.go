package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// TestCheckInfersEachRule: with CheckOptions.Infer, Check infers each
// rule after the suites and hands Judge one entry per rule — the
// inference, kept in the record file, or why there is none: a rule
// whose inference does not fit in what is left of --max-duration is
// skipped, and so is every rule after it.
func TestCheckInfersEachRule(t *testing.T) {
	rule := verify.Endpoint{Path: "/a", Rate: 1, Capacity: 4, Status: 429}
	tests := []struct {
		name        string
		maxDuration time.Duration
		inferred    bool
	}{
		{"time left", 10 * time.Minute, true},
		{"no time left", 30 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := memServer(t, testserver.Route{Path: "/a", Policy: bucket}, testserver.Route{Path: "/b", Policy: bucket})("")
				opt.TimerPacing = true
				out := filepath.Join(t.TempDir(), "check.jsonl")
				s, err := New(Config{Command: "check", Probe: opt, Out: out, Tool: "test", Caps: Caps{MaxDuration: tt.maxDuration}})
				if err != nil {
					t.Fatal(err)
				}
				b := rule
				b.Path = "/b"
				p := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{rule, b}}.Normalize()
				var got []Inferred
				judge := func(_ *verify.Report, in []Inferred) { got = in }
				rep, err := s.Check(context.Background(), &p, CheckOptions{Only: []string{"burst"}, Infer: true, Judge: judge})
				if rep == nil {
					t.Fatalf("no verdict: %v", err)
				}
				if len(got) != 2 {
					t.Fatalf("Judge heard %d inferences, want one per rule", len(got))
				}
				f, err := os.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				run, err := record.Read(f)
				if err != nil {
					t.Fatal(err)
				}
				docs := len(run.Inferences)
				for i, in := range got {
					switch {
					case tt.inferred && (in.Inference == nil || in.Skipped != ""):
						t.Errorf("rule %d: %+v, want an inference", i, in)
					case tt.inferred && (in.Inference.Algorithm != infer.TokenBucket || in.Inference.Fit != infer.FitExact):
						t.Errorf("rule %d: inferred %s (%s), want an exact token-bucket", i, in.Inference.Algorithm, in.Inference.Fit)
					case !tt.inferred && (in.Inference != nil || !strings.Contains(in.Skipped, "--max-duration")):
						t.Errorf("rule %d: %+v, want it skipped for lack of time", i, in)
					}
				}
				if want := map[bool]int{true: 2, false: 0}[tt.inferred]; docs != want {
					t.Errorf("%d inference documents in the record, want %d", docs, want)
				}
			})
		})
	}
}
