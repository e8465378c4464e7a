package infer

import (
	"math"
	"slices"

	"github.com/rlprobe/rlprobe/limiter"
)

// geomGrid returns lo, lo·ratio, … up to and including hi.
func geomGrid(lo, hi, ratio float64) []float64 {
	if !(lo > 0) || hi < lo {
		return nil
	}
	var xs []float64
	for x := lo; x < hi*(1+1e-9); x *= ratio {
		xs = append(xs, x)
	}
	if len(xs) == 0 || xs[len(xs)-1] < hi*(1-1e-9) {
		xs = append(xs, hi)
	}
	return xs
}

// search fits every hypothesis of sp to o.
//
// Aligned variants (epoch, timer) are evaluated at every window of their
// grid: whole multiples of a round unit (1 ms for short windows), because
// the edges of an aligned window depend on its length to the nanosecond; a
// timer's phase at each length is the one the edge gaps place (edgeSet.phase).
//
// Every other variant is searched in passes. A coarse geometric grid is
// scored with a generous timing tolerance (coarseTolDiv), so that points
// near a narrow optimum — left by precise experiments — still score well;
// around the best coarse points of every (variant, count, delay) that
// competes with the best of all, a fine grid is scored with the normal
// tolerance; then ever finer grids around the best fine points; then each
// fine line that did worse than the best of its kind and count around that
// best (across). Only the normally scored hypotheses enter the fit.
func search(o *observations, sp space) *fit {
	f := &fit{total: len(o.list), best: map[variant]scored{}, fam: map[Family]scored{}, perClient: sp.perClient,
		refs: refsOf(o), bounds: map[variant][2]float64{}}
	f.slack = slackFor(o)
	for _, ax := range sp.axes {
		b := [2]float64{ax.lo, ax.hi}
		if pb, ok := sp.bounds[ax.v]; ok {
			b = pb
		}
		f.bounds[ax.v] = b
	}
	sr := &searcher{o: o, sp: sp, f: f, famMiss: map[Family]int{}, global: math.MaxInt,
		coarseFam: map[Family]int{}, coarseGlobal: math.MaxInt,
		furthest: map[Family]replay{}, furthestHyp: map[Family]hyp{}, seen: map[hyp]int{}}
	lines := sr.grid()
	fineLines := sr.fine(lines)
	sr.finer(fineLines)
	sr.across(lines, fineLines)
	for fam, h := range sr.furthestHyp {
		if _, ok := sr.famMiss[fam]; ok {
			continue
		}
		r := replayObs(h, o, sp.perClient, -1)
		sr.famMiss[fam] = r.miss
		sr.all = append(sr.all, scoreOf(h, r))
	}
	f.finish(sr.all, sr.famMiss)
	return f
}

// searcher holds the state of one search: the best misses so far, per
// family and of all, for the normal and the coarse (tolerant) scores, and
// every normally scored hypothesis.
type searcher struct {
	o  *observations
	sp space
	f  *fit

	famMiss map[Family]int
	global  int
	// The coarse pass keeps its own bests (tolerant scores are not
	// comparable with normal ones).
	coarseFam    map[Family]int
	coarseGlobal int
	// For a family all of whose hypotheses stop early, the one that got
	// furthest stands for it (replayed in full at the end).
	furthest    map[Family]replay
	furthestHyp map[Family]hyp
	all         []scored
	seen        map[hyp]int
}

// line is the hypotheses of one (variant, count, delay, length) along the
// continuous parameter, with their misses.
type line struct {
	v    variant
	n, d int64
	p    float64 // timed behaviours: the behaviour's length, seconds
	xs   []float64
	miss []int
}

// boundOf stops a replay once it misses more than its family's best plus
// slack, or more than the best of all plus farBehind: such a family can no
// longer win.
func (sr *searcher) boundOf(famMiss map[Family]int, global int, fam Family) int {
	b := -1
	if m, ok := famMiss[fam]; ok {
		b = m + sr.f.slack
	}
	if global < math.MaxInt && (b < 0 || global+sr.f.farBehind() < b) {
		b = global + sr.f.farBehind()
	}
	return b
}

// pruned keeps, per family, the stopped replay that got furthest.
func (sr *searcher) pruned(h hyp, r replay) {
	if r.reached < 0 {
		return // never replayed: not a candidate (see hyp.degenerate)
	}
	if fr, ok := sr.furthest[h.v.fam]; !ok || r.reached > fr.reached || (r.reached == fr.reached && r.miss < fr.miss) {
		sr.furthest[h.v.fam], sr.furthestHyp[h.v.fam] = r, h
	}
}

