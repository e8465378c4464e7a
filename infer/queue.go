package infer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// A limiter that only delays never rejects: it queues every request and
// releases one per drain interval T. Its signature is the latency
// staircase of a burst from idle: the k-th request held beyond the
// undelayed ones comes back k·T late (later under load, never earlier).
// Such a target is probed with bursts no larger than the engine's timeout
// allows (a held request must come back before it times out) and a steady
// stream at twice the drain rate, whose answers come back at the drain
// rate with a latency that grows; a server that merely slowed down under a
// burst serves that stream at the offered rate with flat latency.

// drain is the evidence of a queue: the drain interval with its bounds, and
// the most requests held at once.
type drain struct {
	t, lo, hi time.Duration // drain interval T and the interval containing it
	held      int           // most requests held at once (one cluster)
	undelayed int           // requests of that cluster served at once
	longest   time.Duration // the longest delay seen
}

// rate returns the drain rate per second with its bounds.
func (d drain) rate() (value, low, high float64) {
	return 1 / d.t.Seconds(), 1 / d.hi.Seconds(), 1 / d.lo.Seconds()
}

// minHeld is the fewest held requests of one cluster that make a staircase.
const minHeld = 3

// drainOf estimates the drain interval from the cluster that held the most
// accepted requests. Its n accepted delays sorted, d_(u+k) of the k-th held
// one beyond the u undelayed is at least k·T − tol (an answer is never
// early), and the last is at most m·T + tol (a systematic lateness would be
// seen as a slower drain), m = n − u: T lies in [(d_n − tol)/m,
// min_k (d_(u+k) + tol)/k]. The slope of the upper half of the staircase
// gives T first, and u = n − round(d_n / T) (delays within the tolerance
// cannot tell a fast drain's first holds from the undelayed). ok is false
// when no cluster held minHeld requests or the delays are no staircase
// (the interval is empty).
func drainOf(o *observations) (d drain, ok bool) {
	var best []time.Duration
	held := 0
	for _, cl := range o.clusters {
		var ds []time.Duration
		h := 0
		for _, ob := range o.list[cl[0]:cl[1]] {
			if ob.accepted {
				ds = append(ds, ob.delay)
				if ob.held {
					h++
				}
			}
		}
		if h > held {
			best, held = ds, h
		}
	}
	if held < minHeld {
		return d, false
	}
	slices.Sort(best)
	n := len(best)
	mid := n - held/2 - 1
	t := (best[n-1] - best[mid]) / time.Duration(n-1-mid)
	if t <= 0 {
		return d, false
	}
	u := min(max(n-int(math.Round(float64(best[n-1])/float64(t))), 1), n-minHeld)
	m := n - u
	tol := o.tol
	d.lo = (best[n-1] - tol) / time.Duration(m)
	d.hi = time.Duration(math.MaxInt64)
	for k := 1; k <= m; k++ {
		d.hi = min(d.hi, (best[u+k-1]+tol)/time.Duration(k))
	}
	if d.lo <= 0 || d.hi < d.lo {
		return d, false
	}
	d.t = min(max(best[n-1]/time.Duration(m), d.lo), d.hi)
	d.held, d.undelayed, d.longest = m, u, best[n-1]
	return d, true
}

// defaultTimeout is the engine's per-request timeout assumed when
// Options.Timeout is zero (the probe engine's default).
const defaultTimeout = 10 * time.Second

// hold is the longest a request may be held by the target: half the
// engine's timeout, so that the answer comes back before it times out.
func (s *prober) hold() time.Duration {
	t := s.opts.Timeout
	if t <= 0 {
		t = defaultTimeout
	}
	return t / 2
}

// maxRate is the highest rate infer offers in a steady stream.
func (s *prober) maxRate() float64 {
	if s.opts.MaxRate > 0 {
		return s.opts.MaxRate
	}
	return DefaultMaxRate
}

