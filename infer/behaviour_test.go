package infer

import (
	"context"
	"fmt"
	"os"
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

// TestBehavioursAreNeverExactWithoutTheirModel is the property the fit
// levels exist for: a limiter with a penalty infer has no model of is
// answered approximate or misfit, never exact, so `infer --expect` on it
// can never exit 1 on a guess. Bucket quirks may be exact only as their
// own family (see the cases). Behind RLPROBE_SOAK=1 for the full grid; CI
// runs one parameter set a cell.
func TestBehavioursAreNeverExactWithoutTheirModel(t *testing.T) {
	cells := behaviourCells()
	for i, c := range cells {
		if os.Getenv("RLPROBE_SOAK") == "" && (i/3)%3 != 0 && c.cfg.Limit > 0 {
			continue // one parameter set of three per window cell in CI
		}
		t.Run(c.name, func(t *testing.T) {
			if err := c.cfg.Validate(); err != nil {
				t.Skipf("the limiter does not take this behaviour yet: %v", err)
			}
			o := time.Date(2030, 1, 1, 0, 0, 0, 300e6, time.UTC)
			e := newSimEngine(simServer{cfg: c.cfg, oneWay: 2 * time.Millisecond}, o)
			inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock, Without: BehavioursOf(c.cfg)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s fit %s (closest %s, reproduced %.3f) in %.1fs, %d requests; %s", c.name, inf.Algorithm, inf.Fit, inf.Closest, inf.Reproduced, inf.DurationS, inf.Requests, inf.Validation)
			switch {
			case c.cfg.Refill == limiter.RefillInterval:
				// A bucket refilled whole on a timer is a fixed window on
				// the timer (here at the epoch's phase): named so, rightly.
				if inf.Fit == FitExact && inf.Algorithm != FixedWindow {
					t.Errorf("%s answered %s, exact; want fixed-window when exact", c.name, inf.Algorithm)
				}
			case !c.cfg.Penalty.IsZero():
				if inf.Fit == FitExact {
					t.Errorf("%s answered %s, exact, without a model of its penalty (%+v)", c.name, inf.Algorithm, inf.Params)
				}
			default:
				// Idle eviction and whole-token refill: a known gap — a
				// short idle time or a whole-token grid can still come out
				// an exact token bucket (right family, quirk unnamed). What
				// holds: an exact answer names the bucket's family.
				if inf.Fit == FitExact && inf.Algorithm != TokenBucket {
					t.Errorf("%s answered %s, exact; want token-bucket when exact", c.name, inf.Algorithm)
				}
			}
		})
	}
}
