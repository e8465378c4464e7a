package verify

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// undeclared-penalty: a key kept refused long after its quota returned.
//
// For a rejection x, take the acceptances that may have been decided
// before it. Its quota had surely returned by m₀, the latest moment at
// which the declared policy may still have refused it:
//
//   - a window of N per W: N-th latest decision bound (Hi) + W, the moment
//     even the pessimistic count (every such acceptance as late as its
//     bounds allow) fell below N — provided it had reached N after the
//     last acceptance, so that the refusals began as the policy's own;
//   - a bucket: when even the pessimistic bucket (every acceptance as late
//     as possible, as under-admission counts it) holds a token again —
//     provided it was empty after the last acceptance;
//   - a declared penalty moves it later: block:D to D after the latest
//     the block can have started (the first refusal surely after every
//     acceptance and surely before x, or x); extend to a window after the
//     latest request that may precede x; restart to a window after the
//     latest refusal that may.
//
// x is evidence of an undeclared penalty, certainly, when it was surely
// decided more than a margin after m₀: W for windows, for a bucket the
// time the pessimistic bucket needed to admit again (at least one
// refill). The margin keeps what is not a penalty out: a sliding-window
// counter refusing into the next window, a window up to twice as long as
// declared. Every acceptance that may precede x must be surely answered
// before x was sent, else no bound holds for every order. Possibly, when
// the same holds with every bound taken the other way (acceptances as
// early as possible, x as late). Under SharedQuota unseen traffic may
// explain it: possible only (foreignExplains).

// undeclaredPenalty returns the finding and the rejections of the runs
// that certainly show it (under-admission leaves those to it).
func (r *rule) undeclaredPenalty(t *traffic) ([]Finding, map[*obs]bool) {
	rej := filter(t.judged, func(o *obs) bool { return o.class == record.ClassRejected })
	if len(rej) == 0 || len(t.acc) == 0 {
		return nil, nil
	}
	pv := r.newPenaltyView(t)
	var sure, maybe []*obs
	var first, firstMaybe penaltyWitness
	for _, x := range rej {
		if w, ok := pv.certain(x); ok {
			if len(sure) == 0 {
				first = w
			}
			sure = append(sure, x)
		} else if w, ok := pv.possible(x); ok && len(sure) == 0 {
			if len(maybe) == 0 {
				firstMaybe = w
			}
			maybe = append(maybe, x)
		}
	}
	c, ev, w := Certain, sure, first
	if len(sure) == 0 {
		if len(maybe) == 0 {
			return nil, nil
		}
		c, ev, w = Possible, maybe, firstMaybe
	}
	what := "the count"
	if r.e.IsBucket() {
		what = "the bucket"
	}
	if !r.e.Penalty.IsZero() {
		what += " and the declared penalty " + r.e.Penalty.String()
	}
	msg := fmt.Sprintf("%d requests were refused although %s had surely let the key in again more than %s before (the first, %s after): the target applies a penalty the policy does not declare",
		len(ev), what, dur(w.margin), dur(w.x.iv.Lo-w.m0))
	if c == Possible {
		msg = fmt.Sprintf("%d requests may have been refused more than %s after %s let the key in again, if they arrived as early/late as the timing allows: perhaps a penalty the policy does not declare",
			len(ev), dur(w.margin), what)
	}
	last := ev[len(ev)-1]
	f := r.finding(IDUndeclaredPenalty, c, t.g, ev, Finding{
		Check:    CheckRecovery,
		Message:  msg,
		Evidence: Evidence{StartNS: w.m0, EndNS: last.iv.Hi, Count: len(ev), Refs: refsOf(ev), Headers: w.x.res.Headers},
	})
	// The refusals of a run that certainly shows a penalty are the
	// penalty's, those before its witnesses included: the rejections
	// after the same acceptances, surely after the last of them.
	runs := map[int]bool{}
	for _, x := range sure {
		runs[pv.before(x)] = true
	}
	absorbed := map[*obs]bool{}
	for _, y := range rej {
		if k := pv.before(y); runs[k] && y.iv.Lo > pv.his[k-1] {
			absorbed[y] = true
		}
	}
	return []Finding{f}, absorbed
}

// penaltyWitness is one rejection judged: when the quota had returned
// (m0) and the margin it was refused beyond.
type penaltyWitness struct {
	x          *obs
	m0, margin int64
}

