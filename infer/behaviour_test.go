package infer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// behaviourCells are the limiters whose behaviour goes beyond the plain
// families — penalties, buckets that forget or refill in steps — three
// parameter sets a cell (issue 22's grid).
func behaviourCells() []struct {
	name string
	cfg  limiter.Config
} {
	type cell = struct {
		name string
		cfg  limiter.Config
	}
	var out []cell
	windows := []struct {
		alg limiter.Algorithm
		n   int64
		w   time.Duration
	}{
		{limiter.FixedWindow, 5, time.Second}, {limiter.FixedWindow, 8, 2 * time.Second}, {limiter.FixedWindow, 4, 1500 * time.Millisecond},
		{limiter.SlidingLog, 5, time.Second}, {limiter.SlidingLog, 8, 2 * time.Second}, {limiter.SlidingLog, 4, 1500 * time.Millisecond},
		{limiter.SlidingWindowCounter, 5, time.Second}, {limiter.SlidingWindowCounter, 8, 2 * time.Second}, {limiter.SlidingWindowCounter, 4, 1500 * time.Millisecond},
	}
	for i, w := range windows {
		block := time.Duration(3+i%3) * w.w // a block of 3–5 windows
		for _, p := range []limiter.Penalty{{Kind: limiter.PenaltyBlock, Duration: block}, {Kind: limiter.PenaltyExtend}, {Kind: limiter.PenaltyRestart}} {
			c := limiter.Config{Algorithm: w.alg, Limit: w.n, Window: w.w, Penalty: p}
			if w.alg != limiter.SlidingLog {
				c.Align = limiter.AlignFirstRequest
			}
			out = append(out, cell{fmt.Sprintf("%s-%d-per-%v-%s", w.alg, w.n, w.w, p), c})
		}
	}
	buckets := []struct {
		alg  limiter.Algorithm
		r    float64
		c    int64
		idle time.Duration
	}{
		{limiter.TokenBucket, 2, 5, 500 * time.Millisecond}, {limiter.TokenBucket, 4, 8, 800 * time.Millisecond}, {limiter.TokenBucket, 1, 3, 400 * time.Millisecond},
		{limiter.GCRA, 2, 5, 500 * time.Millisecond}, {limiter.GCRA, 4, 8, 800 * time.Millisecond}, {limiter.GCRA, 1, 3, 400 * time.Millisecond},
	}
	for _, b := range buckets {
		base := limiter.Config{Algorithm: b.alg, Rate: b.r, Capacity: b.c}
		block := base
		block.Penalty = limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: time.Duration(float64(b.c)/b.r*2) * time.Second}
		idle := base
		idle.ForgetIdle = b.idle
		whole := base
		whole.Refill = limiter.RefillWhole
		interval := base
		interval.Refill = limiter.RefillInterval
		// The timer started with the server: its ticks fall at a phase
		// of their own, 37 % into the epoch's periods.
		interval.Phase = (interval.RefillPeriod() * 37 / 100).Round(time.Millisecond)
		for _, c := range []limiter.Config{block, idle, whole, interval} {
			tag := c.Penalty.String() + string(c.Refill)
			if c.ForgetIdle > 0 {
				tag = "forget-idle-" + c.ForgetIdle.String()
			}
			out = append(out, cell{fmt.Sprintf("%s-%g-per-s-%d-%s", b.alg, b.r, b.c, tag), c})
		}
	}
	return out
}

// inferCell infers the simulated limiter c, with the behaviours without
// left out of infer's candidates.
func inferCell(t *testing.T, c limiter.Config, without []Behaviour) *Inference {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("the limiter refuses the cell: %v", err)
	}
	o := time.Date(2030, 1, 1, 0, 0, 0, 300e6, time.UTC)
	e := newSimEngine(simServer{cfg: c, oneWay: 2 * time.Millisecond}, o)
	inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock, Without: without})
	if err != nil {
		t.Fatal(err)
	}
	pen := "no penalty"
	if inf.Penalty != nil {
		pen = "penalty " + string(inf.Penalty.Kind)
		if d := inf.Penalty.DurationS; d != nil {
			pen += fmt.Sprintf(" %gs [%g, %g]", d.Value, d.Low, d.High)
		}
	}
	t.Logf("%s fit %s (closest %s, reproduced %.3f), %s, quirks %v, params %s; %.1fs, %d requests; %s",
		inf.Algorithm, inf.Fit, inf.Closest, inf.Reproduced, pen, inf.Quirks, paramsText(inf.Params), inf.DurationS, inf.Requests, inf.Validation)
	return inf
}

