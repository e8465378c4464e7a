// Package deploytest holds the tests of issue 27's deployments with the
// built binary over real sockets on loopback: `rlprobe check` against
// `rlprobe serve --instances K --store local|shared` and `--key-fault
// collapse`. It is a package of its own, test files only, so that
// internal/cli's tests stay within their CI timeout.
package deploytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

func TestMain(m *testing.M) {
	// The inferences over instances run the built binary and mostly wait
	// out windows (40–125 s each): four in flight rather than two.
	testenv.WaitingParallel(4)
	code := m.Run()
	testenv.RemoveBuilt()
	os.Exit(code)
}

// check runs `rlprobe check url args... --json` and returns its exit code
// and document.
func check(t *testing.T, url string, args ...string) (int, verify.Report) {
	t.Helper()
	var rep verify.Report
	code := runJSON(t, &rep, append([]string{"check", url}, args...)...)
	return code, rep
}

// runJSON runs `rlprobe args... --json --out FILE` in a directory of its
// own, decodes its stdout into doc and returns the exit code.
func runJSON(t *testing.T, doc any, args ...string) int {
	t.Helper()
	dir := t.TempDir()
	rec := filepath.Join(dir, args[0]+".jsonl")
	t.Cleanup(func() { logRecordIfFailed(t, rec) }) // before the directory goes
	cmd := exec.Command(testenv.BuildRlprobe(t), append(slices.Clone(args), "--json", "--out", rec)...)
	testenv.DieWithTest(cmd)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", args, err)
	}
	if err := json.Unmarshal(out, doc); err != nil {
		t.Fatalf("%v: exit %d, no document: %v\n%s\n%s", args, code, err, out, stderr.String())
	}
	return code
}

// logRecordIfFailed logs, when t failed, every answered request of the
// record at path, one line each (sequence, phase, local address, the
// times in ms since the start: written, arrival echo, first byte; the
// decision number and status): a failure under load that does not
// reproduce leaves its evidence in the test's output.
func logRecordIfFailed(t *testing.T, path string) {
	if !t.Failed() {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	run, err := record.Read(f)
	if err != nil {
		t.Logf("record %s: %v", path, err)
		return
	}
	ms := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }
	var b strings.Builder
	for _, r := range run.Results {
		if r.Outcome != record.OutcomeResponse {
			continue
		}
		arrival, decision := "-", "-"
		if r.Arrival != nil {
			arrival = ms(*r.Arrival)
		}
		if r.Decision != nil {
			decision = strconv.FormatInt(*r.Decision, 10)
		}
		fmt.Fprintf(&b, "\n%d %s %s wrote=%s arrival=%s ttfb=%s decision=%s status=%d",
			r.Seq, r.Phase, r.Src, ms(r.Wrote), arrival, ms(r.TTFB), decision, r.Status)
		// The rate-limit state each answer advertised: an instance
		// inference reads its remaining values.
		for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
			if strings.Contains(strings.ToLower(name), "ratelimit") && !strings.Contains(strings.ToLower(name), "policy") {
				fmt.Fprintf(&b, " %s=%q", name, strings.Join(r.Headers[name], ", "))
			}
		}
	}
	t.Logf("the record's answers (%s):%s", path, b.String())
}

// certain returns the report's certain finding ids.
func certain(rep verify.Report) map[string]bool {
	out := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Certainty == verify.Certain {
			out[f.ID] = true
		}
	}
	return out
}

func describe(rep verify.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "\n  %s %s %s [%s] %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
	}
	return b.String()
}

// The families served and declared: a sliding log of 5 in any 2 s and a
// token bucket of 5 at 4/s.
var families = []struct {
	name         string
	serve, check []string
}{
	{"sliding-log", []string{"--algorithm", "sliding-log", "--limit", "5", "--window", "2s"}, []string{"--limit", "5", "--window", "2s", "--window-type", "sliding"}},
	{"token-bucket", []string{"--algorithm", "token-bucket", "--rate", "4/s", "--capacity", "5"}, []string{"--rate", "4/s", "--capacity", "5"}},
}