// penaltyView holds a group's acceptances and requests indexed for
// undeclaredPenalty: acceptances sorted by Hi, with per prefix the
// statistics of their pessimistic and optimistic counts.
type penaltyView struct {
	r   *rule
	t   *traffic
	acc []*obs  // t.acc sorted by Hi
	his []int64 // their Hi
	// Per prefix length k (acc[:k]): the N-th largest Lo and the largest
	// Lo (math.MinInt64 when undefined).
	nthLo, maxLo []int64
	// tokens[k−1] is the pessimistic bucket after acc[:k], each taken at
	// its Hi; tokensLo the same at each Lo.
	tokens, tokensLo []float64
	// Of acc[k:]: the least Lo of those without a decision sequence, the
	// least sequence of those with one, the least Lo of all.
	sufLoNoDec, sufDec, sufLo []int64
	// reqs are the group's requests that may have reached the limiter,
	// and rej its rejections, each sorted by Lo.
	reqs, rej []*obs
}

func (r *rule) newPenaltyView(t *traffic) *penaltyView {
	pv := &penaltyView{r: r, t: t, acc: slices.Clone(t.acc), rej: t.rej}
	slices.SortStableFunc(pv.acc, func(a, b *obs) int { return cmpInt64(a.iv.Hi, b.iv.Hi) })
	n := len(pv.acc)
	pv.his = make([]int64, n)
	for i, o := range pv.acc {
		pv.his[i] = o.iv.Hi
	}
	pv.nthLo, pv.maxLo = make([]int64, n+1), make([]int64, n+1)
	pv.nthLo[0], pv.maxLo[0] = math.MinInt64, math.MinInt64
	var h int64Heap
	q := int(min(r.e.Quota(), int64(n)+1))
	for i, o := range pv.acc {
		heap.Push(&h, o.iv.Lo)
		if h.Len() > q {
			heap.Pop(&h)
		}
		pv.maxLo[i+1] = max(pv.maxLo[i], o.iv.Lo)
		pv.nthLo[i+1] = math.MinInt64
		if int64(h.Len()) >= r.e.Quota() {
			pv.nthLo[i+1] = h[0]
		}
	}
	if r.e.IsBucket() {
		pv.tokens = r.pessimistTokens(pv.acc, func(o *obs) int64 { return o.iv.Hi })
		pv.tokensLo = r.pessimistTokens(pv.acc, func(o *obs) int64 { return o.iv.Lo })
	}
	pv.sufLoNoDec, pv.sufDec, pv.sufLo = make([]int64, n+1), make([]int64, n+1), make([]int64, n+1)
	pv.sufLoNoDec[n], pv.sufDec[n], pv.sufLo[n] = math.MaxInt64, math.MaxInt64, math.MaxInt64
	for i := n - 1; i >= 0; i-- {
		o := pv.acc[i]
		pv.sufLoNoDec[i], pv.sufDec[i], pv.sufLo[i] = pv.sufLoNoDec[i+1], pv.sufDec[i+1], min(pv.sufLo[i+1], o.iv.Lo)
		if d := o.res.Decision; d != nil {
			pv.sufDec[i] = min(pv.sufDec[i], *d)
		} else {
			pv.sufLoNoDec[i] = min(pv.sufLoNoDec[i], o.iv.Lo)
		}
	}
	pv.reqs = filter(t.os, func(o *obs) bool { return o.class != record.ClassNotSent })
	return pv
}

// pessimistTokens replays acc (sorted by Hi) through the declared bucket
// from full, each acceptance at at(o), without flooring at zero: the
// tokens after each (as bucketPessimist).
func (r *rule) pessimistTokens(acc []*obs, at func(*obs) int64) []float64 {
	rate := r.e.Rate / 1e9
	out := make([]float64, len(acc))
	tok, last := float64(r.e.Capacity), int64(0)
	for k, o := range acc {
		if k > 0 {
			tok = min(float64(r.e.Capacity), tok+rate*float64(max(0, at(o)-last)))
		}
		tok, last = tok-1, max(last, at(o))
		out[k] = tok
	}
	return out
}

// before returns k: acc[:k] are the acceptances answered before x was
// sent (Hi < x's Lo), surely decided before it.
func (pv *penaltyView) before(x *obs) int {
	return sort.Search(len(pv.his), func(i int) bool { return pv.his[i] >= x.iv.Lo })
}

// certain judges x with every bound taken against the finding.
func (pv *penaltyView) certain(x *obs) (penaltyWitness, bool) {
	k := pv.before(x)
	// Any later acceptance that may be decided before x leaves m0 open.
	overlap := pv.sufLo[k] <= x.iv.Hi
	if d := x.res.Decision; d != nil {
		overlap = pv.sufLoNoDec[k] <= x.iv.Hi || pv.sufDec[k] < *d
	}
	if overlap || k == 0 {
		return penaltyWitness{}, false
	}
	last := pv.his[k-1]
	m0, margin, ok := pv.returned(k, last, pv.his, pv.tokens)
	if !ok {
		return penaltyWitness{}, false
	}
	m0 = max(m0, pv.penaltyEnd(x, last, true))
	return penaltyWitness{x, m0, margin}, x.iv.Lo > satAdd(m0, margin)
}

