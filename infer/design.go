package infer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/units"
)

// experiment is a candidate schedule: sends at absolute times, all as
// client 0, with a name for the record's phase.
type experiment struct {
	phase string
	at    []time.Time
	// groups[i] is the group of send i: outcomes are compared per group
	// (the number accepted), as the fitting compares clusters.
	groups []int
	info   float64 // expected information, bits
	cost   time.Duration
}

func (e *experiment) end() time.Time { return e.at[len(e.at)-1] }

// paced returns e as prober.paced sends it: every send at least pace
// after the one before it. e's sends are in time order (as every
// candidate's are), so each keeps its group.
func (e experiment) paced(pace time.Duration) experiment {
	if pace <= 0 || len(e.at) == 0 {
		return e
	}
	sends := pacedSends(e.sends(e.at[0]), pace)
	at := make([]time.Time, len(sends))
	for i, sd := range sends {
		at[i] = e.at[0].Add(sd.At)
	}
	e.at = at
	return e
}

// Timing resolution of the design: a prediction that changes when the
// sends move by max(scale/designTolDiv, minDesignTol) is uncertain.
const (
	designTolDiv = 500
	minDesignTol = 2 * time.Millisecond
)

// sends turns the experiment into a schedule's sends starting at start.
func (e *experiment) sends(start time.Time) []patterns.Send {
	out := make([]patterns.Send, len(e.at))
	for i, t := range e.at {
		out[i] = patterns.Send{At: t.Sub(start), Phase: e.phase}
	}
	return out
}

// builder appends sends to an experiment.
type builder struct {
	e     experiment
	group int
}

func newBuilder(phase string) *builder { return &builder{e: experiment{phase: phase}} }

// burst adds n sends at t, as one group.
func (b *builder) burst(t time.Time, n int) *builder {
	for range n {
		b.e.at = append(b.e.at, t)
		b.e.groups = append(b.e.groups, b.group)
	}
	b.group++
	return b
}

// spread adds n sends evenly over [t, t+span], each its own group.
func (b *builder) spread(t time.Time, span time.Duration, n int) *builder {
	for i := range n {
		off := time.Duration(0)
		if n > 1 {
			off = span * time.Duration(i) / time.Duration(n-1)
		}
		b.e.at = append(b.e.at, t.Add(off))
		b.e.groups = append(b.e.groups, b.group)
		b.group++
	}
	return b
}

func (b *builder) done() experiment { return b.e }

// weighted is a hypothesis with its prior weight in the design.
type weighted struct {
	s scored
	w float64
}

// maxDesignHyps bounds the hypotheses simulated per candidate experiment.
const maxDesignHyps = 400

// missLikelihood is the relative likelihood of a hypothesis per outcome it
// misses beyond the best: a miss is twenty times less likely than a hit.
const missLikelihood = 0.05

// weigh gives each hypothesis of p a weight: each family, each variant
// within it and each (count, delay) group within that share equally, times
// the likelihood missLikelihood^(misses beyond the best) of the group's best
// hypothesis, shared within the group by likelihood. With limit > 0 it keeps
// at most about limit hypotheses, spread evenly over the continuous
// parameter of each group.
func weigh(p []scored, limit int) []weighted {
	type gkey struct {
		v    variant
		n, d int64
		p    float64
	}
	best := math.MaxInt
	groups := map[gkey][]int{} // indices into p
	var order []gkey
	for i, s := range p {
		best = min(best, s.miss)
		k := gkey{s.h.v, s.h.n, s.h.d, s.h.p}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	per := math.MaxInt
	if limit > 0 {
		per = max(limit/max(len(order), 1), 3)
	}
	famVariants := map[Family]map[variant]bool{}
	variantGroups := map[variant]int{}
	for _, k := range order {
		if famVariants[k.v.fam] == nil {
			famVariants[k.v.fam] = map[variant]bool{}
		}
		famVariants[k.v.fam][k.v] = true
		variantGroups[k.v]++
	}
	out := make([]weighted, 0, len(p))
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g, func(a, b int) int { return cmp.Compare(p[a].h.x, p[b].h.x) })
		pick := g
		if len(g) > per {
			pick = make([]int, 0, per)
			for i := range per {
				pick = append(pick, g[i*(len(g)-1)/(per-1)])
			}
		}
		// The group's weight goes to its hypotheses in proportion to their
		// likelihood, and the group weighs as its best hypothesis: a model
		// that fits only in a narrow range of its parameter is not thereby
		// less plausible than one that fits in a wide range.
		gbest := math.MaxInt
		for _, i := range pick {
			gbest = min(gbest, p[i].miss)
		}
		norm := 0.0
		for _, i := range pick {
			norm += math.Pow(missLikelihood, float64(p[i].miss-gbest))
		}
		w := 1 / float64(len(famVariants)) / float64(len(famVariants[k.v.fam])) / float64(variantGroups[k.v]) *
			math.Pow(missLikelihood, float64(gbest-best)) / norm
		for _, i := range pick {
			out = append(out, weighted{p[i], w * math.Pow(missLikelihood, float64(p[i].miss-gbest))})
		}
	}
	return out
}