// TestCheckInstances: K ∈ {2, 3, 4} instances behind one listener, each
// with its own state, are a certain per-instance-limit (exit 1) when the
// balancer keeps a connection on one instance, and when it spreads
// requests for the window (its remaining values; the bucket: possible,
// beside its certain burst-limit-exceeded), never a certain race; sharing
// one store they pass the whole suite (exit 0).
func TestCheckInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time checks over sockets")
	}
	for _, fam := range families {
		for _, k := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/local-%d", fam.name, k), func(t *testing.T) {
				t.Parallel()
				url := testenv.ServeBinary(t, testenv.BuildRlprobe(t), append(slices.Clone(fam.serve), "--instances", fmt.Sprint(k), "--store", "local", "--balance", "connection")...)
				code, rep := check(t, url, append(slices.Clone(fam.check), "--only", "burst,race")...)
				got := certain(rep)
				if code != 1 || !got[verify.IDPerInstanceLimit] {
					t.Errorf("exit %d, want 1 with a certain %s:%s", code, verify.IDPerInstanceLimit, describe(rep))
				}
				if got[verify.IDRaceOverAdmission] {
					t.Errorf("a certain race-over-admission from instances:%s", describe(rep))
				}
			})
			t.Run(fmt.Sprintf("%s/local-%d-by-request", fam.name, k), func(t *testing.T) {
				t.Parallel()
				url := testenv.ServeBinary(t, testenv.BuildRlprobe(t), append(slices.Clone(fam.serve), "--instances", fmt.Sprint(k), "--store", "local", "--balance", "request")...)
				code, rep := check(t, url, append(slices.Clone(fam.check), "--only", "burst,race")...)
				got := certain(rep)
				// A window's remaining values count down once per
				// instance; a bucket's refill blurs them: possible, and
				// the count stays.
				want := got[verify.IDPerInstanceLimit]
				if fam.name == "token-bucket" {
					want = has(rep, verify.IDPerInstanceLimit) && got[verify.IDBurstLimitExceeded]
				}
				if code != 1 || !want {
					t.Errorf("exit %d, want 1 with a %s:%s", code, verify.IDPerInstanceLimit, describe(rep))
				}
				if got[verify.IDRaceOverAdmission] {
					t.Errorf("a certain race-over-admission from instances:%s", describe(rep))
				}
			})
			t.Run(fmt.Sprintf("%s/shared-%d", fam.name, k), func(t *testing.T) {
				t.Parallel()
				url := testenv.ServeBinary(t, testenv.BuildRlprobe(t), append(slices.Clone(fam.serve), "--instances", fmt.Sprint(k), "--store", "shared", "--balance", "connection")...)
				if code, rep := check(t, url, fam.check...); code != 0 || !rep.Pass {
					t.Errorf("exit %d, verdict %s, want 0 and pass:%s", code, rep.Verdict, describe(rep))
				}
			})
		}
	}
}

// TestCheckKeyCollapse: a per-IP limit whose server keys every request as
// one (--key-fault collapse) is a certain key-collapsed from two
// loopback source addresses (exit 1) for windows — a sliding log and a
// fixed window on the clock — and a possible one for a bucket, whose
// pooled level is bounded one way only; without the fault each passes.
func TestCheckKeyCollapse(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time checks over sockets")
	}
	// Two identities: the second sends right after the burst exhausted
	// the first (verify's secondIdentity).
	ips := "127.0.0.2,127.0.0.3"
	fixed := []string{"--algorithm", "fixed-window", "--limit", "5", "--window", "2s", "--align", "epoch"}
	for _, fam := range append(families, struct {
		name         string
		serve, check []string
	}{"fixed-window", fixed, []string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch"}}) {
		for _, fault := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/collapse=%v", fam.name, fault), func(t *testing.T) {
				t.Parallel()
				args := append(slices.Clone(fam.serve), "--key", "ip")
				if fault {
					args = append(args, "--key-fault", "collapse")
				}
				url := testenv.ServeBinary(t, testenv.BuildRlprobe(t), args...)
				run := func() (int, verify.Report) {
					return check(t, url, append(slices.Clone(fam.check), "--key", "ip", "--source-ips", ips, "--clients", "2", "--only", "burst")...)
				}
				code, rep := run()
				got := certain(rep)
				bucket := fam.name == "token-bucket"
				if fault && !bucket && !got[verify.IDKeyCollapsed] {
					// A window edge between the burst and the second
					// identity's request leaves the collapse no evidence
					// (the edge gives quota back to everyone): once more.
					t.Logf("no certain %s, once more:%s", verify.IDKeyCollapsed, describe(rep))
					code, rep = run()
					got = certain(rep)
				}
				switch {
				case fault && bucket && !has(rep, verify.IDKeyCollapsed):
					t.Errorf("exit %d, want a possible %s:%s", code, verify.IDKeyCollapsed, describe(rep))
				case fault && !bucket && (code != 1 || !got[verify.IDKeyCollapsed]):
					t.Errorf("exit %d, want 1 with a certain %s:%s", code, verify.IDKeyCollapsed, describe(rep))
				case !fault && (code != 0 || !rep.Pass):
					t.Errorf("exit %d, verdict %s, want 0 and pass:%s", code, rep.Verdict, describe(rep))
				}
			})
		}
	}
}

// has reports whether rep holds a finding of id.
func has(rep verify.Report, id string) bool {
	for _, f := range rep.Findings {
		if f.ID == id {
			return true
		}
	}
	return false
}
