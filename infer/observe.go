package infer

import (
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// observation is one accepted or rejected request as the fitting sees it.
type observation struct {
	ref      int       // index into the results the observations were built from
	client   string    // the identity whose state the request touches
	at       time.Time // estimated server arrival, absolute
	accepted bool
	// answered is when the answer came back (its first byte), absolute.
	answered time.Time
	// delay is how long the server held an accepted request beyond the
	// fastest answer seen (queueing); zero for rejections.
	delay time.Duration
	// held: the delay stands out from how fast rejections are answered.
	held    bool
	phase   string
	cluster int // requests of one cluster arrived too close together to order
	// unc is the half-width of the arrival estimate's uncertainty.
	unc time.Duration
	// lag bounds how long after its arrival the server may have decided
	// the request: the time from its estimated arrival to its answer
	// beyond the shortest such time of the run (an answer that came back
	// late may have been decided late: the handler ran late under load,
	// after requests that arrived later; with the server's arrival echo
	// this is seen even when every answer is equally slow). An accepted
	// answer may have been queued instead, so its lag is at most the
	// delay tolerance, and a held (queued) answer's is zero: its lateness
	// is the queue's.
	lag time.Duration
}

// observations are the fitting's view of a run.
type observations struct {
	list []observation // sorted by arrival
	// clusters[i] is the index range [start, end) of cluster i in list.
	clusters [][2]int
	// spans[i] is the time from the first to the last arrival of cluster
	// i; wide lists, in order, the clusters whose span exceeds clusterGap
	// (see carried).
	spans []time.Duration
	wide  []int
	// base is the fastest response latency seen (TTFB − last byte written).
	base time.Duration
	// tol is the delay tolerance: delays closer than this are equal.
	tol time.Duration
	// queueing reports the queueing signature: accepted requests held much
	// longer than rejected ones are answered, systematically (see
	// heldSystematically).
	queueing bool
	// first and last arrivals.
	first, last time.Time
	accepted    int
	rejected    int
	// rejectStatus is the most frequent rejection status (0 when none).
	rejectStatus int
	// pace, when set, is the spacing of a paced session's bursts: runs of
	// clusters closer than 1.5 times it count as one burst (see runs).
	pace time.Duration
	// without are the behaviours left out of the candidates (the
	// leave-one-out option, Options.Without).
	without []Behaviour
	// rotate, when 2 or more, is the number of instances a balancer sends
	// the requests to in turn (instances by request): the models keep a
	// state per instance (states), and the counts they are fitted with are
	// one instance's.
	rotate int
	// busy caches busiest by idle time and per-client keying.
	busy map[busyKey]time.Duration
}

type busyKey struct {
	idle      time.Duration
	perClient bool
}

// runs returns the index ranges of the bursts: the clusters, or with pace
// set, runs of clusters of one identity each within 1.5·pace of the last.
func (o *observations) runs() [][2]int {
	if o.pace <= 0 {
		return o.clusters
	}
	var out [][2]int
	for _, cl := range o.clusters {
		if n := len(out); n > 0 {
			prev := o.list[out[n-1][1]-1]
			if first := o.list[cl[0]]; first.client == prev.client && 2*first.at.Sub(prev.at) <= 3*o.pace {
				out[n-1][1] = cl[1]
				continue
			}
		}
		out = append(out, cl)
	}
	return out
}

// clusterGap is the smallest gap between two arrivals the fitting trusts
// to order them.
const clusterGap = 2 * time.Millisecond

// minDelayTol is the smallest delay tolerance.
const minDelayTol = 20 * time.Millisecond

// raw is a counted result (accepted or rejected) before it becomes an
// observation: its class, the client-side bounds of its server arrival
// and decision, and its echoed arrival.
type raw struct {
	i       int
	cls     record.Class
	lo, hi  int64
	lat     int64
	hasLat  bool
	arrival *int64
	status  int
}

// observe builds the observations of results, whose times count from
// origin; rejectStatus is the declared reject status (0: none declared).
// Results are classed by record.Classify: only the accepted and rejected
// tell the fitting anything.
func observe(results []record.Result, origin time.Time, rejectStatus int) *observations {
	rs, base := counted(results, rejectStatus)
	o := &observations{base: time.Duration(base)}
	rejHigh := o.tolerate(rs)
	o.build(results, rs, origin, rejHigh)
	o.group()
	if len(o.list) > 0 {
		o.first, o.last = o.list[0].at, o.list[0].at
		for _, ob := range o.list {
			o.last = later(o.last, ob.at)
		}
	}
	o.spans = make([]time.Duration, len(o.clusters))
	for i, cl := range o.clusters {
		o.spans[i] = o.list[cl[1]-1].at.Sub(o.list[cl[0]].at)
		if o.spans[i] > clusterGap {
			o.wide = append(o.wide, i)
		}
	}
	o.queueing = o.heldSystematically()
	return o
}

// counted returns the accepted and rejected results with their bounds, and
// the fastest response latency among them (TTFB − last byte written).
func counted(results []record.Result, rejectStatus int) (rs []raw, base int64) {
	base = -1
	for i, r := range results {
		c, _ := record.Classify(r, rejectStatus)
		if !c.Counts() {
			continue
		}
		lo, hi := verify.ClientBounds(&r)
		x := raw{i: i, cls: c, lo: lo, hi: hi, lat: hi - lo, hasLat: r.TTFB > 0 || r.Done > 0, arrival: r.Arrival, status: r.Status}
		if x.hasLat && (base < 0 || x.lat < base) {
			base = x.lat
		}
		rs = append(rs, x)
	}
	return rs, max(base, 0)
}

// tolerate sets the delay tolerance — the spread of rejection latencies
// (rejections are answered at once by every family), at least minDelayTol
// — and the most frequent rejection status; it returns the 90th
// percentile of the rejections' latency beyond the fastest.
func (o *observations) tolerate(rs []raw) (rejHigh time.Duration) {
	base := int64(o.base)
	var rejLat []int64
	statusCount := map[int]int{}
	for _, x := range rs {
		if x.cls == record.ClassRejected {
			rejLat = append(rejLat, x.lat-base)
			statusCount[x.status]++
		}
	}
	slices.Sort(rejLat)
	o.tol = minDelayTol
	if n := len(rejLat); n > 0 {
		p10, p90 := rejLat[n/10], rejLat[(n*9)/10]
		o.tol = max(o.tol, 3*time.Duration(p90-p10))
		rejHigh = time.Duration(p90)
	}
	best := 0
	for st, n := range statusCount {
		if n > best || (n == best && st < o.rejectStatus) {
			best, o.rejectStatus = n, st
		}
	}
	return rejHigh
}

// build turns the counted results into the observations, sorted by
// estimated arrival, with their delays, holds and lags (see observation).
func (o *observations) build(results []record.Result, rs []raw, origin time.Time, rejHigh time.Duration) {
	base := int64(o.base)
	// minAfter is the shortest time from an arrival to its answer.
	var minAfter time.Duration
	for _, x := range rs {
		r := results[x.i]
		at := x.lo + base/2
		if x.arrival != nil && *x.arrival >= x.lo-int64(time.Millisecond) && *x.arrival <= x.hi+int64(time.Millisecond) {
			at = *x.arrival
		}
		at = min(at, x.hi)
		ob := observation{
			unc:      time.Duration(min(x.lat, base)) / 2,
			ref:      x.i,
			client:   r.Client,
			at:       origin.Add(time.Duration(at)),
			accepted: x.cls == record.ClassAccepted,
			answered: origin.Add(time.Duration(x.hi)),
			phase:    r.Phase,
		}
		if ob.accepted {
			o.accepted++
			ob.delay = max(time.Duration(x.lat-base), 0)
			// Without rejections to compare with, a delay beyond the
			// tolerance is a hold (drainOf then asks for a staircase).
			ob.held = ob.delay > o.tol && ob.delay > 2*rejHigh+o.tol
		} else {
			o.rejected++
		}
		ob.lag = time.Duration(x.hi - at)
		if !ob.held && (len(o.list) == 0 || ob.lag < minAfter) {
			minAfter = ob.lag
		}
		o.list = append(o.list, ob)
	}
	for i := range o.list {
		ob := &o.list[i]
		switch {
		case ob.held:
			ob.lag = 0
		case ob.accepted:
			ob.lag = min(max(ob.lag-minAfter, 0), o.tol)
		default:
			ob.lag = max(ob.lag-minAfter, 0)
		}
	}
	slices.SortStableFunc(o.list, func(a, b observation) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.ref - b.ref
	})
}