// paramsText prints the params that are set, for logs.
func paramsText(p Params) string {
	var b strings.Builder
	for _, x := range []struct {
		name string
		p    *Param
	}{{"limit", p.Limit}, {"window_s", p.WindowS}, {"capacity", p.Capacity}, {"rate_per_s", p.RatePerS}, {"idle_s", p.IdleS}} {
		if x.p != nil {
			fmt.Fprintf(&b, "%s=%g ", x.name, x.p.Value)
		}
	}
	return strings.TrimSpace(b.String())
}

// TestBehavioursAreNeverExactWithoutTheirModel is the property the fit
// levels exist for: a limiter with a penalty or quirk infer has no model
// of (its behaviour's model left out of the candidates) is answered
// approximate or misfit, never exact, so `infer --expect` on it can never
// exit 1 on a guess — bucket quirks too (idle eviction and whole-token
// refill were once let through as an exact token bucket; all 51 cells are
// approximate or misfit now). Behind RLPROBE_SOAK=1 for the full grid; CI
// runs ciCells.
func TestBehavioursAreNeverExactWithoutTheirModel(t *testing.T) {
	t.Parallel()
	cells := behaviourCells()
	for _, c := range cells {
		if !runCell(c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			inf := inferCell(t, c.cfg, BehavioursOf(c.cfg))
			if inf.Fit == FitExact {
				t.Errorf("%s answered %s, exact, without a model of its behaviour", c.name, inf.Algorithm)
			}
		})
	}
}

// ciCells are the cells every test run infers: one a behaviour and
// family kind; RLPROBE_SOAK=1 runs them all.
var ciCells = []string{
	"fixed-window-5-per-1s-block:3s", "fixed-window-5-per-1s-extend", "fixed-window-5-per-1s-restart",
	"sliding-window-counter-5-per-1s-restart", "token-bucket-2-per-s-5-block:5s",
	"token-bucket-2-per-s-5-forget-idle-500ms", "token-bucket-2-per-s-5-whole", "gcra-4-per-s-8-whole",
	"gcra-2-per-s-5-interval",
	// A restart on a fixed window fits only within a few milliseconds of
	// its length, which its own coarse grid misses (searcher.across).
	"fixed-window-4-per-1.5s-restart",
	// A sliding log that restarts recovered after 5 s in the opening (its
	// scans' refusals moved the end): a first space from 1.7 s never held
	// its 1.5 s, and a fixed window that restarts came out exact.
	"sliding-log-4-per-1.5s-restart",
	// A counter that blocks stayed within 4 outcomes of the sliding log
	// that blocks after the rival rounds, against a slack of 5; the rival
	// slack is what the answer's own misses leave (fit.rivalSlack).
	"sliding-log-8-per-2s-block:8s",
	// A bucket of 1/s forgotten after 400 ms refills less than a token
	// between pauses of the idle time: it was no candidate at all
	// (hyp.degenerate), and shows its rate only to a key kept busy.
	"token-bucket-1-per-s-3-forget-idle-400ms",
}

// runCell reports whether the cell of that name runs in this test run.
func runCell(name string) bool {
	return os.Getenv("RLPROBE_SOAK") != "" || slices.Contains(ciCells, name)
}

