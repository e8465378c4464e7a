package cli

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/verify"
)

// TestCheckFromConfigNginx is `check BASE_URL --from-config
// examples/nginx.conf` against the real nginx: /trap comes out
// config-not-enforced (absorbing no-limiting-observed), certain, naming
// its limit_req line, and no other location has a certain error — the
// inference that follows each suite finds no certain config-mismatch on
// any of them. The whole config is checked one location after the other
// (several minutes); here each location is a command of its own (--location), all
// at once against one nginx (every location has its own zone), which is
// the same import, plan and judgement in a sixth of the time.
func TestCheckFromConfigNginx(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	if testing.Short() {
		t.Skip("checks six nginx locations live (about 30 s)")
	}
	base := startExampleNginx(t)
	dir := t.TempDir()
	locs := []string{"= /", "= /trap", "= /queue", "= /delay", "= /429", "= /retry-after"}
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, len(locs))
	cfg, err := filepath.Abs(exampleNginx)
	if err != nil {
		t.Fatal(err)
	}
	testenv.BuildRlprobe(t) // each check infers: through the built binary (runBuilt)
	var wg sync.WaitGroup
	for i, loc := range locs {
		out := filepath.Join(dir, "check-"+string(rune('a'+i))+".jsonl")
		wg.Go(func() {
			r := &results[i]
			r.code, r.stdout, r.stderr = runBuilt(t, "check", base, "--from-config", cfg, "--location", loc, "--json", "--out", out)
		})
	}
	wg.Wait()
	sch := compileDocSchema(t, "check.schema.json")
	for i, loc := range locs {
		t.Run(cmp.Or(strings.TrimPrefix(loc, "= /"), "root"), func(t *testing.T) {
			r := results[i]
			var rep verify.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("exit %d, not a check document: %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			mustValidate(t, sch, "check --from-config --json", r.stdout)
			if rep.Time.IsZero() || len(rep.Policy.Endpoints) != 1 || rep.Policy.Endpoints[0].Path != strings.TrimPrefix(loc, "= ") {
				t.Errorf("time %v, policy %+v: want a time and the one location's rule", rep.Time, rep.Policy)
			}
			var certainErrs []string
			for _, f := range rep.Findings {
				if f.Certainty == verify.Certain && f.Severity == verify.SeverityError {
					certainErrs = append(certainErrs, f.ID)
				}
				if f.ID == verify.IDNoLimitingObserved {
					t.Errorf("no-limiting-observed should be absorbed: %+v", f)
				}
				if !strings.Contains(f.Message, "examples/nginx.conf:") {
					t.Errorf("a finding should name its config line: %q", f.Message)
				}
			}
			if loc != "= /trap" {
				if len(certainErrs) > 0 || r.code != ExitOK || rep.Verdict != verify.VerdictPass {
					t.Errorf("exit %d, verdict %s, certain errors %v; want 0, pass, none\n%s%s", r.code, rep.Verdict, certainErrs, r.stdout, r.stderr)
				}
				return
			}
			if r.code != ExitFindings || rep.Verdict != verify.VerdictFail || len(certainErrs) != 1 || certainErrs[0] != verify.IDConfigNotEnforced {
				t.Fatalf("/trap: exit %d, verdict %s, certain errors %v; want 1, fail, [config-not-enforced]\n%s%s", r.code, rep.Verdict, certainErrs, r.stdout, r.stderr)
			}
			for _, f := range rep.Findings {
				if f.ID == verify.IDConfigNotEnforced && !strings.Contains(f.Message, "examples/nginx.conf:72") {
					t.Errorf("the finding should name the limit_req line: %q", f.Message)
				}
			}
		})
	}
}

// TestCheckFromConfigUsage: --from-config excludes the policy flags, the
// config flags need it, and a config that cannot be read or holds nothing
// checkable is exit 2 before anything is sent.
func TestCheckFromConfigUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-config", exampleNginx, "--rate", "1r/s", "--burst", "3"}, "drop --rate, --burst"},
		{[]string{"--location-url", "/a=/b"}, "--location-url reads a limiter's config"},
		{[]string{"--from-config", "no-such.conf"}, "no-such.conf"},
		{[]string{"--from-config", exampleNginx, "--location", "/nowhere"}, "no rate limit"},
		{[]string{"--from-config", exampleNginx, "--location-url", "nonsense"}, "PATTERN=URL"},
		{[]string{"--set", "RATE=1r/s"}, "--set reads a limiter's config"},
		{[]string{"--strict-includes"}, "--strict-includes reads a limiter's config"},
		{[]string{"--from-config", "../../limitconf/testdata/realistic/gateway.conf.template"}, "limits were not read"},
	} {
		code, _, errOut := runCLI(t, nil, append([]string{"check", "http://127.0.0.1:9"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("check %v = exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
