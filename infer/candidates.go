package infer

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// The candidate experiments a designer proposes, and the instants they
// aim at: where the hypotheses disagree on recovery, idle times and
// window edges.

// recoveries returns, per hypothesis, when a request would be admitted
// again after the sends at ats (empty: from the current state) if a
// request were sent at from, sorted.
func (dz *designer) recoveries(ats []time.Time, at time.Time) []time.Time {
	var out []time.Time
	for _, x := range dz.ws {
		seq := append(slices.Clone(ats), at)
		var d limiter.Decision // the last send's
		predict(x.s.h, x.s.r.states, seq, 0, 0, dz.client, dz.perClient, func(_ int, di limiter.Decision) { d = di })
		if d.Allowed {
			out = append(out, at)
		} else {
			out = append(out, at.Add(d.RetryAfter))
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// free returns when hypotheses holding at least share of dz's weight
// would admit a request again, a margin after (s0 when they admit at s0
// already); share 1 asks for every hypothesis. A key that is blocked, or
// whose refusals restart its window, stays shut until then, and every
// experiment that starts sooner is refused alike.
func (dz *designer) free(s0 time.Time, margin time.Duration, share float64) time.Time {
	ats := make([]time.Time, len(dz.ws))
	ws := make([]float64, len(dz.ws))
	for i, x := range dz.ws {
		ats[i], ws[i] = s0, x.w
		predict(x.s.h, x.s.r.states, []time.Time{s0}, 0, 0, dz.client, dz.perClient, func(_ int, d limiter.Decision) {
			if !d.Allowed {
				ats[i] = s0.Add(d.RetryAfter)
			}
		})
	}
	// A hair under share, so that share 1 is reached whatever the
	// rounding of the sum.
	if at, ok := weightedAt(ats, ws, time.Time.Compare, share*(1-1e-9)); ok && at.After(s0) {
		return at.Add(margin)
	}
	return s0
}

// weightedAt returns, of the values vs with weights ws, the least value
// at which the weights of the values up to it reach share of their total
// (the weighted median at share 0.5); ok is false when there are none.
func weightedAt[T any](vs []T, ws []float64, compare func(a, b T) int, share float64) (v T, ok bool) {
	if len(vs) == 0 {
		return v, false
	}
	idx := make([]int, len(vs))
	total := 0.0
	for i := range idx {
		idx[i] = i
		total += ws[i]
	}
	slices.SortFunc(idx, func(a, b int) int { return compare(vs[a], vs[b]) })
	acc := 0.0
	for _, i := range idx {
		acc += ws[i]
		if acc >= share*total {
			return vs[i], true
		}
	}
	return vs[idx[len(idx)-1]], true
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
	ds := make([]time.Duration, len(dz.ws))
	ws := make([]float64, len(dz.ws))
	for i, x := range dz.ws {
		ds[i], ws[i] = x.s.h.scale(), x.w
	}
	if d, ok := weightedAt(ds, ws, cmp.Compare[time.Duration], 0.5); ok {
		return d
	}
	return time.Second
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
