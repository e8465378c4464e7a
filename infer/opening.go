package infer

import (
	"context"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Sizes of the opening's experiments and first fit.
const (
	// exhaustBeyond is how many requests beyond the quota seen an
	// exhausting burst sends: enough that a count off by one or two still
	// ends refused.
	exhaustBeyond = 3
	// keyTestDelayDiv places the second identity's requests a fraction of
	// the recovery time after the burst: soon enough that a global key is
	// still exhausted.
	keyTestDelayDiv = 8
	// scan2StartDiv starts the second scan at a fraction of the first
	// recovery time, to see a faster recovery at another phase.
	scan2StartDiv = 16
	// minScaleS is the shortest time scale (seconds) searched: 2 ms, the
	// cluster gap below which requests are not ordered.
	minScaleS = 0.002
	// firstFitWiden widens the first fit's window and rate ranges beyond
	// what the scans bracket, for the scans' gaps.
	firstFitWiden = 3
	// maxRateS is the fastest refill rate (per second) searched.
	maxRateS = 1e4
	// advertisedMargin is how far beyond an advertised window the search
	// reaches: its rounding.
	advertisedMargin = 1.1
)

// opening runs the fixed first experiments and the first fit. It returns
// a nil fit when nothing was refused (no limiting observed).
func (s *prober) opening(ctx context.Context) (*fit, error) {
	refused, last, f, done, err := s.bursts(ctx)
	if done || err != nil {
		return f, err
	}
	if !refused {
		if !s.stopped {
			return nil, s.steadyCheck(ctx)
		}
		return nil, nil
	}
	o := s.observe()
	s.clientOf(last)
	if o.queueing {
		f, again, err := s.queueOpening(ctx, o, last)
		if err != nil {
			return f, err
		}
		if o = s.observe(); o.queueing {
			return f, nil
		}
		// The repeated burst held nothing: the first hold was a pause on
		// the way, not a queue. Go on as for any other limiter.
		trace("queueing not confirmed by the repeated burst")
		last = slices.DeleteFunc(again, func(r record.Result) bool { return r.Phase == "key" })
	}
	a0 := quotaEstimate(o)
	exhausted := s.lastSent(last)
	// Recovery scan.
	lo1, hi1, err := s.scan(ctx, "scan", exhausted, scanStart, s.advertisedReturn(last))
	if s.inst.firstReturn == 0 {
		s.inst.firstReturn = hi1
	}
	if err != nil || hi1 == 0 {
		// No recovery within the horizon: the time scale is beyond what
		// infer looks for (or the budget ended first).
		s.stopped = true
		return s.firstFit(lo1, max(hi1, lo1), a0), err
	}
	// Exhaust again, then (with several identities) test the key. A long
	// time scale is exhausted half of it after the recovery: a window
	// aligned to the clock then recovers at its next edge, one started by
	// a request or a log of requests half a time scale later, so that the
	// second scan already tells them apart.
	x1 := s.now().Add(s.opts.lead())
	if hi1 >= minHint {
		x1 = x1.Add(hi1 / 2)
	}
	sends := burstSends(a0 + exhaustBeyond)
	s.addKeyTest(&sends, hi1/keyTestDelayDiv)
	res, err := s.run(ctx, "exhaust", x1, sends)
	if err != nil {
		return s.firstFit(lo1, hi1, a0), err
	}
	lo2, hi2, err := s.scan(ctx, "scan2", s.lastSent(res[:a0+exhaustBeyond]), min(scanStart, max(hi1/scan2StartDiv, time.Millisecond)), s.advertisedReturn(res[:a0+exhaustBeyond]))
	if err != nil || hi2 == 0 {
		s.stopped = true
		return s.firstFit(min(lo1, lo2), max(hi1, lo2), a0), err
	}
	return s.firstFit(min(lo1, lo2), max(hi1, hi2), a0), nil
}

// bursts sends the bursts from idle, growing until one is refused; it
// returns whether one was, and its results. A burst that shows lost
// updates restarts the opening paced, and one held in a staircase without
// a rejection goes to quietQueue: done then reports that the opening is
// over, with its fit (nil: none).
func (s *prober) bursts(ctx context.Context) (refused bool, last []record.Result, f *fit, done bool, err error) {
	size := firstBurst
	for i := 0; i < maxBursts && !refused; i, size = i+1, size*burstGrowth {
		size = min(size, s.opts.maxRequests()-s.sent)
		if size <= 0 {
			s.stopped = true
			break
		}
		at := s.now().Add(s.opts.lead())
		if at.Before(s.restUntil) {
			at = s.restUntil
		}
		res, err := s.run(ctx, "burst", at, burstSends(size))
		if err != nil {
			return false, nil, nil, true, err
		}
		last = res
		acc, rej := s.counts(res)
		refused = rej > 0
		if s.pace == 0 {
			s.inst.burstMax = max(s.inst.burstMax, acc)
		} else if refused {
			s.inst.paced = append(s.inst.paced, runOf(res, s.opts.RejectStatus))
		}
		if s.over == nil {
			if ev := lostUpdates(res, s.opts.Origin, s.opts.RejectStatus); ev != "" {
				if err := s.goPaced(ctx, res, ev); err != nil || s.stopped {
					return false, nil, nil, true, err
				}
				f, err := s.opening(ctx)
				return false, nil, f, true, err
			}
		}
		if d, ok := drainOf(s.observe()); ok && !refused && d.t >= time.Duration(float64(time.Second)/min(maxQueueRate, s.maxRate()/4)) {
			// Held without a rejection: a queue, perhaps one that only
			// delays. Bursts bounded by the timeout from here on.
			trace("held %d without rejecting: drain interval %v", d.held, d.t)
			refused, res, err = s.quietQueue(ctx, d, size)
			if err != nil || !refused {
				return false, nil, nil, true, err
			}
			if res[0].Phase == phaseSteady {
				// The steady stream was rejected: a limiter after all; its
				// fit starts from the observations as they are.
				return true, res, s.firstFit(0, 0, quotaEstimate(s.observe())), true, nil
			}
			return true, res, nil, false, nil
		}
	}
	return refused, last, nil, false, nil
}

// clientOf records the main identity's name from results of client 0.
func (s *prober) clientOf(res []record.Result) {
	for _, r := range res {
		if r.Outcome == record.OutcomeResponse && r.Phase != "key" {
			s.client = r.Client
			return
		}
	}
}

// firstFit fits everything observed with windows and rates sized by the
// recovery scans: recovery took between lo and hi; a0 bounds the count.
func (s *prober) firstFit(lo, hi time.Duration, a0 int) *fit {
	o := s.observe()
	if hi <= 0 {
		s.firstSpace = func(o *observations) space { return defaultSpace(o, s.opts.maxWindow(), s.perClient) }
		return search(o, s.firstSpace(o))
	}
	lowS := max(lo.Seconds(), hi.Seconds()/2, minScaleS)
	highS := hi.Seconds()
	maxW := 2 * s.opts.maxWindow().Seconds()
	if a, ok := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus); ok {
		maxW = max(maxW, advertisedMargin*a.window.Seconds()) // an advertised longer window is a candidate
	}
	wmin := max(lowS/firstFitWiden, minScaleS)
	wmax := min(max(4*highS, 2*float64(a0+2)*highS), maxW)
	rmin := 1 / (firstFitWiden * float64(a0+2) * highS)
	rmax := min(firstFitWiden/lowS, maxRateS)
	s.firstSpace = func(o *observations) space { return newSpace(o, wmin, wmax, rmin, rmax, s.perClient) }
	f := s.decideKey(s.firstSpace(o))
	s.announce(f)
	return f
}