// resolvedShare is the weight the leading class must hold for the
// hypotheses to count as resolved.
const resolvedShare = 0.99

// resolved reports whether the plausible hypotheses agree on what would be
// reported: one class holds nearly all the weight, and among its best
// hypotheses the continuous parameter varies by at most 10 %.
func resolved(p []scored) bool {
	if len(p) == 0 {
		return true
	}
	mass := map[class]float64{}
	total := 0.0
	for _, x := range weigh(p, 0) {
		mass[classOf(x.s.h)] += x.w
		total += x.w
	}
	var top class
	for c, m := range mass {
		if m > mass[top] {
			top = c
		}
	}
	if mass[top] < resolvedShare*total {
		return false
	}
	trace("resolved: class %+v holds %.3f of %.3f", top, mass[top], total)
	best := math.MaxInt
	for _, s := range p {
		if classOf(s.h) == top {
			best = min(best, s.miss)
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p {
		if classOf(s.h) == top && s.miss == best {
			x := canonX(s.h)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	return hi/lo <= 1.1
}

// designer simulates candidate experiments over weighted hypotheses. The
// experiments are sent as one client, whose identity in the results is
// client.
type designer struct {
	ws        []weighted
	perClient bool
	client    string
	// pace, when set, is the spacing of a paced session's sends (see
	// prober.paced): a burst is sent one request after another, and the
	// candidates are predicted as they will be sent. A burst predicted
	// at one instant but sent over K·pace would tell a sliding log from
	// a fixed window where the sends as made tell nothing, and the same
	// design would be chosen again and again.
	pace time.Duration
	ans  []answer // answers(ws), computed on first use
}

// answerOf returns the answer of hypothesis i of dz.ws.
func (dz *designer) answerOf(i int) answer {
	if dz.ans == nil {
		dz.ans = answers(dz.ws)
	}
	return dz.ans[i]
}

// signature is a hypothesis's predicted outcome of an experiment whose sends
// all arrive shift later: the number accepted per group.
func (dz *designer) signature(h hyp, from states, e *experiment, shift time.Duration) string {
	var b strings.Builder
	acc, g := 0, 0
	predict(h, from, e.at, shift, dz.client, dz.perClient, func(i int, d limiter.Decision) {
		if e.groups[i] != g {
			b.WriteString(strconv.Itoa(acc))
			b.WriteByte(',')
			acc, g = 0, e.groups[i]
		}
		if d.Allowed {
			acc++
		}
	})
	b.WriteString(strconv.Itoa(acc))
	return b.String()
}

// answerSpan is the relative width of the continuous parameter within
// which hypotheses of one class count as one answer: telling apart
// hypotheses closer than 2 % is worth nothing.
const answerSpan = 1.02

// answer is what a hypothesis would make infer report: its class and a
// group of neighbouring values of its continuous parameter.
type answer struct {
	c     class
	group int
}

// answers groups the hypotheses of each class by their continuous
// parameter: sorted, a group runs from its smallest value up to
// answerSpan times it. It returns each hypothesis's answer, by index.
func answers(ws []weighted) []answer {
	idx := make([]int, len(ws))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		ca, cb := classOf(ws[a].s.h), classOf(ws[b].s.h)
		if ca != cb {
			return cmp.Compare(fmt.Sprint(ca), fmt.Sprint(cb))
		}
		return cmp.Compare(canonX(ws[a].s.h), canonX(ws[b].s.h))
	})
	out := make([]answer, len(ws))
	group := 0
	var prev class
	start := 0.0
	for k, i := range idx {
		h := ws[i].s.h
		c, x := classOf(h), canonX(h)
		if k == 0 || c != prev || x > start*answerSpan {
			group++
			prev, start = c, x
		}
		out[i] = answer{c, group}
	}
	return out
}

// information returns the expected information (bits) that e's outcome
// carries about the answer: the mutual information H(outcome) −
// H(outcome | answer) under the hypotheses' weights. Outcomes that only
// split hypotheses of one answer are worth nothing, and so are differences
// that hinge on timing finer than a measurement can resolve (see
// designTolDiv).
func (dz *designer) information(e *experiment) float64 {
	type cell struct {
		a   answer
		sig string
	}
	joint := map[cell]float64{}
	bySig := map[string]float64{}
	byAns := map[answer]float64{}
	total := 0.0
	for i, x := range dz.ws {
		// A prediction that changes when the sends arrive a little early or
		// late (within what the fitting tolerates) is uncertain: the
		// hypothesis's weight is shared between both outcomes.
		shift := max(x.s.h.scale()/designTolDiv, minDesignTol)
		early := dz.signature(x.s.h, x.s.r.states, e, -shift)
		late := dz.signature(x.s.h, x.s.r.states, e, shift)
		a := dz.answerOf(i)
		for _, sig := range []string{early, late} {
			joint[cell{a, sig}] += x.w / 2
			bySig[sig] += x.w / 2
		}
		byAns[a] += x.w
		total += x.w
	}
	info := 0.0
	for c, m := range joint {
		if m > 0 {
			info += m / total * math.Log2(m*total/(bySig[c.sig]*byAns[c.a]))
		}
	}
	return info
}

// recoveries returns, per hypothesis, when a request would be admitted
// again after the sends at ats (empty: from the current state) if a
// request were sent at from, sorted.
func (dz *designer) recoveries(ats []time.Time, at time.Time) []time.Time {
	var out []time.Time
	for _, x := range dz.ws {
		seq := append(slices.Clone(ats), at)
		var d limiter.Decision // the last send's
		predict(x.s.h, x.s.r.states, seq, 0, dz.client, dz.perClient, func(_ int, di limiter.Decision) { d = di })
		if d.Allowed {
			out = append(out, at)
		} else {
			out = append(out, at.Add(d.RetryAfter))
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// splitPoints returns instants that split the sorted times ts near the
// given quantiles: midway between two neighbouring distinct values.
func splitPoints(ts []time.Time, qs ...float64) []time.Time {
	var out []time.Time
	for _, q := range qs {
		i := int(q * float64(len(ts)))
		if i <= 0 || i >= len(ts) {
			continue
		}
		// Find distinct neighbours around i.
		lo, hi := i-1, i
		for hi < len(ts) && !ts[hi].After(ts[lo]) {
			hi++
		}
		if hi == len(ts) {
			for lo > 0 && !ts[hi-1].After(ts[lo]) {
				lo--
			}
			if !ts[hi-1].After(ts[lo]) {
				continue
			}
			hi--
		}
		mid := ts[lo].Add(ts[hi].Sub(ts[lo]) / 2)
		if !slices.ContainsFunc(out, func(t time.Time) bool { return t.Equal(mid) }) {
			out = append(out, mid)
		}
	}
	return out
}

// combTeeth is the number of probes of a comb.
const combTeeth = 10

// combOf returns combTeeth instants evenly over the sorted recovery times
// ts, from the first to the last (a tooth at each end), at least margin
// apart; ok is false when they span less than two margins.
func combOf(ts []time.Time, margin time.Duration) (comb []time.Time, ok bool) {
	if len(ts) < 2 {
		return nil, false
	}
	lo, hi := ts[0], ts[len(ts)-1]
	span := hi.Sub(lo)
	if span < 2*margin {
		return nil, false
	}
	step := max(span/(combTeeth-1), margin)
	for t := lo; !t.After(hi); t = t.Add(step) {
		comb = append(comb, t)
	}
	return comb, true
}

// candidates proposes experiments starting no earlier than s0, sized by the
// hypotheses: X is their median time scale, K exceeds every quota (scored.quota)
// by two. In a paced session they are paced as they will be sent.
func (dz *designer) candidates(s0 time.Time, margin time.Duration) []experiment {
	var kmax, nmed int64
	var ns []int64
	for _, x := range dz.ws {
		kmax = max(kmax, x.s.quota())
		ns = append(ns, x.s.quota())
	}
	slices.Sort(ns)
	X := dz.scale()
	nmed = ns[len(ns)/2]
	K := int(kmax + 2)
	var out []experiment

	// Single probes where the hypotheses disagree on recovery.
	for _, t := range splitPoints(dz.recoveries(nil, s0), 0.25, 0.5, 0.75) {
		out = append(out, newBuilder("probe").burst(t, 1).done())
	}
	// Bursts after waits: how much quota is there at each phase?
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1, 1.5} {
		t := s0.Add(time.Duration(f * float64(X)))
		out = append(out, newBuilder("burst").burst(t, K).done())
	}
	// Exhaust, then probe where the hypotheses disagree on recovery.
	burst := make([]time.Time, K)
	for i := range burst {
		burst[i] = s0
	}
	for _, t := range splitPoints(dz.recoveries(burst, s0.Add(margin)), 0.25, 0.5, 0.75) {
		out = append(out, newBuilder("recovery").burst(s0, K).burst(t, 1).done())
	}
	// Exhaust, then a comb of probes over the span of the recoveries the
	// hypotheses predict: the first accepted probe says which of them got
	// the edge right, to a tenth of the span (a long window's edge, which a
	// single probe narrows by halves at best, is found in one go).
	if comb, ok := combOf(dz.recoveries(burst, s0.Add(margin)), margin); ok {
		b := newBuilder("comb").burst(s0, K)
		for _, t := range comb {
			b.burst(t, 1)
		}
		out = append(out, b.done())
	}
	// Spread quota over half a window, then a burst about one window later:
	// sliding logs give back quota as the spread requests age out, fixed
	// windows all at once at their edge. At one and a half windows a log
	// has forgotten every spread request, while a counter started by the
	// first of them still weighs half of them (the previous window's
	// share): behind a block, which starts every exhaustion afresh, it is
	// what tells the two apart.
	for _, f := range []float64{0.9, 1.0, 1.1, 1.25, 1.5} {
		b := newBuilder("spread").spread(s0, X/2, int(nmed))
		b.burst(s0.Add(time.Duration(f*float64(X))), K)
		out = append(out, b.done())
	}
	// Sustained load at twice the limit for two windows: lockout when
	// rejected requests count.
	if nmed > 0 {
		n := int(4 * nmed)
		out = append(out, newBuilder("sustained").spread(s0, 2*X, n).done())
	}
	// Exhaust, then burst again after a pause between the idle times the
	// hypotheses hold: a key idle that long is forgotten, whole again.
	for _, t := range splitPoints(dz.idleEnds(s0), 0.25, 0.5, 0.75) {
		out = append(out, newBuilder("idle").burst(s0, K).burst(t, K).done())
	}
	// A key kept busy over two time scales, its pauses shorter than any
	// idle time the hypotheses hold: a bucket forgotten after an idle time
	// refills only while it is kept, so this alone shows its rate (every
	// other experiment pauses long enough to start it whole again).
	if idle := dz.shortestIdle(); idle > 0 {
		gap := time.Duration(busyShare * float64(idle))
		n := min(int(2*X/gap)+1, maxBusySends)
		out = append(out, newBuilder("busy").spread(s0, time.Duration(n-1)*gap, n).done())
	}
	// Straddle the next window edge the hypotheses predict.
	if edge, ok := dz.medianEdge(s0.Add(X / 4)); ok {
		m := max(margin, X/20)
		if edge.Add(-m).After(s0) {
			out = append(out, newBuilder("edge").burst(edge.Add(-m), K).burst(edge.Add(m), K).done())
		}
	}
	for i := range out {
		out[i] = out[i].paced(dz.pace)
	}
	return out
}

// Tuning of the busy experiment: its pauses are busyShare of the shortest
// idle time held, and it sends at most maxBusySends requests.
const (
	busyShare    = 0.8
	maxBusySends = 40
)

// shortestIdle returns the shortest idle time a hypothesis of dz forgets
// a key after, 0 when none evicts idle keys.
func (dz *designer) shortestIdle() time.Duration {
	var d time.Duration
	for _, x := range dz.ws {
		if x.s.h.v.beh == BehaviourIdle && x.s.h.p > 0 {
			if p := units.Seconds(x.s.h.p); d == 0 || p < d {
				d = p
			}
		}
	}
	return d
}

// idleEnds returns, sorted, when each hypothesis forgets a key last used
// at s0: s0 plus its idle time for idle eviction; for one without, a
// quarter beyond the longest idle time (it never forgets). Nil when no
// hypothesis evicts idle keys.
func (dz *designer) idleEnds(s0 time.Time) []time.Time {
	longest := 0.0
	for _, x := range dz.ws {
		if x.s.h.v.beh == BehaviourIdle {
			longest = max(longest, x.s.h.p)
		}
	}
	if longest == 0 {
		return nil
	}
	out := make([]time.Time, 0, len(dz.ws))
	for _, x := range dz.ws {
		p := 1.25 * longest
		if x.s.h.v.beh == BehaviourIdle {
			p = x.s.h.p
		}
		out = append(out, s0.Add(units.Seconds(p)))
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// scale is the weighted median time scale of the hypotheses.
func (dz *designer) scale() time.Duration {
	type sw struct {
		d time.Duration
		w float64
	}
	var xs []sw
	total := 0.0
	for _, x := range dz.ws {
		xs = append(xs, sw{x.s.h.scale(), x.w})
		total += x.w
	}
	if len(xs) == 0 {
		return time.Second
	}
	slices.SortFunc(xs, func(a, b sw) int { return cmp.Compare(a.d, b.d) })
	acc := 0.0
	for _, x := range xs {
		acc += x.w
		if acc >= total/2 {
			return x.d
		}
	}
	return xs[len(xs)-1].d
}

// medianEdge returns the median of the next window edges after t that the
// windowed hypotheses with edges predict.
func (dz *designer) medianEdge(t time.Time) (time.Time, bool) {
	var edges []time.Time
	tu := t.UnixMicro()
	for _, x := range dz.ws {
		h := x.s.h
		if !h.v.windowed() || h.v.fam == SlidingLog {
			continue
		}
		w := int64(math.Round(h.x * 1e6))
		if w <= 0 {
			continue
		}
		var e int64
		switch h.v.align {
		case limiter.AlignEpoch:
			e = (tu/w + 1) * w
		case limiter.AlignTimer:
			ph := int64(math.Round(h.ph * 1e6))
			e = ph + ((tu-ph)/w+1)*w
		default:
			st := x.s.r.states.get(x.s.r.states.keyOf(dz.client, dz.perClient))
			if st.At == 0 {
				continue
			}
			e = st.At
			if e <= tu {
				e += ((tu-e)/w + 1) * w
			}
		}
		edges = append(edges, time.UnixMicro(e))
	}
	if len(edges) == 0 {
		return time.Time{}, false
	}
	slices.SortFunc(edges, func(a, b time.Time) int { return a.Compare(b) })
	return edges[len(edges)/2], true
}
