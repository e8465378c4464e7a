package infer

import (
	"cmp"
	"math"
	"slices"

	"github.com/rlprobe/rlprobe/limiter"
)

// Grid ratios of the parameter search over the continuous parameter
// (window or rate): a coarse geometric grid, refined near the best.
const (
	coarseRatio = 1.04
	fineRatio   = 1.004
	// finerRatio and finestRatio are the steps of the refinements around
	// the best fine points: ten times finer each.
	finerRatio  = 1.0004
	finestRatio = 1.00004
	// refineBehind: a family more than this many slacks behind the best
	// is not refined further (it cannot win).
	refineBehind = 3
)

// scored is a hypothesis with the outcomes it misses and its states after
// the replay.
type scored struct {
	h    hyp
	miss int
	r    replay // the replay (its states and worst mismatch), to be continued over later observations
}

// scoreOf scores h by its replay r.
func scoreOf(h hyp, r replay) scored { return scored{h: h, miss: r.miss, r: r} }

// quota is how many requests s's hypothesis admits to one client from a
// whole state: its count, on each of the instances a balancer sends the
// requests to in turn.
func (s scored) quota() int64 { return s.h.n * int64(s.r.states.instances()) }

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
	// brackets are the winner's hypotheses at the ends of its equally good
	// range (bracket), for the estimate; nil until the conclusion.
	brackets []scored
	// offEpoch, for a fixed window on the epoch as the answer, is a window
	// on a server-wide timer of the answer's length and count at the
	// phase farthest from the epoch's that fits as well (widen); nil when
	// none beyond the timing tolerance does.
	offEpoch *scored
}

// slackFor is how many missed outcomes still count as "as good as the best":
// one, plus one per 50 clusters of requests (jitter at window edges,
// reordering). Clusters, not outcomes: a burst of 200 is one event, where a
// model is off by a count or two, not by 200.
func slackFor(o *observations) int { return 1 + len(o.clusters)/50 }

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
	f.pool = slices.Grow(f.pool, len(all))
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

