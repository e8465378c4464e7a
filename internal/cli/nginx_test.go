package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/record"
)

// The nginx limit_req demo of the README, against real nginx (the system
// package) started with examples/nginx.conf itself, so that the shipped
// example is the tested one. Each test starts its own nginx: limit_req
// state never leaks from one command into the next.

// startExampleNginx starts nginx with examples/nginx.conf, its listen
// address moved to a free loopback port, and returns the base URL
// (http://127.0.0.1:PORT, no trailing slash).
func startExampleNginx(t *testing.T) string {
	t.Helper()
	conf := docReadFile(t, "examples/nginx.conf")
	if strings.Count(conf, nginxListen) != 1 {
		t.Fatalf("examples/nginx.conf must hold %q exactly once", nginxListen)
	}
	conf = strings.Replace(conf, nginxListen, "listen 127.0.0.1:"+testenv.PortPlaceholder+";", 1)
	return testenv.StartNginx(t, conf)
}

// nginxCmd is one rlprobe command against a fresh nginx, and how to judge
// what it did.
type nginxCmd struct {
	name  string   // subtest name
	path  string   // location of examples/nginx.conf
	args  []string // the command: "run", "check" or "infer" and its flags (URL and --out added)
	judge func(t *testing.T, r *nginxResult)
	// alone runs the command before the others, by itself: infer's
	// search for a limit on an unlimited target fires over a thousand
	// requests at once, enough CPU on two cores to skew the timing of
	// the experiments running beside it; and infer's own experiments on a
	// token bucket need arrival times, and on a queue the delays of its
	// answers, that a dozen concurrent commands on two cores can blur past
	// telling the candidates apart.
	alone bool
}

// nginxResult is what a command did.
type nginxResult struct {
	url            string
	code           int
	stdout, stderr string
	out            string // record file
}

// output is the command's whole output, for failure messages.
func (r *nginxResult) output() string { return r.stdout + r.stderr }

// record reads the command's record file.
func (r *nginxResult) record(t *testing.T) *record.Run {
	t.Helper()
	return readRecord(t, r.out)
}

// checkDoc decodes the check document.
func (r *nginxResult) checkDoc(t *testing.T) *nginxCheckDoc {
	t.Helper()
	var doc nginxCheckDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("exit %d, not a check document: %v\n%s", r.code, err, r.output())
	}
	return &doc
}

// runNginxCmds starts one nginx per command, runs every command at once
// (they mostly wait on nginx's 1r/s, so the whole table takes as long as
// its longest command), then judges each in a subtest.
func runNginxCmds(t *testing.T, cmds []nginxCmd) {
	t.Helper()
	results := make([]nginxResult, len(cmds))
	for i, c := range cmds {
		results[i].url = startExampleNginx(t) + c.path
		results[i].out = filepath.Join(t.TempDir(), strings.ReplaceAll(c.name, "/", "-")+".jsonl")
	}
	testenv.BuildRlprobe(t)
	exec := func(i int) {
		r, c := &results[i], cmds[i]
		args := append([]string{c.args[0], r.url, "--out", r.out}, c.args[1:]...)
		if c.args[0] == "infer" {
			r.code, r.stdout, r.stderr = runBuilt(t, args...) // see runBuilt
			return
		}
		r.code, r.stdout, r.stderr = runCLI(t, nil, args...)
	}
	for i, c := range cmds {
		if c.alone {
			exec(i)
		}
	}
	var wg sync.WaitGroup
	for i, c := range cmds {
		if !c.alone {
			wg.Go(func() { exec(i) })
		}
	}
	wg.Wait()
	for i, c := range cmds {
		t.Run(c.name, func(t *testing.T) {
			r := &results[i]
			t.Logf("rlprobe %s %s: exit %d", c.args[0], r.url, r.code)
			c.judge(t, r)
		})
	}
}

// burst8 is the README's first command.
var burst8 = []string{"run", "--pattern", "burst", "--count", "8"}

// wantBurst judges `run --pattern burst --count 8`: exit 0 and exactly
// these statuses.
func wantBurst(want map[int]int) func(t *testing.T, r *nginxResult) {
	return func(t *testing.T, r *nginxResult) {
		if r.code != ExitOK {
			t.Fatalf("exit %d\n%s", r.code, r.output())
		}
		nginxWantStatuses(t, r.record(t), want)
	}
}