// compact drops, before sr.all grows, the hypotheses that fit.finish would
// drop: those more than the slack behind their family's best so far (a
// family's best only improves, so they stay behind). A search scores tens of
// thousands of hypotheses and keeps few. When more than half stay, the list
// grows to twice their number, so that compacting stays amortised O(1) per
// hypothesis.
func (sr *searcher) compact() {
	sr.all = slices.DeleteFunc(sr.all, func(s scored) bool { return s.miss > sr.famMiss[s.h.v.fam]+sr.f.slack })
	if len(sr.all) > cap(sr.all)/2 {
		sr.all = slices.Grow(sr.all, len(sr.all))
	}
}

// eval scores h with the normal tolerance (once) and keeps it.
func (sr *searcher) eval(h hyp) int {
	if m, ok := sr.seen[h]; ok {
		return m
	}
	r := replayTol(h, sr.o, sr.sp.perClient, sr.boundOf(sr.famMiss, sr.global, h.v.fam), timeTolDiv)
	if r.pruned {
		sr.pruned(h, r)
		sr.seen[h] = math.MaxInt
		return math.MaxInt
	}
	sr.global = min(sr.global, r.miss)
	if m, ok := sr.famMiss[h.v.fam]; !ok || r.miss < m {
		sr.famMiss[h.v.fam] = r.miss
	}
	if len(sr.all) == cap(sr.all) {
		sr.compact()
	}
	sr.all = append(sr.all, scoreOf(h, r))
	sr.seen[h] = r.miss
	return r.miss
}

// coarse scores h with the coarse pass's tolerance.
func (sr *searcher) coarse(h hyp) int {
	r := replayTol(h, sr.o, sr.sp.perClient, sr.boundOf(sr.coarseFam, sr.coarseGlobal, h.v.fam), coarseTolDiv)
	if r.pruned {
		sr.pruned(h, r)
		return math.MaxInt
	}
	sr.coarseGlobal = min(sr.coarseGlobal, r.miss)
	if m, ok := sr.coarseFam[h.v.fam]; !ok || r.miss < m {
		sr.coarseFam[h.v.fam] = r.miss
	}
	return r.miss
}

// grid scores every axis on its grid: epoch-aligned windows (and given
// values) normally, the rest coarsely; it returns the coarse lines.
func (sr *searcher) grid() []line {
	edges := findEdges(sr.o, sr.sp.perClient)
	epochLines := 0
	for _, ax := range sr.sp.axes {
		if ax.v.aligned() {
			epochLines += len(ax.counts)
		}
	}
	unitPoints := min(maxUnitPoints, max(200, replayBudget/max(1, len(sr.o.list)*epochLines)))
	var lines []line
	for _, ax := range sr.sp.axes {
		v := ax.v
		xs := ax.xs
		epoch := v.aligned()
		if xs == nil {
			if epoch {
				xs = unitGrid(ax.lo, ax.hi, unitPoints)
			} else {
				xs = geomGrid(ax.lo, ax.hi, coarseRatio)
			}
		}
		// A timer's phases at each length come from the edge gaps (a
		// length that places none is no candidate): each length appears
		// once per candidate phase.
		var phs []float64
		switch {
		case v.align == limiter.AlignTimer:
			kept := xs[:0:0]
			for _, x := range xs {
				for _, ph := range edges.phases(x) {
					kept = append(kept, x)
					phs = append(phs, ph)
				}
			}
			xs = kept
		case epoch:
			xs = edges.filter(v, xs)
		}
		delays := []int64{0}
		if v.fam == LeakyBucketQueue {
			delays = ax.delays
		}
		ps := []float64{0}
		if v.timed() {
			ps = timedCandidates(sr.o, v.beh, sr.sp.perClient)
		}
		for _, n := range ax.counts {
			for _, d := range delays {
				if v.fam == LeakyBucketQueue && d >= n {
					continue
				}
				for _, p := range ps {
					l := line{v: v, n: n, d: d, p: p, xs: xs, miss: make([]int, len(xs))}
					for i, x := range xs {
						h := hyp{v: v, n: n, x: x, d: d, p: p}
						if phs != nil {
							h.ph = phs[i]
						}
						if epoch || ax.xs != nil {
							l.miss[i] = sr.eval(h)
						} else {
							l.miss[i] = sr.coarse(h)
						}
					}
					if !epoch && ax.xs == nil {
						lines = append(lines, l)
					}
				}
			}
		}
	}
	return lines
}

