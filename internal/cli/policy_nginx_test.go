package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlprobe/rlprobe/limitconf"
	"github.com/rlprobe/rlprobe/verify"
)

// TestPolicyFromConfigNginx is `check --from-config examples/nginx.conf`
// done by hand, against the real nginx: import the config, check each
// location with its binding rule, and let limitconf.Judge turn the
// verdicts into findings about the config. /trap must come out
// config-not-enforced (absorbing no-limiting-observed), naming its
// limit_req line, and no other location may have a certain error.
func TestPolicyFromConfigNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("checks six nginx locations live (about 30 s)")
	}
	data, err := os.ReadFile(exampleNginx)
	if err != nil {
		t.Fatal(err)
	}
	im, err := limitconf.Parse(data, "examples/nginx.conf", limitconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every location has its own zone: one nginx serves all six checks.
	base := startExampleNginx(t)
	targets := limitconf.Targets(im, limitconf.TargetOptions{Base: base})
	if len(targets) != 6 {
		t.Fatalf("%d targets, want 6", len(targets))
	}
	dir := t.TempDir()
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		if tg.Untested != "" || tg.URL == "" {
			t.Fatalf("%s untested: %s", tg.Location, tg.Untested)
		}
		pol, err := json.Marshal(tg.Policy)
		if err != nil {
			t.Fatal(err)
		}
		pf := filepath.Join(dir, "policy-"+string(rune('a'+i))+".json")
		if err := os.WriteFile(pf, pol, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "check-"+string(rune('a'+i))+".jsonl")
		wg.Go(func() {
			r := &results[i]
			r.code, r.stdout, r.stderr = runCLI(t, nil, "check", tg.URL, "--policy-file", pf, "--json", "--out", out)
		})
	}
	wg.Wait()
	for i, tg := range targets {
		t.Run(strings.TrimPrefix(tg.Location, "= "), func(t *testing.T) {
			r := results[i]
			var rep verify.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("exit %d, not a check document: %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			fs := limitconf.Judge(tg, &rep, nil)
			var certainErrs []string
			for _, f := range fs {
				if f.Certainty == verify.Certain && f.Severity == verify.SeverityError {
					certainErrs = append(certainErrs, f.ID)
				}
				if f.ID == verify.IDNoLimitingObserved {
					t.Errorf("no-limiting-observed should be absorbed: %+v", f)
				}
			}
			if tg.Location == "= /trap" {
				if len(certainErrs) != 1 || certainErrs[0] != verify.IDConfigNotEnforced {
					t.Fatalf("/trap: certain errors %v, want [config-not-enforced]\n%s", certainErrs, r.stdout)
				}
				for _, f := range fs {
					if f.ID != verify.IDConfigNotEnforced {
						continue
					}
					t.Logf("%s %s %s: %s", f.Severity, f.Certainty, f.ID, f.Message)
					if !strings.Contains(f.Message, "examples/nginx.conf:72") {
						t.Errorf("the finding should name the limit_req line: %q", f.Message)
					}
				}
				return
			}
			if len(certainErrs) > 0 {
				t.Errorf("%s: certain errors %v, want none\n%s", tg.Location, certainErrs, r.stdout)
			}
		})
	}
}
