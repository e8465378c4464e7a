package infer

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// Grid ratios of the parameter search over the continuous parameter
// (window or rate): a coarse geometric grid, refined near the best.
const (
	coarseRatio = 1.04
	fineRatio   = 1.004
)

// scored is a hypothesis with the outcomes it misses and its states after
// the replay.
type scored struct {
	h      hyp
	miss   int
	states states
	worst  mismatch
	r      replay // the replay, to be continued over later observations
}

// axis is the part of the hypothesis space that belongs to one variant:
// the counts (limit or capacity), the leaky-bucket delays, and the range of
// the continuous parameter (window in seconds or rate per second).
type axis struct {
	v      variant
	counts []int64
	delays []int64 // leaky-bucket-queue only
	lo, hi float64
	// xs, when non-nil, lists the continuous values to try instead of a grid
	// over [lo, hi] (the surviving windows of an epoch-aligned variant).
	xs []float64
}

// space is the hypothesis space a fit searches.
type space struct {
	axes []axis
	// bounds, when set, are the ranges of a first fit, carried along.
	bounds map[variant][2]float64
	// perClient replays each client with its own state.
	perClient bool
}

// fit is the result of a parameter search.
type fit struct {
	total int      // outcomes observed
	pool  []scored // every hypothesis within slack of the best of its family
	best  map[variant]scored
	fam   map[Family]scored
	slack int
	// perClient: the fit gave each client its own state.
	perClient bool
	// refs are the observations fitted (their result indices, in order),
	// so that a later fit over more observations can continue this one.
	refs []int
	// bounds are the first fit's ranges per variant, which narrowed
	// spaces never leave.
	bounds map[variant][2]float64
}