// merge returns the fit of f's and g's hypotheses together; both fit the
// same observations.
func (f *fit) merge(g *fit) *fit {
	m := &fit{total: f.total, best: map[variant]scored{}, fam: map[Family]scored{}, slack: f.slack,
		perClient: f.perClient, refs: f.refs, bounds: f.bounds}
	seen := map[hyp]bool{}
	var all []scored
	famMiss := map[Family]int{}
	for _, s := range slices.Concat(f.pool, g.pool) {
		if seen[s.h] {
			continue
		}
		seen[s.h] = true
		all = append(all, s)
		if b, ok := famMiss[s.h.v.fam]; !ok || s.miss < b {
			famMiss[s.h.v.fam] = s.miss
		}
	}
	m.finish(all, famMiss)
	return m
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
	oldBest := map[lkey]int{}
	newBest := map[lkey]int{}
	all := make([]scored, 0, len(f.pool)+len(f.pool)/2) // the pool, and what the finer searches add
	famMiss := map[Family]int{}
	add := func(s scored) {
		all = append(all, s)
		if m, ok := famMiss[s.h.v.fam]; !ok || s.miss < m {
			famMiss[s.h.v.fam] = s.miss
		}
		k := lkey{s.h.v, s.h.n, s.h.d, s.h.p}
		if m, ok := newBest[k]; !ok || s.miss < m {
			newBest[k] = s.miss
		}
	}
	seen := make(map[hyp]bool, len(f.pool)+len(f.pool)/2)
	// try replays a new hypothesis h once, bounded by its family's best.
	try := func(h hyp) {
		if seen[h] {
			return
		}
		seen[h] = true
		r := replayObs(h, o, f.perClient, famMiss[h.v.fam]+g.slack)
		if !r.pruned {
			add(scoreOf(h, r))
		}
	}
	// Continue the best first, so that the others can stop early once they
	// fall behind their family's best.
	pool := slices.Clone(f.pool)
	slices.SortStableFunc(pool, func(a, b scored) int { return cmp.Compare(a.miss, b.miss) })
	for _, s := range pool {
		k := lkey{s.h.v, s.h.n, s.h.d, s.h.p}
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
			add(scoreOf(s.h, r))
		}
	}
	global := math.MaxInt
	for _, m := range famMiss {
		global = min(global, m)
	}
	// In a fixed order, here and below: each try is bounded by its
	// family's best so far, so the order decides what is pruned, and a
	// map's order would make two runs of one experiment differ.
	for _, k := range sortedKeys(newBest, lkeyLess) {
		nb := newBest[k]
		if nb <= oldBest[k] || famMiss[k.v.fam] > global+refineBehind*g.slack || k.v.aligned() {
			continue
		}
		var centres []float64
		for _, s := range all {
			if s.h.v == k.v && s.h.n == k.n && s.h.d == k.d && s.h.p == k.p && s.miss == nb {
				centres = append(centres, s.h.x)
			}
		}
		slices.Sort(centres)
		if len(centres) > maxFineCentres {
			centres = []float64{centres[0], centres[len(centres)/2], centres[len(centres)-1]}
		}
		for _, ratio := range []float64{fineRatio, finerRatio} {
			for _, c := range centres {
				step := math.Pow(ratio, 10)
				for x := c / step; x < c*step; x *= ratio {
					try(hyp{v: k.v, n: k.n, x: x, d: k.d, p: k.p})
				}
			}
		}
	}
	// A timed behaviour's candidate lengths come from the outcomes, which
	// the new observations may have narrowed: try them at the best of each
	// (variant, count) still in the running.
	timedBest := map[lkey]scored{}
	for _, s := range all {
		if !s.h.v.timed() || famMiss[s.h.v.fam] > global+refineBehind*g.slack {
			continue
		}
		k := lkey{v: s.h.v, n: s.h.n}
		if b, ok := timedBest[k]; !ok || s.miss < b.miss {
			timedBest[k] = s
		}
	}
	// Idle eviction whose every hypothesis fell out early (its first
	// candidates came from the opening's short gaps) starts again from the
	// best plain hypothesis of its family, at the lengths the pauses seen
	// since suggest: an idle time longer than any gap of the opening. (A
	// block's candidates come from the refusals, which the opening has.)
	alive := map[variant]bool{}
	for k := range timedBest {
		alive[k.v] = true
	}
	for _, v := range variantsFor(o) {
		if v.beh != BehaviourIdle || alive[v] {
			continue
		}
		plain := v
		plain.beh = ""
		b, ok := f.best[plain]
		if !ok || famMiss[v.fam] > global+refineBehind*g.slack {
			continue
		}
		b.h.v = v
		timedBest[lkey{v: v, n: b.h.n}] = b
	}
	for _, k := range sortedKeys(timedBest, lkeyLess) {
		b := timedBest[k]
		for _, p := range timedCandidates(o, b.h.v.beh, f.perClient) {
			h := b.h
			h.p = p
			try(h)
		}
	}
	// A timer's phase comes from the edge gaps, which the new observations
	// may have added to: place it afresh at every length still in the
	// running.
	var edges *edgeSet
	phases := map[float64][]float64{} // by length: every count's hypotheses share them
	for _, s := range slices.Clone(all) {
		if s.h.v.align != limiter.AlignTimer || famMiss[s.h.v.fam] > global+refineBehind*g.slack {
			continue
		}
		if edges == nil {
			es := findEdges(o, f.perClient)
			edges = &es
		}
		phs, ok := phases[s.h.x]
		if !ok {
			phs = edges.phases(s.h.x)
			phases[s.h.x] = phs
		}
		for _, ph := range phs {
			h := s.h
			h.ph = ph
			try(h)
		}
	}
	g.finish(all, famMiss)
	return g
}

// lessHyp orders hypotheses of one variant for reproducible choices. An
// aligned window's rounder length comes first: of the isolated lengths
// that fit, it is the one a server would configure (and the one estimate
// reports), so the hypothesis that predicts is the one reported.
func lessHyp(a, b hyp) bool {
	if a.n != b.n {
		return a.n < b.n
	}
	if a.d != b.d {
		return a.d < b.d
	}
	if ra, rb := roundness(a.x), roundness(b.x); a.v.aligned() && ra != rb {
		return ra < rb
	}
	if a.x != b.x {
		return a.x < b.x
	}
	return a.p < b.p
}

// maxUnitPoints bounds the epoch grid; replayBudget bounds the model
// steps the epoch grids of one search may take (the grid gets coarser for
// long runs); maxFineCentres bounds the coarse points refined per line.
const (
	maxUnitPoints  = 20000
	replayBudget   = 30_000_000
	maxFineCentres = 8
)

// winner returns the best hypothesis: fewest misses, ties broken by the
// order of allVariants — except that a behaviour beyond the plain models
// must earn its place: the best plain hypothesis wins unless the best with
// a behaviour misses more than slack fewer outcomes (what timing noise
// explains is no evidence of a penalty or a quirk). One plain answer gives
// way without that margin: an epoch-aligned fixed window at a length less
// round than that of a timer-aligned one that misses no more (epochTimer).
func (f *fit) winner() (scored, bool) {
	if t, ok := f.epochTimer(); ok {
		return t, true
	}
	var plain, beh scored
	hasPlain, hasBeh := false, false
	for _, v := range allVariants {
		b, ok := f.best[v]
		if !ok {
			continue
		}
		switch {
		case v.beh == "" && (!hasPlain || b.miss < plain.miss):
			plain, hasPlain = b, true
		case v.beh != "" && (!hasBeh || b.miss < beh.miss):
			beh, hasBeh = b, true
		}
	}
	if hasBeh && (!hasPlain || beh.miss+f.slack < plain.miss) {
		return beh, true
	}
	return plain, hasPlain
}