// TestBehaviourGrid is issue 22's grid: with every behaviour's model among
// the candidates, every cell is named exact and right — the family, the
// behaviour and the parameters (penalty and idle lengths too) within 5 %.
// CI runs ciCells; RLPROBE_SOAK=1 runs all 51. One cell
// (reproducibleCell) is inferred twice, to the same document.
func TestBehaviourGrid(t *testing.T) {
	t.Parallel()
	for _, c := range behaviourCells() {
		if !runCell(c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			inf := inferCell(t, c.cfg, nil)
			if c.name == reproducibleCell {
				reproduce(t, c.cfg, inf)
			}
			if inf.Fit != FitExact {
				t.Errorf("fit %s, want exact (note: %s)", inf.Fit, inf.Note)
			}
			checkParams(t, c.cfg, inf)
			checkBehaviour(t, c.cfg, inf)
		})
	}
}

// within checks that a reported parameter is within 5 % of want.
func within(t *testing.T, name string, p *Param, want float64) {
	t.Helper()
	if p == nil {
		t.Errorf("%s not reported, want %g", name, want)
		return
	}
	if math.Abs(p.Value-want) > 0.05*want {
		t.Errorf("%s = %g [%g, %g], want %g within 5%%", name, p.Value, p.Low, p.High, want)
	}
}

// checkParams compares an inference's limit and window (or capacity and
// rate) with the limiter it was run on, within 5 %.
func checkParams(t *testing.T, c limiter.Config, inf *Inference) {
	t.Helper()
	switch {
	case c.Refill == limiter.RefillInterval:
		// A fixed window of the capacity per refill period, on the timer.
		within(t, "limit", inf.Params.Limit, float64(c.Capacity))
		within(t, "window_s", inf.Params.WindowS, c.RefillPeriod().Seconds())
		if p := inf.Params.PhaseS; p == nil {
			t.Errorf("phase_s not reported, want %g", c.Phase.Seconds())
		} else if d := math.Abs(p.Value - c.Phase.Seconds()); min(d, c.RefillPeriod().Seconds()-d) > 0.05*c.RefillPeriod().Seconds() {
			t.Errorf("phase_s = %g [%g, %g], want %g within 5%% of the period", p.Value, p.Low, p.High, c.Phase.Seconds())
		}
	case c.Limit > 0:
		within(t, "limit", inf.Params.Limit, float64(c.Limit))
		within(t, "window_s", inf.Params.WindowS, c.Window.Seconds())
	default:
		within(t, "capacity", inf.Params.Capacity, float64(c.Capacity))
		within(t, "rate_per_s", inf.Params.RatePerS, c.Rate)
	}
}

// checkBehaviour compares an inference's family and behaviour with the
// limiter it was run on (a block's length and an idle time within 5 %).
func checkBehaviour(t *testing.T, c limiter.Config, inf *Inference) {
	t.Helper()
	want := familyOf(c.Algorithm)
	if c.Algorithm == limiter.SlidingLog && c.Penalty.Kind == limiter.PenaltyExtend {
		want = FixedWindow // a log whose times all move to the latest request is a fixed window
	}
	if c.Refill == limiter.RefillInterval {
		want = FixedWindow // a bucket refilled whole on a timer is a fixed window on the timer
		if inf.Alignment == nil || *inf.Alignment != AlignTimer {
			t.Errorf("alignment %v, want %s", inf.Alignment, AlignTimer)
		}
	}
	if inf.Algorithm != want {
		t.Errorf("algorithm %q, want %q", inf.Algorithm, want)
	}
	switch {
	case !c.Penalty.IsZero():
		if inf.Penalty == nil || inf.Penalty.Kind != c.Penalty.Kind {
			t.Errorf("penalty %+v, want %s", inf.Penalty, c.Penalty)
		} else if c.Penalty.Kind == limiter.PenaltyBlock {
			within(t, "penalty duration_s", inf.Penalty.DurationS, c.Penalty.Duration.Seconds())
		}
	case inf.Penalty != nil:
		t.Errorf("penalty %+v, want none", inf.Penalty)
	}
	var quirks []Behaviour
	if c.ForgetIdle > 0 {
		quirks = append(quirks, BehaviourIdle)
		within(t, "idle_s", inf.Params.IdleS, c.ForgetIdle.Seconds())
	}
	if c.Refill == limiter.RefillWhole {
		quirks = append(quirks, BehaviourWholeToken)
	}
	if !slices.Equal(inf.Quirks, quirks) {
		t.Errorf("quirks %v, want %v", inf.Quirks, quirks)
	}
}