// fine scores a fine grid around the near-best coarse points of the
// competitive lines, and returns the fine lines.
func (sr *searcher) fine(lines []line) []line {
	var fineLines []line
	for _, l := range lines {
		lbest := slices.Min(l.miss)
		if lbest == math.MaxInt || lbest > sr.coarseGlobal+3*sr.f.slack+2 {
			continue
		}
		fl := line{v: l.v, n: l.n, d: l.d, p: l.p}
		var near []int
		for i := range l.xs {
			if l.miss[i] == lbest {
				near = append(near, i)
			}
		}
		if len(near) > maxFineCentres {
			picked := make([]int, maxFineCentres)
			for k := range picked {
				picked[k] = near[k*(len(near)-1)/(maxFineCentres-1)]
			}
			near = picked
		}
		for _, i := range near {
			a := l.xs[max(i-1, 0)]
			b := l.xs[min(i+1, len(l.xs)-1)]
			for x := a; x <= b*(1+1e-12); x *= fineRatio {
				fl.xs = append(fl.xs, x)
				fl.miss = append(fl.miss, sr.eval(hyp{v: l.v, n: l.n, x: x, d: l.d, p: l.p}))
			}
		}
		fineLines = append(fineLines, fl)
	}
	return fineLines
}

// finer scores ever finer grids around the best fine points of each line.
func (sr *searcher) finer(fineLines []line) {
	for _, l := range fineLines {
		pts := map[float64]int{}
		for i, x := range l.xs {
			pts[x] = l.miss[i]
		}
		for _, ratio := range []float64{finerRatio, finestRatio} {
			best := math.MaxInt
			for _, m := range pts {
				best = min(best, m)
			}
			if best == math.MaxInt || best > sr.global+refineBehind*sr.f.slack {
				break
			}
			var centres []float64
			for x, m := range pts {
				if m == best {
					centres = append(centres, x)
				}
			}
			slices.Sort(centres)
			if len(centres) > maxFineCentres {
				centres = []float64{centres[0], centres[len(centres)/2], centres[len(centres)-1]}
			}
			for _, c := range centres {
				step := math.Pow(ratio, 10)
				for x := c / step; x < c*step; x *= ratio {
					if _, done := pts[x]; done || math.Abs(x/c-1) < 1e-12 {
						continue
					}
					pts[x] = sr.eval(hyp{v: l.v, n: l.n, x: x, d: l.d, p: l.p})
				}
			}
		}
	}
}

// across refines every fine line around the best value of the lines of its
// kind and count that did better than it: a limiter's window (or rate) is
// one, whatever its behaviour, and a behaviour whose model fits only within
// a few milliseconds of the length (a fixed window whose refusals restart
// it) may score nothing near it on its own coarse grid, while a rival
// variant's refinement found it.
//
// A coarse line too far behind to be refined on its own (fine) is refined
// here as well: a sliding log whose refusals re-anchor it scored nothing
// near its window on its coarse grid, missed 17 outcomes at best, and was
// dropped while the fixed window that restarts fitted every one.
func (sr *searcher) across(lines, fineLines []line) {
	type key struct {
		windowed bool
		n        int64
	}
	best := map[key]scored{}
	for _, s := range sr.all {
		k := key{s.h.v.windowed(), s.h.n}
		if b, ok := best[k]; !ok || s.miss < b.miss {
			best[k] = s
		}
	}
	type lineKey struct {
		v    variant
		n, d int64
		p    float64
	}
	refined := map[lineKey]bool{}
	for _, l := range fineLines {
		refined[lineKey{l.v, l.n, l.d, l.p}] = true
	}
	todo := slices.Clone(fineLines)
	for _, l := range lines {
		if !refined[lineKey{l.v, l.n, l.d, l.p}] {
			todo = append(todo, l)
		}
	}
	for _, l := range todo {
		b, ok := best[key{l.v.windowed(), l.n}]
		if !ok || b.h.v == l.v || b.miss > sr.global+sr.f.slack || slices.Min(l.miss) <= b.miss {
			continue
		}
		for _, r := range []float64{fineRatio, finerRatio} {
			step := math.Pow(r, acrossSteps)
			for x := b.h.x / step; x <= b.h.x*step*(1+1e-12); x *= r {
				sr.eval(hyp{v: l.v, n: l.n, x: x, d: l.d, p: l.p})
			}
		}
	}
}

// acrossSteps is the half-width of across's refinements, in fine and in
// finer steps: the finer ones find an optimum narrower than a fine step
// (a sliding log whose refusals re-anchor it fits within a millisecond or
// two of its window, and fine steps of 6 ms at 1.5 s passed it by while a
// fixed window that restarts fitted).
const acrossSteps = 3