// slackFor is how many missed outcomes still count as "as good as the best":
// one, plus one per 50 clusters of requests (jitter at window edges,
// reordering). Clusters, not outcomes: a burst of 200 is one event, where a
// model is off by a count or two, not by 200.
func slackFor(o *observations) int { return 1 + len(o.clusters)/50 }

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
// Epoch-aligned variants are evaluated at every window of their grid:
// whole multiples of a round unit (1 ms for short windows), because the
// edges of an epoch-aligned window depend on its length to the nanosecond.
//
// Every other variant is searched in passes. A coarse geometric grid is
// scored with a generous timing tolerance (coarseTolDiv), so that points
// near a narrow optimum — left by precise experiments — still score well;
// around the best coarse points of every (variant, count, delay) that
// competes with the best of all, a fine grid is scored with the normal
// tolerance; then ever finer grids around the best fine points. Only the
// normally scored hypotheses enter the fit.
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
	sr.finer(sr.fine(lines))
	for fam, h := range sr.furthestHyp {
		if _, ok := sr.famMiss[fam]; ok {
			continue
		}
		r := replayObs(h, o, sp.perClient, -1)
		sr.famMiss[fam] = r.miss
		sr.all = append(sr.all, scored{h: h, miss: r.miss, states: r.states, worst: r.worst, r: r})
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

// line is the hypotheses of one (variant, count, delay) along the
// continuous parameter, with their misses.
type line struct {
	v    variant
	n, d int64
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
	if fr, ok := sr.furthest[h.v.fam]; !ok || r.reached > fr.reached || (r.reached == fr.reached && r.miss < fr.miss) {
		sr.furthest[h.v.fam], sr.furthestHyp[h.v.fam] = r, h
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
	sr.all = append(sr.all, scored{h: h, miss: r.miss, states: r.states, worst: r.worst, r: r})
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
		if ax.v.windowed() && ax.v.align == limiter.AlignEpoch {
			epochLines += len(ax.counts)
		}
	}
	unitPoints := min(maxUnitPoints, max(200, replayBudget/max(1, len(sr.o.list)*epochLines)))
	var lines []line
	for _, ax := range sr.sp.axes {
		v := ax.v
		xs := ax.xs
		epoch := v.windowed() && v.align == limiter.AlignEpoch
		if xs == nil {
			if epoch {
				xs = unitGrid(ax.lo, ax.hi, unitPoints)
			} else {
				xs = geomGrid(ax.lo, ax.hi, coarseRatio)
			}
		}
		if epoch {
			xs = edges.filter(v, xs)
		}
		delays := []int64{0}
		if v.fam == LeakyBucketQueue {
			delays = ax.delays
		}
		for _, n := range ax.counts {
			for _, d := range delays {
				if v.fam == LeakyBucketQueue && d >= n {
					continue
				}
				l := line{v: v, n: n, d: d, xs: xs, miss: make([]int, len(xs))}
				for i, x := range xs {
					h := hyp{v: v, n: n, x: x, d: d}
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
		fl := line{v: l.v, n: l.n, d: l.d}
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
				fl.miss = append(fl.miss, sr.eval(hyp{v: l.v, n: l.n, x: x, d: l.d}))
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
		for _, ratio := range []float64{1.0004, 1.00004} {
			best := math.MaxInt
			for _, m := range pts {
				best = min(best, m)
			}
			if best == math.MaxInt || best > sr.global+3*sr.f.slack {
				break
			}
			var centres []float64
			for x, m := range pts {
				if m == best {
					centres = append(centres, x)
				}
			}
			slices.Sort(centres)
			if len(centres) > 8 {
				centres = []float64{centres[0], centres[len(centres)/2], centres[len(centres)-1]}
			}
			for _, c := range centres {
				step := math.Pow(ratio, 10)
				for x := c / step; x < c*step; x *= ratio {
					if _, done := pts[x]; done || math.Abs(x/c-1) < 1e-12 {
						continue
					}
					pts[x] = sr.eval(hyp{v: l.v, n: l.n, x: x, d: l.d})
				}
			}
		}
	}
}

// farBehind is how many outcomes beyond the best of all a family's best may
// miss before the family keeps only its best hypothesis per variant: it can
// no longer win, and is kept only to be reported as an alternative.
func (f *fit) farBehind() int { return 3*f.slack + 2 }

// finish builds the pool, the best per variant and per family from the
// evaluated hypotheses.
func (f *fit) finish(all []scored, famMiss map[Family]int) {
	global := math.MaxInt
	for _, m := range famMiss {
		global = min(global, m)
	}
	for _, s := range all {
		if s.miss > famMiss[s.h.v.fam]+f.slack {
			continue
		}
		if b, ok := f.best[s.h.v]; !ok || s.miss < b.miss || (s.miss == b.miss && lessHyp(s.h, b.h)) {
			f.best[s.h.v] = s
		}
		if famMiss[s.h.v.fam] <= global+f.farBehind() {
			f.pool = append(f.pool, s)
		}
	}
	for _, v := range allVariants {
		b, ok := f.best[v]
		if !ok {
			continue
		}
		if famMiss[v.fam] > global+f.farBehind() {
			f.pool = append(f.pool, b)
		}
		if fb, ok := f.fam[v.fam]; !ok || b.miss < fb.miss {
			f.fam[v.fam] = b
		}
	}
}

// refsOf lists the result indices of o's observations in order.
func refsOf(o *observations) []int {
	refs := make([]int, len(o.list))
	for i, ob := range o.list {
		refs[i] = ob.ref
	}
	return refs
}

// extend fits o, which holds the observations of f followed by newer ones,
// by continuing the replays of f's pool over the newer clusters, then
// searching more finely around the best of any (variant, count, delay)
// whose best got worse (the grid may have become too coarse for it). It
// returns nil when o does not extend f's observations.
func (f *fit) extend(o *observations) *fit {
	n := len(f.refs)
	if n > len(o.list) || !slices.Equal(f.refs, refsOf(o)[:n]) {
		return nil
	}
	from := len(o.clusters)
	for i, cl := range o.clusters {
		if cl[0] == n {
			from = i
			break
		}
		if cl[1] > n {
			return nil // a new observation joined an old cluster
		}
	}
	g := &fit{total: len(o.list), best: map[variant]scored{}, fam: map[Family]scored{}, perClient: f.perClient,
		refs: refsOf(o), bounds: f.bounds}
	g.slack = slackFor(o)
	type lkey struct {
		v    variant
		n, d int64
	}
	oldBest := map[lkey]int{}
	newBest := map[lkey]int{}
	var all []scored
	famMiss := map[Family]int{}
	add := func(s scored) {
		all = append(all, s)
		if m, ok := famMiss[s.h.v.fam]; !ok || s.miss < m {
			famMiss[s.h.v.fam] = s.miss
		}
		k := lkey{s.h.v, s.h.n, s.h.d}
		if m, ok := newBest[k]; !ok || s.miss < m {
			newBest[k] = s.miss
		}
	}
	seen := map[hyp]bool{}
	// Continue the best first, so that the others can stop early once they
	// fall behind their family's best.
	pool := slices.Clone(f.pool)
	slices.SortStableFunc(pool, func(a, b scored) int { return cmp.Compare(a.miss, b.miss) })
	for _, s := range pool {
		k := lkey{s.h.v, s.h.n, s.h.d}
		if m, ok := oldBest[k]; !ok || s.miss < m {
			oldBest[k] = s.miss
		}
		seen[s.h] = true
		bound := -1
		if m, ok := famMiss[s.h.v.fam]; ok && f.best[s.h.v].h != s.h {
			bound = m + g.slack
		}
		r := replayFrom(s.h, o, f.perClient, bound, from, s.r)
		if !r.pruned {
			add(scored{h: s.h, miss: r.miss, states: r.states, worst: r.worst, r: r})
		}
	}
	global := math.MaxInt
	for _, m := range famMiss {
		global = min(global, m)
	}
	for k, nb := range newBest {
		if nb <= oldBest[k] || famMiss[k.v.fam] > global+3*g.slack || (k.v.windowed() && k.v.align == limiter.AlignEpoch) {
			continue
		}
		var centres []float64
		for _, s := range all {
			if s.h.v == k.v && s.h.n == k.n && s.h.d == k.d && s.miss == nb {
				centres = append(centres, s.h.x)
			}
		}
		slices.Sort(centres)
		if len(centres) > 8 {
			centres = []float64{centres[0], centres[len(centres)/2], centres[len(centres)-1]}
		}
		for _, ratio := range []float64{fineRatio, 1.0004} {
			for _, c := range centres {
				step := math.Pow(ratio, 10)
				for x := c / step; x < c*step; x *= ratio {
					h := hyp{v: k.v, n: k.n, x: x, d: k.d}
					if seen[h] {
						continue
					}
					seen[h] = true
					r := replayObs(h, o, f.perClient, famMiss[k.v.fam]+g.slack)
					if !r.pruned {
						add(scored{h: h, miss: r.miss, states: r.states, worst: r.worst, r: r})
					}
				}
			}
		}
	}
	g.finish(all, famMiss)
	return g
}

// lessHyp orders hypotheses of one variant for reproducible choices.
func lessHyp(a, b hyp) bool {
	if a.n != b.n {
		return a.n < b.n
	}
	if a.d != b.d {
		return a.d < b.d
	}
	return a.x < b.x
}

// narrowed returns the space of a refit after more observations: for each
// variant still in the pool, its counts and the range of its continuous
// parameter widened by 8 % (for epoch-aligned variants, the surviving
// windows themselves).
func (f *fit) narrowed() space {
	type acc struct {
		counts map[int64]bool
		delays map[int64]bool
		lo, hi float64
		xs     map[float64]bool
	}
	per := map[variant]*acc{}
	for _, s := range f.pool {
		a := per[s.h.v]
		if a == nil {
			a = &acc{counts: map[int64]bool{}, delays: map[int64]bool{}, lo: s.h.x, hi: s.h.x, xs: map[float64]bool{}}
			per[s.h.v] = a
		}
		a.counts[s.h.n] = true
		a.delays[s.h.d] = true
		a.lo, a.hi = math.Min(a.lo, s.h.x), math.Max(a.hi, s.h.x)
		a.xs[s.h.x] = true
	}
	sp := space{perClient: f.perClient, bounds: f.bounds}
	for _, v := range allVariants {
		a := per[v]
		if a == nil {
			continue
		}
		ax := axis{v: v, lo: a.lo / 1.08, hi: a.hi * 1.08}
		if b, ok := f.bounds[v]; ok {
			ax.lo, ax.hi = math.Max(ax.lo, b[0]), math.Min(ax.hi, b[1])
		}
		for c := range a.counts {
			ax.counts = append(ax.counts, c)
		}
		for d := range a.delays {
			ax.delays = append(ax.delays, d)
		}
		slices.Sort(ax.counts)
		slices.Sort(ax.delays)
		if v.windowed() && v.align == limiter.AlignEpoch {
			for x := range a.xs {
				ax.xs = append(ax.xs, x)
			}
			slices.Sort(ax.xs)
		}
		sp.axes = append(sp.axes, ax)
	}
	return sp
}

// maxUnitPoints bounds the epoch grid; replayBudget bounds the model
// steps the epoch grids of one search may take (the grid gets coarser for
// long runs); maxFineCentres bounds the coarse points refined per line.
const (
	maxUnitPoints  = 20000
	replayBudget   = 30_000_000
	maxFineCentres = 8
)

// unitGrid returns the multiples of a round unit (1, 2 or 5 × 10^k ms, at
// least 1 ms) in [lo, hi] seconds, the unit chosen so that there are at most
// maxPoints of them.
func unitGrid(lo, hi float64, maxPoints int) []float64 {
	unit := 0.001
	for k := 0; (hi-lo)/unit > float64(maxPoints); k++ {
		unit = 0.001 * []float64{2, 5, 10}[k%3] * math.Pow(10, float64(k/3))
	}
	var xs []float64
	for m := math.Ceil(lo/unit - 1e-9); m*unit <= hi*(1+1e-12); m++ {
		xs = append(xs, math.Round(m*unit*1e6)/1e6)
	}
	return xs
}

// winner returns the best hypothesis: fewest misses, ties broken by the
// order of allVariants.
func (f *fit) winner() (scored, bool) {
	var w scored
	found := false
	for _, v := range allVariants {
		b, ok := f.best[v]
		if !ok {
			continue
		}
		if !found || b.miss < w.miss {
			w, found = b, true
		}
	}
	return w, found
}

// winnerFor is winner with an advertisement as evidence: among the
// hypotheses that miss as few outcomes as the winner, the advertised model
// wins (the data cannot tell it from the others; the headers can).
func (f *fit) winnerFor(a advert) (scored, bool) {
	w, ok := f.winner()
	if !ok || a.names(w.h) {
		return w, ok
	}
	for _, s := range f.pool {
		if s.miss == w.miss && a.names(s.h) {
			return s, true
		}
	}
	return w, ok
}

// plausible returns the hypotheses within slack outcomes of the best of all.
func (f *fit) plausible(slack int) []scored {
	w, ok := f.winner()
	if !ok {
		return nil
	}
	var p []scored
	for _, s := range f.pool {
		if s.miss <= w.miss+slack {
			p = append(p, s)
		}
	}
	return p
}

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

// sortPool orders hypotheses for reproducible output.
func sortPool(p []scored) {
	slices.SortFunc(p, func(a, b scored) int {
		if c := cmp.Compare(a.miss, b.miss); c != 0 {
			return c
		}
		if c := cmp.Compare(variantRank(a.h.v), variantRank(b.h.v)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.h.n, b.h.n); c != 0 {
			return c
		}
		return cmp.Compare(a.h.x, b.h.x)
	})
}

func variantRank(v variant) int {
	for i, x := range allVariants {
		if x == v {
			return i
		}
	}
	return len(allVariants)
}

// newSpace builds the space of a first fit: every variant worth fitting,
// with the count candidates of the observations, windows in [wmin, wmax]
// seconds and rates in [rmin, rmax] per second.
func newSpace(o *observations, wmin, wmax, rmin, rmax float64, perClient bool) space {
	counts, delays := countCandidates(o)
	sp := space{perClient: perClient}
	for _, v := range variantsFor(o) {
		ax := axis{v: v, counts: counts, delays: delays, lo: wmin, hi: wmax}
		if !v.windowed() {
			ax.lo, ax.hi = rmin, rmax
		}
		sp.axes = append(sp.axes, ax)
	}
	return sp
}

// defaultSpace derives a search space from the observations alone: windows
// from 5 ms to 1.5× the observed span (at most twice maxWindow), rates to
// match.
func defaultSpace(o *observations, maxWindow time.Duration, perClient bool) space {
	span := o.last.Sub(o.first).Seconds()
	wmax := math.Min(math.Max(1.5*span, 0.1), 2*maxWindow.Seconds())
	return newSpace(o, 0.005, wmax, 1/wmax, 1000, perClient)
}

// variantsFor returns the variants worth fitting: the leaky-bucket-queue only
// when accepted requests were held (queueing).
func variantsFor(o *observations) []variant {
	var vs []variant
	for _, v := range allVariants {
		if v.fam == LeakyBucketQueue && !o.queueing {
			continue
		}
		vs = append(vs, v)
	}
	return vs
}

// countCandidates proposes limits/capacities and leaky-bucket delays. Two
// counts estimate the quota available from idle: the most accepted in one
// cluster that also saw a rejection (a burst that exhausted the limiter),
// and everything accepted up to and including the first such cluster (a
// series of growing bursts from idle). Each gives A−2…A+1; the undelayed
// requests of the burst give the leaky bucket's delay=.
func countCandidates(o *observations) (counts, delays []int64) {
	best, bestUndelayed, first := quotaRuns(o)
	seen := map[int64]bool{}
	for _, a := range []int{best, first} {
		for c := max(a-2, 1); c <= max(a+1, 1); c++ {
			if !seen[int64(c)] {
				seen[int64(c)] = true
				counts = append(counts, int64(c))
			}
		}
	}
	slices.Sort(counts)
	for dd := max(bestUndelayed-2, 0); dd <= bestUndelayed; dd++ {
		delays = append(delays, int64(dd))
	}
	return counts, delays
}

// quotaEstimate is the larger of the two estimates of countCandidates (at
// least 1).
func quotaEstimate(o *observations) int {
	best, _, first := quotaRuns(o)
	return max(best, first, 1)
}

// quotaRuns returns the most accepted in one cluster that also saw a
// rejection (and how many of those were not delayed), and the number
// accepted up to and including the first cluster with a rejection.
func quotaRuns(o *observations) (best, bestUndelayed, first int) {
	total := 0
	for _, cl := range o.runs() {
		acc, undelayed, rejected := 0, 0, false
		for i := cl[0]; i < cl[1]; i++ {
			ob := o.list[i]
			if ob.accepted {
				acc++
				if ob.delay <= o.tol {
					undelayed++
				}
			} else {
				rejected = true
			}
		}
		total += acc
		if !rejected {
			continue
		}
		if first == 0 {
			first = total
		}
		if acc > best {
			best, bestUndelayed = acc, undelayed
		}
	}
	return best, bestUndelayed, first
}