// group forms the groups and clusters. A request joins the group before it
// when it arrived within clusterGap of the previous request, or before the
// group's last possible decision (see observation.lag): the server may
// then have decided them in any order. Any order of a group is as good as
// another, so each group's requests are put in the order of their
// identities' first arrivals in it (then by arrival), and the clusters are
// the runs of one identity in each group: the requests of the main
// identity whose decisions overlapped stay one cluster, whatever requests
// of a second identity arrived among them.
func (o *observations) group() {
	var groups [][2]int
	start := 0
	var decided time.Time
	for i := range o.list {
		ob := &o.list[i]
		if i > 0 && ob.at.Sub(o.list[i-1].at) > clusterGap && ob.at.After(decided) {
			groups = append(groups, [2]int{start, i})
			start = i
		}
		if d := ob.at.Add(ob.lag); d.After(decided) {
			decided = d
		}
	}
	if len(o.list) > 0 {
		groups = append(groups, [2]int{start, len(o.list)})
	}
	for _, g := range groups {
		rank := map[string]int{}
		for _, ob := range o.list[g[0]:g[1]] {
			if _, ok := rank[ob.client]; !ok {
				rank[ob.client] = len(rank)
			}
		}
		if len(rank) > 1 {
			slices.SortStableFunc(o.list[g[0]:g[1]], func(a, b observation) int {
				return rank[a.client] - rank[b.client]
			})
		}
		start := g[0]
		for i := g[0]; i < g[1]; i++ {
			if i > start && o.list[i].client != o.list[i-1].client {
				o.clusters = append(o.clusters, [2]int{start, i})
				start = i
			}
			o.list[i].cluster = len(o.clusters)
		}
		o.clusters = append(o.clusters, [2]int{start, g[1]})
	}
}