// familyOf is the family infer names for a limiter algorithm.
func familyOf(a limiter.Algorithm) Family {
	switch a {
	case limiter.TokenBucket, limiter.GCRA:
		return TokenBucket
	case limiter.LeakyBucket:
		return LeakyBucketQueue
	}
	return Family(a)
}

// reproducibleCell is the cell TestBehaviourGrid infers twice
// (reproduce).
const reproducibleCell = "fixed-window-5-per-1s-block:3s"

// reproduce infers c a second time and requires the document of the
// first run, first: the same limiter, inferred twice in the simulator,
// gets the same experiments and the same answer. The design once chose
// between experiments whose scores differed only by the order of a
// floating-point sum over a map: this cell's documents differed between
// any two of three runs.
func reproduce(t *testing.T, c limiter.Config, first *Inference) {
	t.Helper()
	a, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(inferCell(t, c, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the second run differs from the first:\n%s\n%s", a, b)
	}
}

// TestTimerOffTheEpochIsNoEpochWindow: a bucket refilled whole every
// 2.5 s by a timer 37 ms off the epoch's ticks was named an exact fixed
// window on the epoch (a timer that only tied was no rival). A timer that
// fits as well more than a hundredth of the window off the epoch is one
// (fit.offEpochTimer): the answer is the timer, or not exact.
func TestTimerOffTheEpochIsNoEpochWindow(t *testing.T) {
	t.Parallel()
	for _, phase := range []time.Duration{37 * time.Millisecond, 2460 * time.Millisecond} {
		t.Run(phase.String(), func(t *testing.T) {
			c := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 5, Refill: limiter.RefillInterval, Phase: phase}
			inf := inferCell(t, c, nil)
			al := "null"
			if inf.Alignment != nil {
				al = *inf.Alignment
			}
			if inf.Fit == FitExact && al != AlignTimer {
				t.Errorf("exact %s aligned %s, want the timer or not exact", inf.Algorithm, al)
			}
		})
	}
}

// TestBehaviourGridJitter (RLPROBE_SOAK=1) is the grid under the disorder
// injection of the noise tests: a network of up to 3 ms of jitter, which
// reorders bursts, a seed per cell. Every cell is named exact and right —
// the family, the behaviour and the parameters within 5 % — as in
// TestBehaviourGrid. (With seeds 22 and 23 every cell was; 24 and 25
// left one cell each approximate, a fixed window and a sliding log that
// block 3 s, the family right. 48, 48 and 49 of the 51 were exact with
// seeds 22 to 24 before the design weighed each send's own delay, ran
// experiments after a block as well as during it, and moved a precision
// range's second parameter with its first.)
func TestBehaviourGridJitter(t *testing.T) {
	if os.Getenv("RLPROBE_SOAK") == "" {
		t.Skip("soak: RLPROBE_SOAK=1")
	}
	t.Parallel()
	cells := behaviourCells()
	fits := make([]Fit, len(cells))
	t.Run("cells", func(t *testing.T) {
		for i, c := range cells {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				o := time.Date(2030, 1, 1, 0, 0, 0, 300e6, time.UTC)
				e := newSimEngine(simServer{cfg: c.cfg, oneWay: 2 * time.Millisecond}, o)
				rng := rand.New(rand.NewPCG(uint64(i), 22))
				e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(3 * time.Millisecond))) }
				inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock})
				if err != nil {
					t.Fatal(err)
				}
				fits[i] = inf.Fit
				t.Logf("%s fit %s, %.1fs, %d requests", inf.Algorithm, inf.Fit, inf.DurationS, inf.Requests)
				if inf.Fit != FitExact {
					t.Errorf("fit %s, want exact (note: %s)", inf.Fit, inf.Note)
				}
				checkParams(t, c.cfg, inf)
				checkBehaviour(t, c.cfg, inf)
			})
		}
	})
	exact := 0
	for _, f := range fits {
		if f == FitExact {
			exact++
		}
	}
	t.Logf("%d of %d cells exact across 3 ms of jitter", exact, len(cells))
}