// queueOpening handles a queueing limiter: the first burst showed the
// latency staircase. One more burst once the queue has drained confirms
// the queue (or, holding nothing, shows the first hold was noise) and the
// rate; then the fit. It returns the fit and the second burst's results.
func (s *prober) queueOpening(ctx context.Context, o *observations, last []record.Result) (*fit, []record.Result, error) {
	// The step between delays is one drain interval T.
	var delays []time.Duration
	for _, ob := range o.list {
		if ob.held {
			delays = append(delays, ob.delay)
		}
	}
	slices.Sort(delays)
	T := delays[0]
	if len(delays) > 1 {
		var steps []time.Duration
		for i := 1; i < len(delays); i++ {
			if d := delays[i] - delays[i-1]; d > o.tol {
				steps = append(steps, d)
			}
		}
		if len(steps) > 0 {
			slices.Sort(steps)
			T = steps[len(steps)/2]
		}
		// An answer can come back late (a timer fired late under load),
		// never early, so the k-th held answer's delay is at least k·T:
		// the smallest delay/k bounds T, and a stall that stretched a
		// step cannot stretch it.
		for k, d := range delays {
			T = min(T, d/time.Duration(k+1))
		}
	}
	acc, _ := s.counts(last)
	// Wait for the bucket to drain completely, then burst again (with the
	// key test when there are several identities).
	at := s.now().Add(time.Duration(acc+1) * T)
	sp := func() space {
		wmax := float64(4*(acc+1)) * T.Seconds()
		return newSpace(s.observe(), T.Seconds()/4, wmax, 0.5/T.Seconds(), 2/T.Seconds(), s.perClient)
	}
	f := search(s.observe(), sp())
	s.announce(f)
	sends := burstSends(acc + exhaustBeyond)
	s.addKeyTest(&sends, T/keyTestDelayDiv)
	again, err := s.run(ctx, "burst", at, sends)
	if err != nil {
		return f, again, err
	}
	return s.decideKey(sp()), again, nil
}
