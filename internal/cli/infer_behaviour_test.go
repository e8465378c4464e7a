package cli

import (
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
)

// runBuilt runs the built rlprobe binary (testenv.BuildRlprobe) with args, in the
// test's temporary directory, and returns its exit code, stdout and
// stderr. Call testenv.BuildRlprobe first from the test's goroutine when calling
// this from others. The real-time inferences run this way: the race detector would
// multiply their design's CPU several times over, on cores the other
// tests' timing needs (the engine's race coverage comes from the
// in-process tests).
func runBuilt(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(testenv.BuildRlprobe(t), args...)
	testenv.DieWithTest(cmd)
	cmd.Dir = t.TempDir()
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	default: // not started: an error, safe from any goroutine
		t.Errorf("rlprobe %v: %v", args, err)
		return -1, out.String(), errOut.String()
	}
}

// TestInferNamesServeBehaviours: the built binary's infer, over loopback
// sockets in real time, against `rlprobe serve` with each behaviour beyond
// the plain families. Every answer is held to "a name means a fit": an
// exact answer names the served family and behaviour with its parameters
// within 5 %. The penalties and whole-token refill must be named (fit
// exact or approximate; a block with any family when not exact, since it
// hides what tells them apart); a block's length within 5 %. Idle eviction
// must be named too, with its idle time within 5 %, where forgetting a key
// gives back more than a plain bucket's refill (4/s, capacity 5, forgotten
// after 800 ms: 3.2 tokens; at 2/s and 500 ms, one token, a bucket that
// forgets decides almost as one that does not, and infer does not tell
// them apart). Interval refill — the whole capacity restored at each tick
// of a timer started with the server — is a fixed window on that timer:
// named fixed-window with alignment timer (exact: the window within 5 %).
func TestInferNamesServeBehaviours(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	if testing.Short() {
		t.Skip("real-time inference over sockets")
	}
	bin := testenv.BuildRlprobe(t)
	window := []string{"--algorithm", "fixed-window", "--limit", "5", "--window", "1s"}
	bucket := []string{"--algorithm", "token-bucket", "--rate", "2/s", "--capacity", "5"}
	cases := []struct {
		name    string
		args    []string
		fam     infer.Family
		penalty limiter.PenaltyKind
		blockS  float64
		quirk   infer.Behaviour
		named   bool // must be named (else: only never exact and wrong)
		timer   bool // a fixed window on the server's timer: alignment timer
		rate    float64
		idleS   float64
	}{
		{"block", append(slices.Clone(window), "--penalty", "block:2s"), infer.FixedWindow, limiter.PenaltyBlock, 2, "", true, false, 0, 0},
		{"extend", append(slices.Clone(window), "--penalty", "extend"), infer.FixedWindow, limiter.PenaltyExtend, 0, "", true, false, 0, 0},
		{"restart", append(slices.Clone(window), "--penalty", "restart"), infer.FixedWindow, limiter.PenaltyRestart, 0, "", true, false, 0, 0},
		{"whole-token-refill", append(slices.Clone(bucket), "--refill", "whole"), infer.TokenBucket, "", 0, infer.BehaviourWholeToken, true, false, 2, 0},
		{"idle-eviction", []string{"--algorithm", "token-bucket", "--rate", "4/s", "--capacity", "5", "--forget-idle", "800ms"}, infer.TokenBucket, "", 0, infer.BehaviourIdle, true, false, 4, 0.8},
		{"idle-eviction-one-token", append(slices.Clone(bucket), "--forget-idle", "500ms"), infer.TokenBucket, "", 0, infer.BehaviourIdle, false, false, 2, 0.5},
		{"interval-refill", append(slices.Clone(bucket), "--refill", "interval"), infer.FixedWindow, "", 0, "", true, true, 2, 0},
	}
	// Each case has a server of its own; the infers run two at a time,
	// their own processes over loopback, mostly waiting out windows.
	outs := make([][]byte, len(cases))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, c := range cases {
		if c.timer {
			// The timer starts with the server: start it 40 % into the
			// epoch's period of 2.5 s, its ticks clearly off the epoch's
			// (within a hundredth of the period, a timer is the epoch
			// window to infer, and to check and watch).
			sleepToPhase(2500*time.Millisecond, 0.4)
		}
		url := testenv.ServeBinary(t, bin, c.args...)
		dir := t.TempDir()
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command(bin, "infer", url, "--json", "--out", filepath.Join(dir, "infer.jsonl"))
			testenv.DieWithTest(cmd)
			cmd.Dir = dir
			outs[i], _ = cmd.Output() // exit 3 is an honest answer here (incomplete, misfit)
		})
	}
	wg.Wait()
	for i, c := range cases {
		out := outs[i]
		t.Run(c.name, func(t *testing.T) {
			var inf infer.Inference
			if err := json.Unmarshal(out, &inf); err != nil {
				t.Fatalf("infer --json: %v\n%s", err, out)
			}
			pen := limiter.PenaltyKind("")
			if inf.Penalty != nil {
				pen = inf.Penalty.Kind
			}
			right := inf.Algorithm == c.fam && pen == c.penalty && (c.quirk == "" && len(inf.Quirks) == 0 || slices.Equal(inf.Quirks, []infer.Behaviour{c.quirk}))
			al := "null"
			if inf.Alignment != nil {
				al = *inf.Alignment
			}
			if c.timer && al != infer.AlignTimer {
				right = false
			}
			t.Logf("%s: %s, fit %s, alignment %s, penalty %q, quirks %v, complete %v", c.name, inf.Algorithm, inf.Fit, al, pen, inf.Quirks, inf.Complete)
			if inf.Fit == infer.FitExact && !right {
				t.Fatalf("exact %s aligned %s with penalty %q and quirks %v, want %s with %q %q", inf.Algorithm, al, pen, inf.Quirks, c.fam, c.penalty, c.quirk)
			}
			if !c.named {
				return
			}
			if c.penalty == limiter.PenaltyBlock && inf.Fit != infer.FitExact && pen == c.penalty {
				// A block resets the key after every exhaustion and hides
				// what tells the families apart: below exact, the penalty
				// and its length are what must be named.
				right = true
			}
			if !right {
				t.Fatalf("named %s (fit %s) aligned %s with penalty %q and quirks %v, want %s with %q %q", inf.Algorithm, inf.Fit, al, pen, inf.Quirks, c.fam, c.penalty, c.quirk)
			}
			if c.blockS > 0 {
				if d := inf.Penalty.DurationS; d == nil || math.Abs(d.Value-c.blockS) > 0.05*c.blockS {
					t.Errorf("block %+v, want %gs within 5%%", d, c.blockS)
				}
			}
			if c.idleS > 0 {
				if d := inf.Params.IdleS; d == nil || math.Abs(d.Value-c.idleS) > 0.05*c.idleS {
					t.Errorf("idle_s %+v, want %gs within 5%%", d, c.idleS)
				}
			}
			if inf.Fit == infer.FitExact {
				for name, p := range map[string]struct {
					got  *infer.Param
					want float64
				}{"limit": {inf.Params.Limit, 5}, "window_s": {inf.Params.WindowS, map[bool]float64{false: 1, true: 2.5}[c.timer]}, "capacity": {inf.Params.Capacity, 5}, "rate_per_s": {inf.Params.RatePerS, c.rate}} {
					if (c.fam == infer.FixedWindow) != (name == "limit" || name == "window_s") {
						continue
					}
					if p.got == nil || math.Abs(p.got.Value-p.want) > 0.05*p.want {
						t.Errorf("exact, but %s = %+v, want %g within 5%%", name, p.got, p.want)
					}
				}
			}
		})
	}
}

// sleepToPhase sleeps until share of the way into the current period of
// the Unix epoch's periods of length period.
func sleepToPhase(period time.Duration, share float64) {
	p := period.Microseconds()
	at := time.Now().UnixMicro() % p
	target := int64(share * float64(p))
	time.Sleep(time.Duration(((target-at)%p+p)%p) * time.Microsecond)
}