// wantInference judges `infer --json`: exit 0 and the family and
// parameters of want.
func wantInference(want scenario.SelftestWant) func(t *testing.T, r *nginxResult) {
	return func(t *testing.T, r *nginxResult) {
		var inf infer.Inference
		if err := json.Unmarshal([]byte(r.stdout), &inf); err != nil {
			t.Fatalf("exit %d, not an infer document: %v\n%s", r.code, err, r.output())
		}
		if r.code != ExitOK || !inf.Complete {
			t.Errorf("exit %d, complete %v; want 0, true\n%s", r.code, inf.Complete, r.stderr)
		}
		if probs, _ := scenario.JudgeInference(want, &inf); len(probs) > 0 {
			t.Errorf("%v\n%s", probs, r.stdout)
			logRecord(t, r.out)
		}
		t.Logf("infer: %s in %.1fs, %d requests", inf.Algorithm, inf.DurationS, inf.Requests)
	}
}

// wantCheck judges `check --json`: the exit code, and exactly these
// certain error and warning findings.
func wantCheck(code int, errs, warnings []string) func(t *testing.T, r *nginxResult) {
	return func(t *testing.T, r *nginxResult) {
		doc := r.checkDoc(t)
		if r.code != code {
			t.Errorf("exit %d, want %d\n%s", r.code, code, r.output())
		}
		if wantVerdict := map[int]string{ExitOK: "pass", ExitFindings: "fail"}[code]; doc.Verdict != wantVerdict {
			t.Errorf("verdict %s, want %s", doc.Verdict, wantVerdict)
		}
		nginxWantIDs(t, doc, "error", errs, r.output())
		nginxWantIDs(t, doc, "warning", warnings, r.output())
	}
}

// logRecord logs a record's results, one line each, for a failure to
// be studied (the file itself goes with the test's temporary directory).
func logRecord(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	run, err := record.Read(f)
	if err != nil {
		return
	}
	var b strings.Builder
	for _, r := range run.Results {
		fmt.Fprintf(&b, "  %3d %-10s sent %9.3fms held %9.3fms %d %s\n", r.Seq, r.Phase,
			float64(r.Sent)/1e6, float64(r.TTFB-r.Wrote)/1e6, r.Status, r.Err)
	}
	t.Logf("%s:\n%s", path, b.String())
}

// nginxHeld returns, sorted, how long nginx held each accepted request
// of run (first response byte minus last request byte).
func nginxHeld(run *record.Run) []time.Duration {
	var held []time.Duration
	for _, r := range run.Results {
		if r.Status == 200 {
			held = append(held, time.Duration(r.TTFB-r.Wrote))
		}
	}
	slices.Sort(held)
	return held
}

// nginxCheckDoc is what the nginx tests read of the check document.
type nginxCheckDoc struct {
	Verdict  string `json:"verdict"`
	Complete bool   `json:"complete"`
	Findings []struct {
		ID        string `json:"id"`
		Severity  string `json:"severity"`
		Certainty string `json:"certainty"`
	} `json:"findings"`
}

