package limiter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestTokenBucketMatchesXTimeRate replays randomised arrivals through the
// token bucket and through golang.org/x/time/rate (NewLimiter(rate,
// capacity).AllowN(t, 1)) and requires the same decision every time, and
// Remaining = floor(tokens left).
//
// x/time/rate computes in float64 seconds. To make its arithmetic exact, so
// that a disagreement can only be a bug, arrivals lie on a 125 ms grid
// (1/8 s, a whole number of ms) and rates are powers of two: every token
// count is then a binary fraction that float64 holds exactly, and every
// refill interval is a whole number of µs.
func TestTokenBucketMatchesXTimeRate(t *testing.T) {
	const grid = 125 * ms
	rates := []float64{0.25, 0.5, 1, 2, 4, 8}
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 1))
		r := rates[rng.IntN(len(rates))]
		capacity := 1 + rng.IntN(8)
		t.Run(fmt.Sprintf("seed=%d/rate=%v/capacity=%d", seed, r, capacity), func(t *testing.T) {
			cfg := Config{Algorithm: TokenBucket, Rate: r, Capacity: int64(capacity)}
			oracle := rate.NewLimiter(rate.Limit(r), capacity)
			var st State
			now := t0
			admitted, rejected := 0, 0
			for i := range 2000 {
				switch x := rng.IntN(10); {
				case x < 4: // simultaneous
				case x < 9:
					now = now.Add(grid * time.Duration(1+rng.IntN(int(4/r)+1)))
				default:
					now = now.Add(grid * time.Duration(rng.IntN(100)))
				}
				var d Decision
				st, d = cfg.Step(st, now)
				want := oracle.AllowN(now, 1)
				if d.Allowed != want {
					t.Fatalf("request %d at t0+%v: Allowed = %v, x/time/rate says %v", i, now.Sub(t0), d.Allowed, want)
				}
				if tokens := int64(math.Floor(oracle.TokensAt(now))); d.Remaining != tokens {
					t.Fatalf("request %d at t0+%v: Remaining = %d, x/time/rate has %d tokens", i, now.Sub(t0), d.Remaining, tokens)
				}
				if d.Allowed {
					admitted++
				} else {
					rejected++
				}
			}
			if admitted < 100 || rejected < 100 {
				t.Errorf("admitted %d, rejected %d: the arrivals do not exercise both", admitted, rejected)
			}
		})
	}
}
