package verify

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// The bucket family: token buckets of a capacity refilled at a rate —
// burst-limit-exceeded, rate-limit-exceeded, and the bucket side of
// no-limiting-observed, under-admission, race and key-spoof availability
// and remaining-value consistency.

// burstWindow is the longest interval over which the burst bound is
// judged: a quarter of the refill interval, so that a bucket refilled up
// to four times too fast shows as a rate, not a burst, finding.
func burstWindow(rate float64) int64 { return int64(math.Ceil(1e9 / (4 * rate))) }

// bucketCounts raises burst-limit-exceeded and rate-limit-exceeded for the
// accepted requests outside the race and key-spoof probes — of one
// stretch, when a declared block refills the bucket at its end
// (countSets).
func (r *rule) bucketCounts(t *traffic) []Finding {
	e := r.e
	capF := float64(e.Capacity) + msRefill(e.Rate) + 1e-6
	var c, p BucketSpan
	var cAcc, pAcc []*obs
	certain, possible := r.countSets(t)
	for _, set := range certain {
		if s, _ := MaxBucketExcess(ivsOf(set.os), e.Rate, burstWindow(e.Rate)); s.Count > 0 && (cAcc == nil || s.Excess > c.Excess) {
			c, cAcc = s, set.os
		}
	}
	for _, set := range possible {
		if _, s := MaxBucketExcess(ivsOf(set.os), e.Rate, burstWindow(e.Rate)); s.Count > 0 && (pAcc == nil || s.Excess > p.Excess) {
			p, pAcc = s, set.os
		}
	}
	var out []Finding
	switch {
	case c.Excess > capF:
		ev := pick(cAcc, c.Members)
		b := c.Bound(e.Capacity, e.Rate)
		out = append(out, r.finding(IDBurstLimitExceeded, Certain, t.g, ev, Finding{
			Message:  fmt.Sprintf("%d requests were accepted within %s (capacity %d + %s × %s allows %d)", c.Count, dur(c.Length), e.Capacity, units.FormatRate(e.Rate), dur(c.Length), b),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(b), Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		}))
	case p.Excess > capF:
		ev := pick(pAcc, p.Members)
		b := p.Bound(e.Capacity, e.Rate)
		out = append(out, r.finding(IDBurstLimitExceeded, Possible, t.g, ev, Finding{
			Message:  fmt.Sprintf("%d requests may have been accepted within %s (capacity %d allows %d); measurement uncertainty leaves it open", p.Count, dur(p.Length), e.Capacity, b),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(b), Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		}))
	}
	// The sustained rate: certain from the certain sets, else possible
	// from the others.
	for _, set := range certain {
		if f := r.bucketRate(t.g, set.os, ivsOf(set.os)); len(f) > 0 && f[0].Certainty == Certain {
			return append(out, f...)
		}
	}
	for _, set := range possible {
		if f := r.bucketRate(t.g, set.os, ivsOf(set.os)); len(f) > 0 {
			f[0].Certainty = Possible
			return append(out, f...)
		}
	}
	return out
}

// bucketRate judges the sustained rate: a bucket admits at most
// C + rate·L in any span L (and a millisecond's refill more, msRefill). A larger bucket shows as an excess that stops
// growing after a period; a faster refill as one that keeps growing. So
// the long-run excess is compared with the largest excess over spans up to
// a period (never less than the declared capacity).
func (r *rule) bucketRate(g string, acc []*obs, iv []Interval) []Finding {
	e := r.e
	short, _ := MaxBucketExcess(iv, e.Rate, int64(max(e.Period(), time.Duration(1e9/e.Rate))))
	capEff := max(e.Capacity, int64(math.Floor(short.Excess+1e-9)))
	c, p := MaxBucketExcess(iv, e.Rate, 0)
	capEffF := max(float64(e.Capacity), short.Excess) + msRefill(e.Rate) + 1e-6
	switch {
	case c.Excess > capEffF:
		ev := pick(acc, c.Members)
		b := c.Bound(capEff, e.Rate)
		return []Finding{r.finding(IDRateLimitExceeded, Certain, g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted over %s (%.3g/s), more than a bucket refilled at %s allows even with the burst of %d seen (%d)",
				c.Count, dur(c.Length), rateOver(c.Count, c.Length), units.FormatRate(e.Rate), capEff, b),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(b), Refs: refsOf(ev)},
		})}
	case p.Excess > capEffF:
		ev := pick(acc, p.Members)
		b := p.Bound(capEff, e.Rate)
		return []Finding{r.finding(IDRateLimitExceeded, Possible, g, ev, Finding{
			Message:  fmt.Sprintf("%d requests may have been accepted over %s (the policy allows %d); measurement uncertainty leaves it open", p.Count, dur(p.Length), b),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(b), Refs: refsOf(ev)},
		})}
	}
	return nil
}