// ids returns the sorted, distinct ids of the certain findings of a
// severity. Possible findings are left out: they say that measurement
// uncertainty leaves a violation open (on a loaded machine, slow answers
// widen every request's arrival interval), and they decide nothing.
func (d *nginxCheckDoc) ids(severity string) []string {
	var ids []string
	for _, f := range d.Findings {
		if f.Severity == severity && f.Certainty == "certain" && !slices.Contains(ids, f.ID) {
			ids = append(ids, f.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// nginxWantStatuses fails t unless run's statuses are exactly want.
func nginxWantStatuses(t *testing.T, run *record.Run, want map[int]int) {
	t.Helper()
	if got := statuses(run); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("burst of 8: statuses %v, want %v", got, want)
	}
}

// nginxWantIDs fails t unless the findings of severity are exactly want.
func nginxWantIDs(t *testing.T, doc *nginxCheckDoc, severity string, want []string, output string) {
	t.Helper()
	if got := doc.ids(severity); !slices.Equal(got, want) {
		t.Errorf("%s findings %v, want %v\n%s", severity, got, want, output)
	}
}

// policy429 is the README's check: the demo's own policy, but wanting 429.
var policy429 = []string{"check", "--rate", "1/s", "--burst", "3", "--status", "429", "--json"}

// TestNginxExample runs the README's nginx walkthrough against
// examples/nginx.conf:
//
//   - / is the demo that really limits (rate=1r/s burst=3 nodelay,
//     answered after preaccess): a burst of 8 gets four 200s and four
//     503s; infer finds a token bucket of 1/s and capacity 4; checked
//     against a policy that wants 429, rlprobe reports the 503s and the
//     missing Retry-After, and nothing else at error level.
//   - /trap answers with `return`, which runs in the rewrite phase, before
//     limit_req: nothing is limited, and rlprobe says so.
//   - /queue, /delay, /429 and /retry-after are the variants.
func TestNginxExample(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	tokenBucket := scenario.SelftestWant{Family: infer.TokenBucket, Params: map[string]float64{"rate_per_s": 1, "capacity": 4}}
	runNginxCmds(t, []nginxCmd{
		{name: "demo/run", path: "/", args: burst8, judge: func(t *testing.T, r *nginxResult) {
			wantBurst(map[int]int{200: 4, 503: 4})(t, r)
			// nodelay: nothing is held.
			if held := nginxHeld(r.record(t)); len(held) > 0 && held[len(held)-1] > 500*time.Millisecond {
				t.Errorf("nodelay held an accepted request %v", held[len(held)-1])
			}
		}},
		{name: "demo/infer", path: "/", args: []string{"infer", "--json"}, judge: wantInference(tokenBucket), alone: true},
		{name: "demo/check", path: "/", args: policy429, judge: func(t *testing.T, r *nginxResult) {
			doc := r.checkDoc(t)
			if r.code != ExitFindings || doc.Verdict != "fail" {
				t.Errorf("exit %d, verdict %s; want 1, fail\n%s", r.code, doc.Verdict, r.output())
			}
			nginxWantIDs(t, doc, "error", []string{"reject-status-mismatch"}, r.output())
			if !slices.Contains(doc.ids("warning"), "retry-after-missing") {
				t.Errorf("no retry-after-missing warning\n%s", r.output())
			}
		}},

		{name: "trap/run", path: "/trap", args: burst8, judge: wantBurst(map[int]int{200: 8})},
		{name: "trap/infer", path: "/trap", args: []string{"infer", "--json"}, judge: wantInference(scenario.SelftestWant{Family: infer.None}), alone: true},
		{name: "trap/check", path: "/trap", args: policy429, judge: wantCheck(ExitFindings, []string{"no-limiting-observed"}, nil)},

		// No nodelay: the excess within the burst is queued and served at
		// 1r/s, held about 1 s, 2 s and 3 s.
		{name: "queue/run", path: "/queue", args: burst8, judge: func(t *testing.T, r *nginxResult) {
			wantBurst(map[int]int{200: 4, 503: 4})(t, r)
			held := nginxHeld(r.record(t))
			for k, h := range held {
				// nginx never serves early; a loaded machine may serve late.
				if least := time.Duration(k)*time.Second - 100*time.Millisecond; h < least {
					t.Errorf("accepted request %d held %v, want at least %v (queued behind %d)", k, h, least, k)
				}
			}
			if len(held) == 4 && held[0] > 500*time.Millisecond {
				t.Errorf("the first request was held %v; nginx serves it at once", held[0])
			}
		}},
		{name: "queue/infer", path: "/queue", args: []string{"infer", "--json"}, judge: wantInference(scenario.SelftestWant{
			Family: infer.LeakyBucketQueue,
			Params: map[string]float64{"rate_per_s": 1, "capacity": 4, "undelayed": 1, "queue": 3},
		}), alone: true},

		// delay=2: three served at once, the fourth held about 1 s.
		{name: "delay/run", path: "/delay", args: burst8, judge: func(t *testing.T, r *nginxResult) {
			wantBurst(map[int]int{200: 4, 503: 4})(t, r)
			var slow int
			held := nginxHeld(r.record(t))
			for _, h := range held {
				if h >= 500*time.Millisecond {
					slow++
				}
			}
			if slow != 1 {
				t.Errorf("%d accepted requests held ≥ 500ms, want 1 (delay=2: three at once); held %v", slow, held)
			}
		}},
		{name: "delay/infer", path: "/delay", args: []string{"infer", "--json"}, judge: wantInference(scenario.SelftestWant{
			Family: infer.LeakyBucketQueue,
			Params: map[string]float64{"rate_per_s": 1, "capacity": 4, "undelayed": 3, "queue": 1},
		}), alone: true},

		// limit_req_status 429: the same policy now passes, the missing
		// Retry-After a warning.
		{name: "429/run", path: "/429", args: burst8, judge: wantBurst(map[int]int{200: 4, 429: 4})},
		{name: "429/check", path: "/429", args: policy429, judge: wantCheck(ExitOK, nil, []string{"retry-after-missing"})},

		// Retry-After on the rejection path (error_page 503 → @limited):
		// every 503 carries Retry-After: 1, which is honest at 1r/s.
		{name: "retry-after/run", path: "/retry-after", args: burst8, judge: func(t *testing.T, r *nginxResult) {
			wantBurst(map[int]int{200: 4, 503: 4})(t, r)
			for _, res := range r.record(t).Results {
				if ra := res.Headers["Retry-After"]; res.Status == 503 && (len(ra) != 1 || ra[0] != "1") {
					t.Errorf("seq %d: 503 with Retry-After %q, want \"1\"", res.Seq, ra)
				}
			}
		}},
		{name: "retry-after/check", path: "/retry-after", args: []string{"check", "--rate", "1/s", "--burst", "3", "--status", "503", "--json"},
			judge: wantCheck(ExitOK, nil, nil)},
	})
}
