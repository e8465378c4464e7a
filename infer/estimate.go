package infer

import (
	"math"

	"github.com/rlprobe/rlprobe/limiter"
)

// interval is the range of a parameter over equally good hypotheses.
type interval struct{ lo, hi, value float64 }

// estimate returns, for the winning variant, the count and the continuous
// parameter (window seconds or rate) with the ranges over which they
// reproduce the observations as well as the winner (and, for the
// leaky-bucket-queue, the delay= range).
func (f *fit) estimate(w scored) (n interval, x interval, d interval) {
	var ties []scored
	for _, s := range f.pool {
		if s.h.v == w.h.v && s.miss == w.miss {
			ties = append(ties, s)
		}
	}
	// Count: the tied count with the most tied hypotheses (the most robust),
	// the winner's on a tie.
	byN := map[int64]int{}
	for _, s := range ties {
		byN[s.h.n]++
	}
	bestN := w.h.n
	for k, c := range byN {
		if c > byN[bestN] || (c == byN[bestN] && k < bestN) {
			bestN = k
		}
	}
	n = interval{lo: math.Inf(1), hi: math.Inf(-1), value: float64(bestN)}
	d = interval{lo: math.Inf(1), hi: math.Inf(-1)}
	x = interval{lo: math.Inf(1), hi: math.Inf(-1)}
	byD := map[int64]int{}
	for _, s := range ties {
		n.lo, n.hi = math.Min(n.lo, float64(s.h.n)), math.Max(n.hi, float64(s.h.n))
		if s.h.n != bestN {
			continue
		}
		byD[s.h.d]++
		d.lo, d.hi = math.Min(d.lo, float64(s.h.d)), math.Max(d.hi, float64(s.h.d))
	}
	bestD := w.h.d
	if w.h.n != bestN {
		bestD = -1
	}
	for k, c := range byD {
		if bestD < 0 || c > byD[bestD] || (c == byD[bestD] && k < bestD) {
			bestD = k
		}
	}
	d.value = float64(bestD)
	for _, s := range ties {
		if s.h.n == bestN && s.h.d == bestD {
			x.lo, x.hi = math.Min(x.lo, s.h.x), math.Max(x.hi, s.h.x)
		}
	}
	x.value = (x.lo + x.hi) / 2
	if w.h.v.windowed() && w.h.v.align == limiter.AlignEpoch {
		// Epoch-aligned windows fit at isolated lengths; the roundest one
		// (fewest digits in seconds) is the one a server would configure.
		best := math.Inf(1)
		for _, s := range ties {
			if s.h.n == bestN && roundness(s.h.x) < roundness(best) {
				best = s.h.x
			}
		}
		if !math.IsInf(best, 0) {
			x.value = best
		}
	}
	return n, x, d
}

// roundness is the number of decimal digits after the point needed to
// write x seconds to the millisecond (0 for whole seconds): lower is
// rounder. Ties go to the smaller value.
func roundness(x float64) float64 {
	if math.IsInf(x, 0) {
		return math.Inf(1)
	}
	ms := int64(math.Round(x * 1000))
	digits := 3
	for ms%10 == 0 && digits > 0 {
		ms /= 10
		digits--
	}
	return float64(digits) + x/1e9
}
