package infer

import "testing"

// TestSplitCountdowns: remaining values split into interleaved countdowns
// from their top, in stretches at every rise (a window edge), as K
// instances behind a per-request balancer advertise them; one limiter is
// one countdown, and values that neither continue a countdown nor start
// one at the top (a bucket's refill) do not split.
func TestSplitCountdowns(t *testing.T) {
	for _, tt := range []struct {
		name  string
		vs    []int64
		k     int
		final int // length of the last stretch
	}{
		{"one limiter", []int64{4, 3, 2, 1, 0}, 1, 5},
		{"three instances", []int64{4, 4, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0}, 3, 15},
		{"two instances, an edge within", []int64{4, 4, 3, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0}, 2, 10},
		{"a bucket's refill: a rise not to the top", []int64{4, 4, 3, 3, 2, 3, 2}, 0, 0},
		{"out of place", []int64{4, 2, 1}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, final := splitCountdowns(tt.vs)
			if c.k != tt.k || len(final) != tt.final {
				t.Errorf("k %d, last stretch %v; want k %d and a last stretch of %d", c.k, final, tt.k, tt.final)
			}
		})
	}
}
