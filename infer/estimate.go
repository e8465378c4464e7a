package infer

import (
	"math"
	"slices"

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
	for _, s := range slices.Concat(f.pool, f.brackets) {
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
	if w.h.v.aligned() {
		// Aligned windows fit at isolated lengths; the roundest one
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

// Bisecting for the ends of a winner's equally good range (bracket):
// the first step out from the winner, relative, doubled up to
// bracketReach (a factor of five either way: a range that reaches further
// is reported as reaching that far, and is wide), then bracketBisections
// halvings between the last good and the first bad value (the end to
// within 0.1 % of the step that found it).
const (
	bracketFirstStep  = 0.005
	bracketReach      = 4
	bracketBisections = 10
)

// bracket sets f.brackets: the winner's hypotheses at the two ends of the
// range of its continuous parameter (the others as w's) over which it
// misses no more than w does, and, for a timed behaviour, at the two ends
// of the range of the behaviour's length (the others as w's); each end is
// found by stepping out from w and bisecting. The search's grids refine
// around their best points, and the range they sampled can stop short of
// the truth's value; the reported range is that of everything that fits
// as well. Epoch-aligned windows fit at isolated lengths: their length is
// left as sampled.
func (f *fit) bracket(w scored, o *observations) {
	f.brackets = nil
	if !(w.h.x > 0) {
		return
	}
	if !w.h.v.aligned() {
		f.brackets = append(f.brackets, f.bracketOf(w, o, func(h *hyp) *float64 { return &h.x })...)
	}
	if w.h.v.timed() && w.h.p > 0 {
		f.brackets = append(f.brackets, f.bracketOf(w, o, func(h *hyp) *float64 { return &h.p })...)
	}
}

// widen adds to the pool the ends of answer w's equally good ranges
// (bracket), so that the design sees how far they reach: a range the
// grids sampled narrowly would look settled when it is not.
func (f *fit) widen(o *observations, w scored) {
	f.bracket(w, o)
	// A few ends against a large pool: looked up in it, not mapped.
	n := len(f.pool)
	inPool := func(h hyp) bool {
		return slices.ContainsFunc(f.pool[:n], func(s scored) bool { return s.h == h })
	}
	for _, e := range f.brackets {
		if !inPool(e.h) {
			f.pool = append(f.pool, e)
		}
	}
	f.brackets = nil
	f.offEpoch = nil
	if t, ok := f.offEpochTimer(w, o); ok {
		f.offEpoch = &t
		if !inPool(t.h) {
			f.pool = append(f.pool, t)
		}
	}
}

// offEpochTimer returns, for an answer w that is a fixed window on the
// epoch, the window on a server-wide timer of w's length and count whose
// phase lies farthest from the epoch's (either way, up to a quarter of
// the window) and that misses no more outcomes than w, when that phase is
// farther than the epoch's own (epochPhaseTols, epochPhaseDiv). A timer at phase 0 is
// the epoch window; one a few tens of milliseconds off is another
// limiter — a server that started its own timer at that moment — which
// the outcomes do not yet tell from it (a bucket refilled whole every
// 2.5 s by a timer 37 ms off the epoch was named an exact epoch window).
func (f *fit) offEpochTimer(w scored, o *observations) (scored, bool) {
	if !o.admits(timerVariant) {
		return scored{}, false // left out (Options.Without): no timer may enter the pool
	}
	if w.h.v.fam != FixedWindow || w.h.v.align != limiter.AlignEpoch || w.h.v.beh != "" || !(w.h.x > 0) {
		return scored{}, false
	}
	x := w.h.x
	least := max(epochPhaseTols*max(w.h.scale()/timeTolDiv, minTimeTol).Seconds(), x/epochPhaseDiv)
	try := func(ph float64) (scored, bool) {
		h := hyp{v: timerVariant, n: w.h.n, x: x, ph: math.Mod(ph+x, x)}
		r := replayObs(h, o, f.perClient, w.miss)
		if r.pruned || r.miss > w.miss {
			return scored{}, false
		}
		return scoreOf(h, r), true
	}
	var far scored
	reach := 0.0
	for _, dir := range []float64{1, -1} {
		d, s, ok := stepOut(least, x/4, bracketBisections/2, func(d float64) (scored, bool) {
			if d < least {
				return scored{}, false // within the epoch's own phase: not looked at
			}
			return try(dir * d)
		})
		if ok && d > reach {
			far, reach = s, d
		}
	}
	return far, reach > 0
}

// How far off the epoch a timer's phase must lie to be another limiter
// than the epoch window: epochPhaseTols timing tolerances (the replay's;
// closer, no measurement tells them apart) and a hundredth of the window
// (behind instances by request, with jitter, epoch windows of 2 s tied
// with timers 7 ms off, which check and watch, taking a timer's phase
// give or take a fiftieth of the window, hold to the same rule).
const (
	epochPhaseTols = 2
	epochPhaseDiv  = 100
)

// widest returns the ends of w's widest equally good range — of its
// continuous parameter or, for a timed behaviour, of the behaviour's
// length, over the hypotheses of w's variant, count and delay that fit as
// well as w (the range estimate reports) — and whether their ratio
// exceeds maxSpread. Epoch-aligned windows fit at isolated lengths: only
// their behaviour's length counts.
func (f *fit) widest(w scored) (lo, hi scored, wide bool) {
	ratio := 1.0
	consider := func(at func(h hyp) float64) {
		a, b := w, w
		for _, s := range slices.Concat(f.pool, f.brackets) {
			if s.miss != w.miss || s.h.v != w.h.v || s.h.n != w.h.n || s.h.d != w.h.d || !(at(s.h) > 0) {
				continue
			}
			if at(s.h) < at(a.h) {
				a = s
			}
			if at(s.h) > at(b.h) {
				b = s
			}
		}
		if r := at(b.h) / at(a.h); r > ratio {
			lo, hi, ratio = a, b, r
		}
	}
	if !w.h.v.aligned() {
		consider(func(h hyp) float64 { return h.x })
	}
	if w.h.v.timed() {
		consider(func(h hyp) float64 { return h.p })
	}
	return lo, hi, ratio > maxSpread
}

// bracketOf returns the hypotheses at the two ends of the range of w's
// parameter at(h) over which w's hypothesis misses no more than w.
func (f *fit) bracketOf(w scored, o *observations, at func(h *hyp) *float64) []scored {
	try := func(v float64) (scored, bool) {
		h := w.h
		*at(&h) = v
		r := replayObs(h, o, f.perClient, w.miss)
		if r.pruned || r.miss > w.miss {
			return scored{}, false
		}
		return scoreOf(h, r), true
	}
	v0 := *at(&w.h)
	var out []scored
	for _, dir := range []float64{-1, 1} {
		_, goodS, ok := stepOut(bracketFirstStep, bracketReach, bracketBisections, func(step float64) (scored, bool) {
			return try(v0 * math.Pow(1+step, dir))
		})
		if ok && goodS.h != w.h {
			out = append(out, goodS)
		}
	}
	return out
}

// stepOut finds how far a condition holds: from first, it doubles the
// step while try holds, up to limit, then halves the interval between
// the last step that held and the first that did not, n times. It returns
// the farthest step found to hold and try's hypothesis there; ok is false
// when none did (the first step failed, and so did every halving down
// from it toward zero).
func stepOut(first, limit float64, n int, try func(step float64) (scored, bool)) (step float64, s scored, ok bool) {
	good, bad := 0.0, math.NaN()
	for st := first; st <= limit; st *= 2 {
		if x, held := try(st); held {
			good, s, ok = st, x, true
			continue
		}
		bad = st
		break
	}
	if !math.IsNaN(bad) {
		for range n {
			mid := (good + bad) / 2
			if x, held := try(mid); held {
				good, s, ok = mid, x, true
			} else {
				bad = mid
			}
		}
	}
	return good, s, ok
}

// equalRange is the set of hypotheses that fit the observations as well as
// an answer: its variant, count and delay, and the ranges of its
// continuous parameter, its behaviour's length and its timer's phase over
// which they do (the answer's ranges, as the document reports them).
type equalRange struct {
	w        hyp
	x, p, ph [2]float64
}

// rangeOf returns answer w's equally good range over o: w's hypotheses
// in the pool that miss no more than w, and the ends bracket finds. It
// leaves f.brackets as it found them.
func (f *fit) rangeOf(w scored, o *observations) equalRange {
	saved := f.brackets
	defer func() { f.brackets = saved }()
	f.bracket(w, o)
	r := equalRange{w: w.h, x: [2]float64{w.h.x, w.h.x}, p: [2]float64{w.h.p, w.h.p}, ph: [2]float64{w.h.ph, w.h.ph}}
	widen := func(b *[2]float64, v float64) { b[0], b[1] = math.Min(b[0], v), math.Max(b[1], v) }
	for _, s := range slices.Concat(f.pool, f.brackets) {
		if s.miss > w.miss || s.h.v != w.h.v || s.h.n != w.h.n || s.h.d != w.h.d {
			continue
		}
		widen(&r.x, s.h.x)
		widen(&r.p, s.h.p)
		widen(&r.ph, s.h.ph)
	}
	return r
}

// contains reports whether h is one of the range's hypotheses: the same
// variant, count and delay, each parameter within its range.
func (r equalRange) contains(h hyp) bool {
	in := func(b [2]float64, v float64) bool { return b[0] <= v && v <= b[1] }
	return h.v == r.w.v && h.n == r.w.n && h.d == r.w.d && in(r.x, h.x) && in(r.p, h.p) && in(r.ph, h.ph)
}