// epochTimer returns the best timer-aligned window when it displaces the
// best plain answer, an epoch-aligned fixed window: it misses no more, at
// a rounder length. Epoch-aligned windows of neighbouring lengths fall at
// phases that look random, so over a run's span one of them passes for a
// timer at any phase (2.496 s where a timer ticks every 2.5 s); a server
// configures round lengths, and one that ticks on a timer of its own is
// the simpler account of an epoch window nobody would configure.
func (f *fit) epochTimer() (scored, bool) {
	var plain scored
	has := false
	for _, v := range plainVariants {
		if b, ok := f.best[v]; ok && (!has || b.miss < plain.miss) {
			plain, has = b, true
		}
	}
	t, ok := f.best[timerVariant]
	if !ok || !has || plain.h.v.fam != FixedWindow || plain.h.v.align != limiter.AlignEpoch {
		return scored{}, false
	}
	if t.miss <= plain.miss && roundness(t.h.x) < roundness(plain.h.x) {
		return t, true
	}
	return scored{}, false
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

// plausible returns the hypotheses within slack outcomes of the winner.
// While a plain model wins, a hypothesis with a behaviour is plausible
// only when it misses fewer outcomes than the winner: a behaviour must
// earn its place, as it must in winner. Behaviours nest or mimic their
// plain models (a block of no length, an idle time never reached, a
// bucket that hardly refills and blocks for a window's length), so one
// that merely ties explains nothing the plain model does not; whether the
// answer is settled, and how long the budget is, are judged on the plain
// models alone. The design still weighs the tying behaviours
// (candidates), so that where an experiment can split them cheaply it
// does.
func (f *fit) plausible(slack int) []scored {
	return f.within(slack, true)
}

// candidates returns the hypotheses within slack outcomes of the winner,
// behaviours that tie with a plain winner included: what the design
// weighs.
func (f *fit) candidates(slack int) []scored {
	return f.within(slack, false)
}

// within returns the hypotheses within slack outcomes of the winner; with
// gated, behaviours only where they earned their place (see plausible).
func (f *fit) within(slack int, gated bool) []scored {
	w, ok := f.winner()
	if !ok {
		return nil
	}
	keep := func(s *scored) bool {
		return s.miss <= w.miss+slack && (!gated || w.h.v.beh != "" || s.h.v.beh == "" || s.miss < w.miss)
	}
	n := 0
	for i := range f.pool {
		if keep(&f.pool[i]) {
			n++
		}
	}
	p := make([]scored, 0, n)
	for i := range f.pool {
		if keep(&f.pool[i]) {
			p = append(p, f.pool[i])
		}
	}
	sortPool(p) // the pool's order follows map iteration; the design must not
	return p
}

// sortPool orders hypotheses for reproducible output: by misses, variant
// (in allVariants' order), count, continuous parameter, behaviour length,
// delay and phase. It sorts indices with each variant's rank looked up
// once, then moves each hypothesis once: a scored, with its replay, is
// large to swap, and the pool is sorted after every fit.
func sortPool(p []scored) {
	type key struct{ miss, rank, i int }
	keys := make([]key, len(p))
	for i := range p {
		keys[i] = key{p[i].miss, variantRank(p[i].h.v), i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.miss, b.miss); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		ha, hb := &p[a.i].h, &p[b.i].h
		return cmp.Or(cmp.Compare(ha.n, hb.n), cmp.Compare(ha.x, hb.x), cmp.Compare(ha.p, hb.p),
			cmp.Compare(ha.d, hb.d), cmp.Compare(ha.ph, hb.ph))
	})
	sorted := make([]scored, len(p))
	for j, k := range keys {
		sorted[j] = p[k.i]
	}
	copy(p, sorted)
}

func variantRank(v variant) int {
	for i, x := range allVariants {
		if x == v {
			return i
		}
	}
	return len(allVariants)
}

// lkey is a search line: a variant, count, delay and behaviour length.
type lkey struct {
	v    variant
	n, d int64
	p    float64
}

// lkeyLess orders lines for reproducible iteration.
func lkeyLess(a, b lkey) int {
	return cmp.Or(cmp.Compare(variantRank(a.v), variantRank(b.v)), cmp.Compare(a.n, b.n), cmp.Compare(a.d, b.d), cmp.Compare(a.p, b.p), cmp.Compare(a.v.String(), b.v.String()))
}

// sortedKeys returns m's keys in the order cmp gives.
func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp)
	return keys
}