// quietQueue probes a target whose burst of size was held without any
// rejection: bursts growing by burstGrowth, each once the queue has drained
// and none held longer than hold() (bounded in flight), until one is
// rejected (refused: a bounded queue, for the usual experiments) or the
// bound is reached; then a steady stream at twice the drain rate (at most
// maxRate) for at most 3 s, which tells a queue (answers at the drain rate,
// latency growing) from a server that slowed under a burst (served as
// offered, latency flat).
func (s *prober) quietQueue(ctx context.Context, d drain, size int) (refused bool, last []record.Result, err error) {
	for {
		next := min(size*burstGrowth, int(s.hold()/d.t), maxQuietBurst, s.opts.maxRequests()-s.sent-maxSteady)
		if next <= size {
			break
		}
		at := s.now().Add(time.Duration(d.held+d.undelayed+1)*d.t + s.opts.lead())
		res, err := s.run(ctx, "burst", at, burstSends(next))
		if err != nil {
			return false, res, err
		}
		if _, rej := s.counts(res); rej > 0 {
			return true, res, nil
		}
		size = next
		nd, ok := drainOf(s.observe())
		if !ok {
			break
		}
		d = nd
	}
	r, _, _ := d.rate()
	offered := min(2*r, s.maxRate())
	span := min(3*time.Second, s.hold()*6/10)
	n := min(max(int(offered*span.Seconds()), 20), maxSteady, s.opts.maxRequests()-s.sent)
	if n < 2 {
		s.stopped = true
		return false, nil, nil
	}
	sends := make([]patterns.Send, n)
	for i := range sends {
		sends[i].At = units.Seconds(float64(i) / offered)
	}
	if s.opts.Clients >= 2 {
		// The key test: two requests of a second identity half way, when
		// a shared queue holds them as long as the stream's, and a queue
		// of their own serves them at once.
		half := sends[n/2].At
		sends = append(sends, patterns.Send{At: half, Client: 1, Phase: "key"}, patterns.Send{At: half, Client: 1, Phase: "key"})
		slices.SortStableFunc(sends, func(a, b patterns.Send) int { return int(a.At - b.At) })
		s.keySent = true
	}
	at := s.now().Add(time.Duration(d.held+d.undelayed+1)*d.t + s.opts.lead())
	res, err := s.run(ctx, phaseSteady, at, sends)
	if err != nil {
		return false, res, err
	}
	s.quietKey()
	_, rej := s.counts(res)
	return rej > 0, res, nil
}

// quietKey decides the key test of a steady stream into a queue: the
// second identity's requests held (beyond the delay tolerance) share the
// queue, a global key; served at once, they have their own. Undecided
// when they were not both answered alike.
func (s *prober) quietKey() {
	o := s.observe()
	held, fast := 0, 0
	results := s.fitted()
	for _, ob := range o.list {
		if results[ob.ref].Phase != "key" || !ob.accepted {
			continue
		}
		if ob.delay > o.tol {
			held++
		} else {
			fast++
		}
	}
	switch {
	case held == 2:
		s.keyTested, s.perClient = true, false
	case fast == 2:
		s.keyTested, s.perClient = true, true
	}
}

// maxCheckRate bounds the rate of steadyCheck's stream, and
// maxQueueRate the drain rate taken for a queue's: a faster "drain" is a
// server answering a burst as fast as it can, which a stream infer can
// offer (at most maxRate) would not saturate.
const (
	maxCheckRate = 100.0
	maxQueueRate = 250.0
)

// maxQuietBurst bounds the bursts at a queue that never rejects (the
// opening's largest); maxSteady the steady stream, whose requests are kept
// in reserve.
const (
	maxQuietBurst = firstBurst * burstGrowth * burstGrowth * burstGrowth
	maxSteady     = 400
)

// steadyCheck offers, after bursts that were never refused nor held in a
// staircase, a steady stream for about two seconds at half the highest
// rate of accepted answers seen, at most maxCheckRate (and half of
// maxRate): none is said only when such a load is served as offered with
// flat latency.
func (s *prober) steadyCheck(ctx context.Context) error {
	rate := min(s.observe().maxRatePerSecond()/2, s.maxRate()/2, maxCheckRate)
	n := min(maxSteady, s.opts.maxRequests()-s.sent)
	if !(rate > 0) || n < 20 {
		return nil
	}
	n = min(n, max(int(rate*2), 20)) // about two seconds
	sends := make([]patterns.Send, n)
	for i := range sends {
		sends[i].At = units.Seconds(float64(i) / rate)
	}
	res, err := s.run(ctx, phaseSteady, s.now().Add(s.opts.lead()), sends)
	if err != nil {
		return err
	}
	if _, rej := s.counts(res); rej > 0 {
		trace("the steady stream was refused: a limiter after all")
	}
	return nil
}

// phaseSteady names the steady stream of quietQueue.
const phaseSteady = "steady"

// flatness of a stream: the latency of its last third (p90) at most twice
// the first third's plus flatSlack, and its accepted answers at least
// servedShare of the offered rate.
const (
	flatSlack   = 20 * time.Millisecond
	servedShare = 0.95
)

