package cli

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

// resolvePolicy parses policy flags and resolves them; files maps
// --policy-file names to contents.
func resolvePolicy(files map[string]string, args ...string) (*verify.Policy, error) {
	o := &session.PolicySpec{}
	cmd := &cobra.Command{Use: "x"}
	addPolicyFlags(cmd, o)
	if err := cmd.ParseFlags(args); err != nil {
		return nil, UsageErr(err)
	}
	o.ReadFile = func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	return o.Resolve()
}

func TestPolicyFlags(t *testing.T) {
	files := map[string]string{
		"ok.yaml":  "version: 1\nendpoints:\n  - {path: /a, limit: 5, window: 2s}\n",
		"bad.yaml": "version: 1\nendpoints:\n  - limit: 5\n    windw: 2s\n",
	}
	tests := []struct {
		name string
		args []string
		want *verify.Endpoint // nil: no policy declared
		err  string           // a usage error containing this
	}{
		{"window", []string{"--limit", "100", "--window", "60s"},
			&verify.Endpoint{Limit: 100, Window: time.Minute, WindowType: verify.Sliding, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional}, ""},
		{"fixed, epoch", []string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch"},
			&verify.Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: verify.Fixed, Align: limiter.AlignEpoch, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional}, ""},
		{"nginx burst", []string{"--rate", "1r/s", "--burst", "3", "--status", "429"},
			&verify.Endpoint{Rate: 1, Capacity: 4, Status: 429, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional}, ""},
		{"draft syntax with modifiers", []string{"--policy", `"api";q=100;w=60`, "--key", "ip", "--headers", "draft-8", "--retry-after", "required"},
			&verify.Endpoint{Name: "api", Limit: 100, Window: time.Minute, WindowType: verify.Sliding, Key: verify.KeyIP,
				Headers: []string{"draft-8"}, RetryAfter: verify.RetryAfterRequired}, ""},
		{"file", []string{"--policy-file", "ok.yaml"},
			&verify.Endpoint{Path: "/a", Limit: 5, Window: 2 * time.Second, WindowType: verify.Sliding, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional}, ""},
		{"penalty", []string{"--limit", "5", "--window", "2s", "--penalty", "block:30s"},
			&verify.Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: verify.Sliding, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional,
				Penalty: limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 30 * time.Second}}, ""},
		{"penalty on a draft policy", []string{"--policy", `"a";q=3;w=1`, "--penalty", "extend"},
			&verify.Endpoint{Name: "a", Limit: 3, Window: time.Second, WindowType: verify.Sliding, Key: verify.KeyGlobal, RetryAfter: verify.RetryAfterOptional,
				Penalty: limiter.Penalty{Kind: limiter.PenaltyExtend}}, ""},
		{"nothing declared", nil, nil, ""},
		{"penalty alone", []string{"--penalty", "restart"}, nil, ""},
		{"penalty on a bucket", []string{"--rate", "1/s", "--capacity", "2", "--penalty", "extend"}, nil, "--penalty: extend moves a window's end"},
		{"block without duration", []string{"--limit", "5", "--window", "2s", "--penalty", "block"}, nil, "--penalty: a block lasts more than 0, e.g. block:30s"},
		{"bad penalty alone", []string{"--penalty", "jail"}, nil, `--penalty: must be block:DURATION`},
		{"penalty in file and flag", []string{"--policy-file", "ok.yaml", "--penalty", "extend"}, nil, "drop --penalty"},
		{"modifiers only", []string{"--status", "429"}, nil, ""},
		{"capacity and burst", []string{"--rate", "1/s", "--capacity", "4", "--burst", "3"}, nil, "give --capacity or --burst, not both"},
		{"rate without capacity", []string{"--rate", "1/s"}, nil, "--capacity: must be at least 1"},
		{"limit without window", []string{"--limit", "5"}, nil, "--window: must be a positive duration"},
		{"bare window", []string{"--limit", "5", "--window", "60"}, nil, "has no unit"},
		{"policy and limit", []string{"--policy", `"a";q=1;w=1`, "--limit", "3"}, nil, "--policy declares the quota: drop --limit"},
		{"file and flags", []string{"--policy-file", "ok.yaml", "--status", "429"}, nil, "drop --status"},
		{"file with a typo", []string{"--policy-file", "bad.yaml"}, nil, "line 4: endpoints[0].windw: unknown key"},
		{"missing file", []string{"--policy-file", "nope.yaml"}, nil, "--policy-file"},
		{"bad modifier alone", []string{"--status", "200"}, nil, "--status: a reject status is 400 to 599"},
		{"bad draft syntax", []string{"--policy", `"a";q=1`}, nil, "w: missing"},
	}
	for _, tt := range tests {
		p, err := resolvePolicy(files, tt.args...)
		if tt.err != "" {
			var ee *ExitError
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ee) || ee.ExitCode() != ExitUsage {
				t.Errorf("%s: error %v, want a usage error containing %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if tt.want == nil {
			if p != nil {
				t.Errorf("%s: policy %+v, want none", tt.name, p)
			}
			continue
		}
		if p == nil || len(p.Endpoints) != 1 || p.Endpoints[0].String() != tt.want.String() ||
			p.Endpoints[0].Status != tt.want.Status || strings.Join(p.Endpoints[0].Headers, ",") != strings.Join(tt.want.Headers, ",") ||
			p.Endpoints[0].RetryAfter != tt.want.RetryAfter || p.Endpoints[0].Name != tt.want.Name {
			t.Errorf("%s: policy %+v, want %+v", tt.name, p, tt.want)
		}
	}
}
