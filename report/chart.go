package report

import (
	"math"
	"slices"
	"sort"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// This file computes, from every request, what the HTML charts draw; the
// drawing (svg.go) only downsamples the results into pixel columns.

// point is a value at a time.
type point struct {
	t int64
	v float64
}

// windowSeries is the count drawn against the limit.
type windowSeries struct {
	label      string  // what the values are
	limit      float64 // the limit drawn; 0 when none
	points     []point // one per accepted request the rule covers
	violations int     // points above the limit (exact, over every request)
	first      int64   // first violating point's time, when violations > 0
}

// groupOf returns a request's quota group under the rule: its lane when
// the key is per client, else 0.
func groupOf(q *request, r *rule) uint32 {
	if r != nil && r.PerClient() {
		return q.lane
	}
	return 0
}

// acceptedByGroup returns the send times of the accepted (and delayed)
// requests the rule covers, per quota group, in time order.
func (in *Input) acceptedByGroup(p *prepared) map[uint32][]int64 {
	out := map[uint32][]int64{}
	for i := range in.reqs {
		q := &in.reqs[i]
		if (q.class == Accepted || q.class == Delayed) && p.covered[q.route] {
			g := groupOf(q, p.rule)
			out[g] = append(out[g], q.t)
		}
	}
	return out
}

// trailingCounts computes, for every accepted request the rule covers,
// the count it is judged by: a sliding window's accepted in the trailing
// window (t − W, t]; a fixed window's accepted so far in its window; a
// bucket's fill level (one per accepted request, draining at the rate).
// Without a rule, accepted in the trailing second. Points are in time
// order.
func (in *Input) trailingCounts(p *prepared, acc map[uint32][]int64) windowSeries {
	r := p.rule
	s := windowSeries{}
	window := int64(1e9)
	switch {
	case r == nil:
		s.label = "accepted in the trailing 1s (no limit known)"
	case r.isWindow():
		window = int64(r.Window)
		s.limit = float64(r.Limit)
		if r.fixed() {
			s.label = "accepted so far in each " + units.HumanDuration(r.Window) + " window"
		} else {
			s.label = "accepted in the trailing " + units.HumanDuration(r.Window)
		}
	default:
		s.label = "bucket fill: one per accepted request, draining at " + units.HumanRate(r.Rate)
		s.limit = float64(r.Quota())
	}
	if r != nil && r.PerClient() {
		s.label += ", per client"
	}
	if r != nil {
		s.label += " — limit " + units.HumanNumber(s.limit)
		if r.inferred {
			s.label += " (inferred)"
		}
	}
	startUnix := in.Start.UnixNano()
	groups := make([]uint32, 0, len(acc))
	for g := range acc {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		ts := acc[g]
		switch {
		case r != nil && r.isBucket():
			level, last := 0.0, int64(0)
			for i, t := range ts {
				if i > 0 {
					level = math.Max(0, level-r.Rate*float64(t-last)/1e9)
				}
				level++
				last = t
				s.points = append(s.points, point{t, level})
			}
		case r != nil && r.fixed():
			origin := ts[0]
			if r.clockAligned() {
				origin = r.edgeOrigin(startUnix)
			}
			cur, n := int64(math.MinInt64), 0
			for _, t := range ts {
				w := floorDiv(t-origin, window)
				if w != cur {
					cur, n = w, 0
				}
				n++
				s.points = append(s.points, point{t, float64(n)})
			}
		default:
			j := 0
			for i, t := range ts {
				for ts[j] <= t-window {
					j++
				}
				s.points = append(s.points, point{t, float64(i - j + 1)})
			}
		}
	}
	if len(groups) > 1 {
		sort.SliceStable(s.points, func(i, j int) bool { return s.points[i].t < s.points[j].t })
	}
	if s.limit > 0 {
		for _, pt := range s.points {
			if pt.v > s.limit+1e-9 {
				if s.violations == 0 {
					s.first = pt.t
				}
				s.violations++
			}
		}
	}
	return s
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// claim is a wait advertised by a rejection, against the recovery seen.
type claimObs struct {
	sent     int64 // send time of the rejected request
	recv     int64 // receipt of the rejection
	wait     int64 // advertised wait, ns
	kind     uint8 // claimRetryAfter or claimReset
	observed int64 // first accepted send in the same quota group at or after recv, minus recv; -1 none
}

// claims lists every advertised wait with the recovery observed.
func (in *Input) claims(p *prepared, acc map[uint32][]int64) []claimObs {
	var out []claimObs
	for i := range in.reqs {
		q := &in.reqs[i]
		if q.claimKind == claimNone || q.recv == 0 {
			continue
		}
		c := claimObs{sent: q.t, recv: q.recv, wait: q.claim, kind: q.claimKind, observed: -1}
		ts := acc[groupOf(q, p.rule)]
		if k, _ := slices.BinarySearch(ts, q.recv); k < len(ts) {
			c.observed = ts[k] - q.recv
		}
		out = append(out, c)
	}
	return out
}

// recoveries returns the times at which quota was seen to come back: an
// accepted request sent after a rejection of its quota group had been
// answered, with no acceptance in the group in between (in send order).
// Rejections still in flight when it was sent do not count, so a burst
// answered partly by a queue shows none.
func (in *Input) recoveries(p *prepared) []int64 {
	var out []int64
	minRecv := map[uint32]int64{} // earliest answer of a rejection since the group's last acceptance
	for i := range in.reqs {
		q := &in.reqs[i]
		if !p.covered[q.route] {
			continue
		}
		g := groupOf(q, p.rule)
		switch q.class {
		case Rejected:
			if r, ok := minRecv[g]; q.recv != 0 && (!ok || q.recv < r) {
				minRecv[g] = q.recv
			}
		case Accepted, Delayed:
			if r, ok := minRecv[g]; ok && r <= q.t {
				out = append(out, q.t)
			}
			delete(minRecv, g)
		}
	}
	return out
}

// edgeRule returns the fixed windows whose edges the timeline draws: the
// rule's when it is a fixed window, else those of an inferred fixed window
// or sliding-window counter (whose counters are fixed windows); nil when
// none.
func (in *Input) edgeRule(r *rule) *rule {
	if r != nil && r.isWindow() && r.fixed() {
		return r
	}
	for _, inf := range in.Inferences {
		if inf.Algorithm != infer.FixedWindow && inf.Algorithm != infer.SlidingWindowCounter {
			continue
		}
		if inf.Alignment == nil || *inf.Alignment == infer.AlignUnknown {
			continue
		}
		if e := inferredRule(inf); e != nil {
			e.WindowType = verify.Fixed
			switch *inf.Alignment {
			case infer.AlignEpoch, infer.AlignTimer: // as Rule gives it
			default:
				e.Align = infer.AlignFirstRequest
			}
			return e
		}
	}
	return nil
}

// windowEdges returns the window edges in [t0, t1] of p.edges (nil
// without), and false when there are more than maxEdges.
func (in *Input) windowEdges(p *prepared, acc map[uint32][]int64, t0, t1 int64, maxEdges int) ([]int64, bool) {
	r := p.edges
	if r == nil || (r.PerClient() && !r.clockAligned()) {
		return nil, true
	}
	w := int64(r.Window)
	var origin int64
	if r.clockAligned() {
		origin = r.edgeOrigin(in.Start.UnixNano())
	} else {
		first := int64(math.MaxInt64)
		for _, ts := range acc {
			if len(ts) > 0 {
				first = min(first, ts[0])
			}
		}
		if first == math.MaxInt64 {
			return nil, true
		}
		origin = first
	}
	if (t1-t0)/w > int64(maxEdges) {
		return nil, false
	}
	var out []int64
	for e := origin + (floorDiv(t0-origin, w)+1)*w; e <= t1; e += w {
		out = append(out, e)
	}
	return out, true
}