// possible judges x with every bound taken for the finding: the
// acceptances answered before x was sent, each as early as possible, x as
// late.
func (pv *penaltyView) possible(x *obs) (penaltyWitness, bool) {
	k := pv.before(x)
	if k == 0 {
		return penaltyWitness{}, false
	}
	last := pv.maxLo[k]
	m0, margin, ok := pv.returnedLo(k, last)
	if !ok {
		return penaltyWitness{}, false
	}
	m0 = max(m0, pv.penaltyEnd(x, last, false))
	return penaltyWitness{x, m0, margin}, x.iv.Hi > satAdd(m0, margin)
}

// returned returns, for the first k acceptances taken at their Hi, when
// the declared policy surely let the key in again and the margin; ok false
// when the count (the bucket) had not reached the limit (emptied) after
// the last of them, at last.
func (pv *penaltyView) returned(k int, last int64, his []int64, tokens []float64) (m0, margin int64, ok bool) {
	e := pv.r.e
	if e.IsBucket() {
		return bucketReturn(e, last, tokens[k-1])
	}
	n := int(e.Limit)
	w := int64(e.Window)
	if k < n {
		return 0, 0, false
	}
	nth := his[k-n]
	if last >= nth+w {
		return 0, 0, false
	}
	return nth + w, w, true
}

// returnedLo is returned with the acceptances at their Lo.
func (pv *penaltyView) returnedLo(k int, last int64) (m0, margin int64, ok bool) {
	e := pv.r.e
	if e.IsBucket() {
		return bucketReturn(e, last, pv.tokensLo[k-1])
	}
	w := int64(e.Window)
	nth := pv.nthLo[k]
	if nth == math.MinInt64 || last >= nth+w {
		return 0, 0, false
	}
	return nth + w, w, true
}

// bucketReturn returns when a bucket holding tok tokens at last holds one
// again, and the margin: that time, at least one refill.
func bucketReturn(e *Endpoint, last int64, tok float64) (m0, margin int64, ok bool) {
	if tok >= 1 {
		return 0, 0, false
	}
	need := int64(math.Ceil((1 - tok) / e.Rate * 1e9))
	return last + need, max(need, int64(math.Ceil(1e9/e.Rate))), true
}

// penaltyEnd returns the latest moment (certain: the earliest, when not)
// the declared penalty may keep x's key refused, given the last
// acceptance before x at last; math.MinInt64 when none is declared.
func (pv *penaltyView) penaltyEnd(x *obs, last int64, certain bool) int64 {
	e := pv.r.e
	bound := func(o *obs) int64 {
		if certain {
			return o.iv.Hi
		}
		return o.iv.Lo
	}
	switch e.Penalty.Kind {
	case limiter.PenaltyBlock:
		// The block began at the first refusal after the last acceptance:
		// no later than any refusal surely after it and surely before x
		// (or x itself).
		start := bound(x)
		for _, y := range pv.rej {
			if y.iv.Lo >= x.iv.Lo {
				break
			}
			after := y.iv.Lo > last
			if !certain {
				after = y.iv.Hi > last
			}
			if after && (y == x || surelyAfter(y, x) || !certain) {
				start = min(start, bound(y))
			}
		}
		return satAdd(start, int64(e.Penalty.Duration))
	case limiter.PenaltyExtend:
		return satAdd(pv.latestBefore(x, pv.reqs, certain), int64(e.Window))
	case limiter.PenaltyRestart:
		return satAdd(pv.latestBefore(x, pv.rej, certain), int64(e.Window))
	}
	return math.MinInt64
}

// latestBefore returns the latest decision bound (Hi; Lo when not
// certain) among os (sorted by Lo) other than x that may (certain: that
// surely, when not) precede x.
func (pv *penaltyView) latestBefore(x *obs, os []*obs, certain bool) int64 {
	v := int64(math.MinInt64)
	for _, o := range os {
		if o.iv.Lo > x.iv.Hi {
			break
		}
		if o == x {
			continue
		}
		if certain {
			v = max(v, o.iv.Hi)
		} else if o.iv.Hi < x.iv.Lo {
			v = max(v, o.iv.Lo)
		}
	}
	return v
}

// int64Heap is a min-heap of int64.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