// heldSystematically reports the queueing signature: accepted requests
// held again and again, not once. A queue holds the last requests it admits
// before it is full, so every cluster that saw both an acceptance and a
// rejection (an exhausting burst) holds an accepted request; a scheduler or
// GC pause holds one now and then. Queueing is therefore: more than half of
// the exhausting clusters hold an accepted request. A run without such
// clusters (a steady pattern, one request at a time) needs at least three
// held acceptances, more than a quarter of all.
func (o *observations) heldSystematically() bool {
	mixed, mixedHeld, held := 0, 0, 0
	for _, cl := range o.clusters {
		acc, rej, h := 0, 0, 0
		for _, ob := range o.list[cl[0]:cl[1]] {
			switch {
			case !ob.accepted:
				rej++
			case ob.held:
				acc++
				h++
			default:
				acc++
			}
		}
		held += h
		if acc > 0 && rej > 0 {
			mixed++
			if h > 0 {
				mixedHeld++
			}
		}
	}
	if mixed > 0 {
		return 2*mixedHeld > mixed
	}
	return held >= 3 && 4*held > o.accepted
}

// timingSlack is how finely the run's timing resolves an arrival: twice
// the 90th percentile of the arrival estimates' half-widths, at least
// clusterGap.
func (o *observations) timingSlack() time.Duration {
	if len(o.list) == 0 {
		return clusterGap
	}
	us := make([]time.Duration, len(o.list))
	for i, ob := range o.list {
		us[i] = ob.unc
	}
	slices.Sort(us)
	return max(clusterGap, 2*us[len(us)*9/10])
}

// maxRatePerSecond returns the most accepted answers in any interval of
// one second (answers, not sends: a queue answers at its drain rate).
func (o *observations) maxRatePerSecond() float64 {
	var acc []time.Time
	for _, ob := range o.list {
		if ob.accepted {
			acc = append(acc, ob.answered)
		}
	}
	slices.SortFunc(acc, time.Time.Compare)
	best, j := 0, 0
	for i := range acc {
		for acc[i].Sub(acc[j]) >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return float64(best)
}

// carried returns how uncertain, in time, a model's state is at the start
// of cluster ci: the widest span of an earlier cluster of the same key
// that ended within horizon before it. The requests of a cluster may have been decided
// in any order, and a model's state takes its times from the request
// decided first (the start of a fixed window set by a key's first
// request, say), so it is known only to within the cluster's span until
// the model forgets it (its time scale, the horizon).
func (o *observations) carried(ci int, perClient bool, horizon time.Duration) time.Duration {
	if len(o.wide) == 0 {
		return 0
	}
	first := o.list[o.clusters[ci][0]]
	key := fitKey(first.client, perClient)
	var c time.Duration
	k, _ := slices.BinarySearch(o.wide, ci)
	for k--; k >= 0; k-- {
		j := o.wide[k]
		prev := o.list[o.clusters[j][0]]
		if first.at.Sub(prev.at) > 2*horizon {
			break // spans are shorter than horizon: none further back ends within it
		}
		if first.at.Sub(prev.at.Add(o.spans[j])) <= horizon && fitKey(prev.client, perClient) == key {
			c = max(c, o.spans[j])
		}
	}
	return c
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