func rateOver(n int, ns int64) float64 {
	if ns <= 0 {
		return math.Inf(1)
	}
	return float64(n) / (float64(ns) / 1e9)
}

// bucketOffered returns the offered requests that certainly exceed twice
// the bucket (2·capacity at twice the rate), and the policy's bound over
// their span; ok false when none does.
func (r *rule) bucketOffered(iv []Interval) (p peak, bnd int64, ok bool) {
	c, _ := MaxBucketExcess(iv, 2*r.e.Rate, 0)
	if c.Excess < float64(2*r.e.Capacity) {
		return peak{}, 0, false
	}
	return peak{members: c.Members, count: c.Count, start: c.Start, end: c.End, length: c.Length}, c.Bound(r.e.Capacity, r.e.Rate), true
}

// bucketAvailMax bounds from above the tokens available over [lo, hi]:
// the bucket with every prior request as early as possible, plus the
// refill over [lo, hi].
func (r *rule) bucketAvailMax(lo, hi int64, prior []*obs) int64 {
	e := r.e
	ps := slices.Clone(prior)
	slices.SortFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	rate := e.Rate / 1e9
	tok, at := float64(e.Capacity), int64(math.MinInt64)
	for _, o := range ps {
		if o.iv.Lo > lo {
			break
		}
		if at != math.MinInt64 {
			tok = min(float64(e.Capacity), tok+rate*float64(o.iv.Lo-at))
		}
		// A request the declared bucket could not have admitted takes
		// nothing from it: the quota is judged as declared.
		tok, at = max(0, tok-1), o.iv.Lo
	}
	if at != math.MinInt64 {
		tok = min(float64(e.Capacity), tok+rate*float64(lo-at))
	}
	return int64(math.Floor(max(0, tok) + rate*float64(hi-lo) + 1e-9))
}

// bucketPessimist returns, for a rejection, the fewest tokens the bucket
// can have held: every accepted request as late as possible, less what an
// nginx-style server's whole-millisecond arithmetic may honestly lose since
// the bucket was last full (nginxLoss). From rest the bucket is full before
// the first acceptance; with unknown (a run that may have begun busy), it
// held only the token that acceptance drew, and nothing before it: what the
// acceptances surely drew, and the refill since, still bound it below.
func (r *rule) bucketPessimist(acc []*obs, unknown bool) func(*obs) int64 {
	e := r.e
	ps := slices.Clone(acc)
	slices.SortFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Hi, b.iv.Hi) })
	rate := e.Rate / 1e9
	// tokens after the k-th accepted request (at its Hi), and the
	// admissions and the time since the bucket was last full, computed once.
	after := make([]float64, len(ps))
	sinceFull := make([]int64, len(ps))
	fullAt := make([]int64, len(ps))
	start := float64(e.Capacity)
	if unknown {
		start = 1
	}
	tok, at := start, int64(0)
	n, full := int64(0), int64(0)
	for k, o := range ps {
		if k > 0 {
			tok = min(float64(e.Capacity), tok+rate*float64(o.iv.Hi-at))
		} else {
			full = o.iv.Hi
		}
		if tok >= float64(e.Capacity) {
			n, full = 0, o.iv.Hi
		}
		if unknown {
			tok = max(tok, 1) // it held the token it gave
		}
		tok, at = tok-1, o.iv.Hi
		n++
		after[k], sinceFull[k], fullAt[k] = tok, n, full
	}
	his := make([]int64, len(ps))
	los := make([]int64, len(ps))
	for k, o := range ps {
		his[k] = o.iv.Hi
		los[k] = o.iv.Lo
	}
	return func(x *obs) int64 {
		k := sort.Search(len(his), func(i int) bool { return his[i] > x.iv.Hi })
		t := float64(e.Capacity) // nothing drawn yet: full, or nothing known
		if unknown {
			t = 0
		}
		if k > 0 {
			t = min(float64(e.Capacity), after[k-1]+rate*float64(x.iv.Hi-his[k-1]))
			if t < float64(e.Capacity) {
				t -= nginxLoss(e.Rate, sinceFull[k-1], x.iv.Hi-fullAt[k-1])
			}
		}
		// Later accepted requests that may have come first, and the refill
		// that may not have happened yet; a millisecond for clocks.
		for _, lo := range los[k:] {
			if lo <= x.iv.Hi {
				t--
			}
		}
		t -= rate * float64(x.iv.Hi-x.iv.Lo+int64(time.Millisecond))
		return int64(math.Floor(t + 1e-9))
	}
}

// msRefill is one millisecond's refill at ratePerS: what an nginx-style
// server (ngx_http_limit_req), which keeps its clock and its last time in
// whole milliseconds, may honestly count beyond the declared bucket's
// refill over any span (the elapsed times between admissions add up to the
// span within a millisecond) — or short of it (nginxLoss).
func msRefill(ratePerS float64) float64 { return ratePerS * 1e-3 }