// served judges how results were served: the rate of their accepted
// answers (accepted over the span of their answers), whether that rate was
// at least servedShare of the offered rate (sent over the span of their
// schedule) with flat latency, and whether there was anything to judge.
func served(results []record.Result, rejectStatus int) (rate float64, flat, judged bool) {
	type a struct{ sched, ans, lat int64 }
	var acc []a
	sent := 0
	var s0, s1 int64 = math.MaxInt64, math.MinInt64
	for _, r := range results {
		if r.Outcome == record.OutcomeNotSent {
			continue
		}
		sent++
		s0, s1 = min(s0, r.Sched), max(s1, r.Sched)
		if c, _ := record.Classify(r, rejectStatus); c == record.ClassAccepted {
			lo, hi := verify.ClientBounds(&r)
			acc = append(acc, a{r.Sched, hi, hi - lo})
		}
	}
	if len(acc) < 3 {
		return 0, false, false
	}
	slices.SortStableFunc(acc, func(x, y a) int { return int(x.ans - y.ans) })
	span := time.Duration(acc[len(acc)-1].ans - acc[0].ans)
	rate = float64(len(acc)-1) / max(span, time.Millisecond).Seconds()
	offered := float64(sent-1) / max(time.Duration(s1-s0), time.Millisecond).Seconds()
	slices.SortStableFunc(acc, func(x, y a) int { return int(x.sched - y.sched) })
	third := len(acc) / 3
	p90 := func(xs []a) time.Duration {
		l := make([]int64, len(xs))
		for i, x := range xs {
			l[i] = x.lat
		}
		slices.Sort(l)
		return time.Duration(l[len(l)*9/10])
	}
	first, lastP := p90(acc[:third]), p90(acc[len(acc)-third:])
	flat = lastP <= 2*first+flatSlack && float64(len(acc)) >= servedShare*float64(sent) &&
		(span <= time.Duration(s1-s0) || rate >= servedShare*offered)
	return rate, flat, true
}

// phaseResults returns the results of one phase.
func phaseResults(results []record.Result, phase string) []record.Result {
	var out []record.Result
	for _, r := range results {
		if r.Phase == phase {
			out = append(out, r)
		}
	}
	return out
}

// concludeQuiet fills the document of a run without any rejection: a queue
// that only delays (leaky-bucket-queue, never_rejects) when the bursts held
// requests in a staircase and a steady stream, if one ran, was not served
// flat; otherwise none, complete only when the load was served at the
// offered rate with flat latency. max_rate_per_s is the rate of accepted
// answers either way.
func concludeQuiet(inf *Inference, results []record.Result, o *observations, rejectStatus int) {
	steady := phaseResults(results, phaseSteady)
	judged := results
	if len(steady) > 0 {
		judged = steady
	}
	rate, flat, ok := served(judged, rejectStatus)
	best := o.maxRatePerSecond()
	d, queue := drainOf(o)
	if v, _, _ := d.rate(); queue && v > maxQueueRate {
		queue = false // a server answering a burst as fast as it can
	}
	if queue && !(len(steady) > 0 && flat) {
		// A queue that never rejects is named from the staircase and the
		// steady stream it was fitted on; nothing validated it.
		inf.Algorithm, inf.Closest, inf.Fit = LeakyBucketQueue, LeakyBucketQueue, FitApproximate
		v, lo, hi := d.rate()
		inf.Params.RatePerS = &Param{Value: sig4(v), Low: sig4(lo), High: sig4(hi)}
		u := float64(d.undelayed)
		inf.Params.Undelayed = &Param{Value: u, Low: u, High: u}
		inf.NeverRejects = true
		no := false
		inf.CountsRejected = &no
		inf.Reproduced = 1
		if ok {
			best = rate
		}
		r := sig4(best)
		inf.MaxRatePerS = &r
		inf.Note = fmt.Sprintf("never rejected: held up to %d requests at once (the longest %s) and released them at %s; the queue may be unbounded (infer holds none longer than half the timeout)",
			d.held, units.HumanDuration(d.longest), units.HumanRate(v))
		return
	}
	// The family none is always exact: nothing was refused.
	inf.Algorithm, inf.Closest, inf.Fit = None, None, FitExact
	r := sig4(best)
	inf.MaxRatePerS = &r
	if len(o.list) > 0 {
		inf.Reproduced = 1
	}
	if ok && !flat {
		inf.Complete = false
		inf.Note = fmt.Sprintf("nothing was rejected, but the load was not served as offered with flat latency (accepted answers at %s): a limiter may be delaying requests", units.HumanRate(rate))
	}
}