// nginxLoss is how many tokens fewer than the declared bucket an
// nginx-style server (ngx_http_limit_req) may honestly hold after n
// admissions over el nanoseconds since its bucket was last full: it keeps
// its last time in whole milliseconds (up to 1 ms of refill lost in all:
// the elapsed times add up) and its rate and each refill in whole
// milli-requests (up to a milli-request lost per admission, and per
// second).
func nginxLoss(ratePerS float64, n, el int64) float64 {
	return msRefill(ratePerS) + float64(n)*1e-3 + float64(el)*1e-12
}

// bucketBand replays the accepted requests through the declared bucket
// (limiter's token bucket, the model oracle) in order of arrival and checks
// each advertised remaining within [model − in-flight − 1, model + 1],
// where model is what the request would see were it first among the
// requests in flight with it, and the band is widened by the refill over
// the widest decision bounds among it and the requests before it, and
// below by what nginx's whole-millisecond arithmetic may lose since the
// bucket was last full; while traffic from before the run may weigh
// (settledFrom), below only by bucketNeed. Only requests surely answered before the first
// spoofed key-spoof request are judged: those may or may not share the
// bucket.
func (r *rule) bucketBand(t *traffic, acc []*obs, note noteFunc) {
	e := r.e
	cfg := e.Model()
	if cfg.Validate() != nil {
		return
	}
	spoofFrom, _ := span(t.spoofed)
	ps := slices.Clone(acc)
	slices.SortStableFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	var st limiter.State
	// Admitted requests, and the time, since the model's bucket was last
	// full: an nginx-style server may hold nginxLoss fewer tokens than the
	// declared bucket, honestly.
	var sinceFull, fullAt int64
	for i, o := range ps {
		var d limiter.Decision
		st, d = cfg.Step(st, time.Unix(0, r.origin+o.iv.Lo))
		if d.Allowed && d.Remaining >= e.Capacity-1 {
			sinceFull, fullAt = 0, o.iv.Lo
		} else if d.Allowed {
			sinceFull++
		}
		l, ok := limitFor(&o.ph, e)
		if !d.Allowed || !ok || o.cached || o.iv.Hi >= spoofFrom {
			continue
		}
		before, after := int64(0), int64(0)
		width := o.iv.Hi - o.iv.Lo
		for j := i - 1; j >= 0 && j >= i-256; j-- {
			if ps[j].iv.Hi >= o.iv.Lo {
				before++
			}
			width = max(width, ps[j].iv.Hi-ps[j].iv.Lo)
		}
		for j := i + 1; j < len(ps) && ps[j].iv.Lo <= o.iv.Hi; j++ {
			after++
		}
		first := d.Remaining + before
		// The replay puts every decision at its earliest; the true ones
		// may come up to the widest bound later, which moves the refill.
		slack := int64(math.Ceil(e.Rate * float64(width) / 1e9))
		ms := int64(math.Ceil(nginxLoss(e.Rate, sinceFull, o.iv.Lo-fullAt) - 1e-9))
		lo, hi := first-before-after-1-slack-ms, first+1+slack
		if t.doubtful(o) {
			// Prior traffic may have left the bucket lower than full:
			// only what the later acceptances surely drew bounds it.
			lo = r.bucketNeed(ps, i) - 1 - ms
		}
		if l.Remaining < lo || l.Remaining > hi {
			note(o, "advertised remaining %d where the declared bucket leaves %d (band %d…%d)", l.Remaining, first, lo, hi)
		}
	}
}

// bucketNeed bounds from below the tokens the declared bucket held right
// after the decision of ps[i] (ps: acceptances sorted by the start of
// their decision bounds), whatever it held before the run: each acceptance
// surely decided after it drew a token, and the bucket refilled at most
// rate × (that decision's latest − ps[i]'s earliest) meanwhile. It looks a
// refill period (Fresh) and at most maxNeedLook acceptances ahead, as far
// as bucketBand looks behind: a shorter look only lowers the bound.
func (r *rule) bucketNeed(ps []*obs, i int) int64 {
	o := ps[i]
	horizon := o.iv.Hi + int64(r.e.Fresh())
	need, k := int64(0), int64(0)
	for j := i + 1; j < len(ps) && j <= i+maxNeedLook && ps[j].iv.Lo <= horizon; j++ {
		if ps[j].iv.Lo <= o.iv.Hi {
			continue // it may have been decided first
		}
		k++
		refill := int64(math.Ceil(r.e.Rate * float64(ps[j].iv.Hi-o.iv.Lo) / 1e9))
		if need = max(need, k-refill); need >= r.e.Capacity {
			return r.e.Capacity
		}
	}
	return need
}

// maxNeedLook bounds bucketNeed's look ahead, so that a long run that
// never settles costs bucketBand at most that per acceptance.
const maxNeedLook = 256
