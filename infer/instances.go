package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Several limiter instances behind one address, each with its own state
// (a limit of N enforced per instance behind a load balancer), admit K·N
// to requests that reach every instance, and N to requests that reach one.
// A balancer that keeps each connection on one instance shows it from
// outside: requests paced on one kept-alive connection admit N, the same
// requests each on a new connection K·N. A racy shared counter admits N to
// both (paced requests leave it no race), and so does one limiter. infer
// tells them apart with these two experiments, from a recovered state, and
// never from a header that names an instance. A balancer that rotates every
// request shows it only in the remaining values advertised (byrequest.go).

// connRun is what one paced exhausting run admitted: how many of its
// requests were accepted and rejected, and from when (from, result time)
// over how long (span) the accepted ones were sent. The count is the
// run's whole: a balancer that skipped an instance (a connection opened
// by someone else) moves the first refusal earlier, not the total.
type connRun struct {
	accepted, rejected int
	from               int64
	span               time.Duration
}

// runOf counts a paced run's results (see connRun).
func runOf(res []record.Result, rejectStatus int) connRun {
	var r connRun
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, x := range res {
		switch c, _ := record.Classify(x, rejectStatus); c {
		case record.ClassRejected:
			r.rejected++
		case record.ClassAccepted:
			r.accepted++
			first, last = min(first, x.Wrote), max(last, x.Wrote)
		}
	}
	if r.accepted > 0 {
		r.from, r.span = first, time.Duration(last-first)
	}
	return r
}

// instanceTolerance is the share of the per-instance count by which the
// count of the run on one connection may exceed one instance's quota
// before the fit says what the quota is: quota refilled while the paced
// requests went out.
const instanceTolerance = 0.1

// maxInstancesInferred bounds the instance counts considered: the
// reference server's own bound (serve --instances).
const maxInstancesInferred = 64

// countSlack returns how far one instance's count may stray in a run that
// admitted n on one connection: instanceTolerance of it, at least one.
func countSlack(n int) int {
	return max(1, int(math.Ceil(instanceTolerance*float64(n))))
}

// judgeInstances decides how many instances behind a per-connection
// balancer the outcomes show: each instance's quota lies in [lo, hi], and
// a paced run on a new connection per request (fresh, from a recovered
// state, exhausting) admitted k instances' quotas and at most extra more
// per instance (quota that came back while it ran). It returns nil when
// one instance explains the run: fresh admitted no more than hi + extra.
// Otherwise the answer is the counts k ≥ 2 that explain fresh (a run never
// refused only bounds k from below), the value the nearest whole ratio to
// hi within them; certain reports that the outcomes fix k: one value and
// a refused run. A quota range starting at zero says nothing: nil.
func judgeInstances(lo, hi, extra int, fresh connRun) (inst *Instances, certain bool) {
	if lo <= 0 || hi < lo {
		return nil, false
	}
	if fresh.accepted <= hi+extra {
		return nil, false
	}
	low, high := 0, 0
	for k := 2; k <= maxInstancesInferred; k++ {
		least, most := k*lo, k*(hi+extra)
		if fresh.rejected == 0 {
			least = 0 // a lower bound: k instances admit at least fresh's count
		}
		if fresh.accepted >= least && fresh.accepted <= most {
			if low == 0 {
				low = k
			}
			high = k
		}
	}
	ratio := float64(fresh.accepted) / float64(hi)
	if low == 0 {
		// Between whole multiples: more than one instance, how many the
		// counts do not say.
		low, high = max(2, int(math.Floor(ratio))), max(2, int(math.Ceil(ratio)))
	}
	value := min(max(int(math.Round(ratio)), low), high)
	certain = low == high && fresh.rejected > 0
	return &Instances{Value: value, Low: low, High: high, By: BalanceConnection}, certain
}

// judgeRuns is judgeInstances before any fit of one instance: its quota is
// what one connection admitted, less countSlack, and so is the extra.
func judgeRuns(one, fresh connRun) (*Instances, bool) {
	if one.rejected == 0 {
		return nil, false // one connection was never refused: no quota seen
	}
	slack := countSlack(one.accepted)
	return judgeInstances(one.accepted-slack, one.accepted, slack, fresh)
}

// instancesNote says, for the document's note, what the two runs admitted.
func instancesNote(one, fresh connRun) string {
	return fmt.Sprintf("paced requests admitted %d on one kept-alive connection and %d on a new connection each", one.accepted, fresh.accepted)
}

// instanceRest is how long, in time scales of the answer, the instance
// check waits after the last request before each of
// its runs: every instance whole again (a sliding-window counter forgets
// its previous window only after a second window).
const instanceRest = 2

// maxInstanceScale is the longest time scale the instance check runs
// for: its rests are instanceRest time scales each, and a target of one
// instance pays the first; beyond it (as for the trickle validation) they
// would add minutes to a run. Longer limits go unchecked (a known limit).
const maxInstanceScale = maxTrickleScale

// instancesState is what the session knows of instances: the concurrent
// count they are judged against, the check's outcome and its certainty.
type instancesState struct {
	// burstMax is the most a concurrent burst of the opening admitted.
	burstMax int
	// checked: the check ran; again: it ran a second time, after a
	// design whose answer fits nothing (checkAgain).
	checked, again bool
	// checkedTo is how many results the session had when the check
	// ended: what came after it is the design's (checkAgain).
	checkedTo int
	// found is the answer (nil: one instance explains the outcomes);
	// certain says the counts fix it; note what the runs admitted.
	found      *Instances
	certain    bool
	note       string
	one, fresh connRun
	// a0 and pace size and space the run on new connections; confirmed
	// says it ran again where the fit expects no window edge.
	a0        int
	pace      time.Duration
	confirmed bool
	// apart holds the results of the run on new connections once it showed
	// instances: they are not fitted (they reached every instance).
	apart []record.Result
	// nextConn is the last connection number of client 0 used.
	nextConn int
	// firstReturn is when the opening's first scan saw quota return.
	firstReturn time.Duration
	// over is the session's over-admission when instances took its place.
	over *overAdmission
	// paced are the refused paced bursts of the opening on one
	// connection, after instances were found (see pacedMax).
	paced []connRun
	// countdown is what the one connection's remaining values showed when
	// the instances were found by request.
	countdown countdownRun
}

// newConn returns a connection number not used before.
func (s *prober) newConn() int {
	s.inst.nextConn++
	return s.inst.nextConn
}

// restScale is the rest before a run of the instance check: instanceRest
// times the answer's time scale, at most the longest window looked for.
// (The longest plausible one is often that longest window itself, early
// on: two minutes' rest for every target.) A rest too short for the truth
// leaves one connection fewer requests than a burst had, which the run on
// new connections and the fit of one connection then answer.
func (s *prober) restScale() time.Duration {
	w, ok := s.answer()
	if !ok {
		return 0
	}
	return instanceRest * min(w.h.forgets(), s.opts.maxWindow())
}

// longRest is the rest once the outcomes suggest instances: the fit of the
// opening then mixes them, and its time scale may be far too short (a
// bucket per instance refilled one token while the bursts reached all of
// them). A quota of the most a concurrent burst admitted, one per first
// recovery the opening's scan saw, comes back within a0 times that
// recovery; at most the longest window looked for.
func (s *prober) longRest(a0 int) time.Duration {
	return max(s.restScale(), min(time.Duration(a0)*s.inst.firstReturn, s.opts.maxWindow()))
}

// after returns the moment rest after the last request sent.
func (s *prober) after(rest time.Duration) time.Time {
	return s.lastSent(s.results).Add(rest + s.opts.lead())
}

// pacedRun sends m requests from at, each pace after
// the one before, on connection conn(i) for the i-th, and counts them.
func (s *prober) pacedRun(ctx context.Context, phase string, at time.Time, m int, pace time.Duration, conn func(i int) int) (connRun, []record.Result, error) {
	sends := make([]patterns.Send, m)
	for i := range sends {
		sends[i] = patterns.Send{At: time.Duration(i) * pace, Conn: conn(i)}
	}
	trace("instances: %s: %d requests %v apart from %v", phase, m, pace, at.Sub(s.start))
	saved := s.pace
	s.pace = 0 // the sends are spaced already
	res, err := s.run(ctx, phase, at, sends)
	s.pace = saved
	return runOf(res, s.opts.RejectStatus), res, err
}

// freshFactor sizes the run on new connections: that many times the most a
// concurrent burst admitted, which a burst that was never refused (lost
// updates end the opening early) only bounds from below.
const freshFactor = 2

// Phases of the instance check.
const (
	phaseOneConn  = "one-connection"
	phaseNewConns = "new-connections"
)

// checkInstances runs the instance check after the opening's fit, once
// (for time scales up to maxInstanceScale, and not for a queue): paced
// requests from a rest on one kept-alive connection (a new one, or the
// paced session's own), as many as the most a concurrent burst admitted
// and exhaustBeyond more. When they admit as many as the burst did and a
// single limiter reproduces everything, there is nothing more to see
// (their outcomes are fitted like any others).
// Otherwise the same again, twice as many, each on a new connection: when
// that admits a whole multiple of the one connection's count, the session
// concludes instances (not over-admission), sets that run apart and starts
// afresh on the one connection, paced, so that the fit is one instance's
// policy. A racy shared counter admits one quota to both runs.
func (s *prober) checkInstances(ctx context.Context) error {
	if s.inst.checked || s.f == nil || s.observe().queueing {
		return nil
	}
	s.inst.checked = true
	w, ok := s.answer()
	if !ok {
		return nil
	}
	trace("instances: checked against %v, resting %v", w.h, s.restScale())
	if x := w.h.scale(); x > maxInstanceScale {
		trace("instances: not checked: a time scale of %v", x)
		return nil
	}
	a0 := s.inst.burstMax
	if s.over != nil {
		a0 = max(a0, s.over.concurrentMax)
	}
	pace, conn := s.pace, s.conn
	if conn == 0 {
		pace, conn = paceOf(s.results, s.opts.RejectStatus), s.newConn()
	}
	at := s.after(s.restScale())
	if s.inst.again {
		// The second check is evidence the design asked for: the budget,
		// sized by a fit that mixed the instances, reaches its first run.
		s.extendTo(at.Add(time.Duration(a0+exhaustBeyond) * pace))
	}
	one, oneRes, err := s.pacedRun(ctx, phaseOneConn, at, a0+exhaustBeyond, pace, func(int) int { return conn })
	if err != nil {
		return err
	}
	// Countdowns interleave, and the run admitted everything (the burst it
	// was sized by was never refused, or a window edge fell within it): it
	// runs on, on the same connection, until they are out — twice at most.
	for range 2 {
		owed := countdownsOwed(oneRes, s.opts.Origin, s.opts.RejectStatus)
		if owed == 0 {
			break
		}
		_, moreRes, err := s.pacedRun(ctx, phaseOneConn, s.after(pace), owed+exhaustBeyond, pace, func(int) int { return conn })
		if err != nil {
			return err
		}
		oneRes = append(oneRes, moreRes...)
		one = runOf(oneRes, s.opts.RejectStatus)
	}
	s.inst.one = one
	defer func() { s.inst.checkedTo = len(s.results) }()
	if inst, c := judgeByRequest(oneRes, s.opts.Origin, s.opts.RejectStatus, a0); inst != nil {
		// Every request reached the instances in turn: from here on the
		// models keep a state per instance and step each request on the
		// next (observations.rotate), and the fit, searched afresh over
		// counts of one instance, is one instance's policy. New
		// connections would show nothing more.
		s.inst.found, s.inst.certain, s.inst.countdown = inst, true, c
		s.inst.note = byRequestNote(runOf(untilReset(oneRes, s.opts.RejectStatus), s.opts.RejectStatus), c, a0)
		s.inst.confirmed = true
		s.inst.over, s.over = s.over, nil
		trace("instances: %s", s.inst.note)
		o := s.observe()
		sp := defaultSpace(o, s.opts.maxWindow(), s.perClient)
		if s.firstSpace != nil {
			sp = s.firstSpace(o)
		}
		s.f = search(o, sp)
		if w, ok := s.answer(); ok {
			trace("instances: the fit of one instance by request: %v misses %d of %d", w.h, w.miss, s.f.total)
		}
		return nil
	}
	if one.accepted+countSlack(one.accepted) >= a0 && !s.inst.again {
		s.f = s.refit(s.f)
		// A concurrent burst may have reached few instances (the engine
		// opened few connections for it): then what one connection saw
		// disagrees with the bursts in time, not in count, and no single
		// limiter reproduces both. Only then is the check run on.
		if w, ok := s.answer(); !ok || w.miss <= s.f.slack {
			trace("instances: one connection admitted %d, a concurrent burst %d: one instance", one.accepted, a0)
			return nil
		}
		trace("instances: one connection admitted %d, a concurrent burst %d, but no single limiter fits", one.accepted, a0)
	}
	from := len(s.results)
	// Twice the concurrent count: a burst that showed lost updates may not
	// have been refused, and new connections must reach every instance.
	// The run is the check's evidence: the budget reaches to its end (the
	// rest before it can exceed a budget sized by a mixed fit).
	at, m := s.after(s.longRest(a0)), freshFactor*a0+exhaustBeyond
	s.extendTo(at.Add(time.Duration(m) * pace))
	fresh, _, err := s.pacedRun(ctx, phaseNewConns, at, m, pace, func(int) int { return s.newConn() })
	if err != nil {
		return err
	}
	inst, certain := judgeRuns(one, fresh)
	trace("instances: %s: %+v (certain %v)", instancesNote(one, fresh), inst, certain)
	if inst == nil {
		s.f = s.refit(s.f)
		return nil
	}
	s.inst.found, s.inst.certain, s.inst.note = inst, certain, instancesNote(one, fresh)
	s.inst.one, s.inst.fresh, s.inst.a0, s.inst.pace = one, fresh, a0, pace
	s.inst.apart = append(s.inst.apart, s.results[from:]...)
	s.results = s.results[:from]
	// Instances, not a race: the document reports one (the race again
	// should the fit of one connection explain the run after all).
	s.inst.over, s.over = s.over, nil
	s.conn, s.pace = conn, pace
	s.fitFrom = len(s.results)
	s.inst.paced = nil
	rest := s.longRest(a0)
	s.restUntil = s.lastSent(s.inst.apart).Add(rest + s.opts.lead())
	// The budget counted from the opening's fit, which mixed the
	// instances, is counted again from the rest.
	if s.budget > 0 {
		s.extendTo(s.restUntil.Add(s.budget))
	}
	f, err := s.opening(ctx)
	s.f = f
	if w, ok := s.answer(); ok {
		trace("instances: the fit of one connection: %v misses %d of %d (from %d results); its bursts admitted %v", w.h, w.miss, f.total, len(s.fitted()), s.inst.paced)
	}
	return err
}

// checkAgain runs the instance check a second time, once, when the design
// that followed the first ended on an answer that fits nothing (it misses
// more than fit.farBehind), the first found no instances, and a cluster of
// requests the design sent together was admitted more than the first
// check's one connection (beyond countSlack): the signature of instances
// it missed, where a behaviour outside the models (a penalty, a key
// forgotten) refuses more, not less.
//
// The first check is judged against the opening's fit, which can mislead
// it: concurrent bursts the engine sent over few connections reached one
// instance (the one connection admitted as much, and a single limiter
// fitted both), or a fit of too short a time scale left the one
// connection too short a rest to admit a quota. The design's experiments
// then reach every instance, and no single limiter reproduces them. The
// second check rests by the answer of the moment and runs the new
// connections whatever the one connection admitted; when it finds
// instances, the fit starts afresh on one connection (as after the first)
// and the validations so far are forgotten. A check the budget has no
// room for is skipped: the run goes on to validate what it has.
func (s *prober) checkAgain(ctx context.Context) (found bool, err error) {
	if !s.inst.checked || s.inst.again || s.inst.found != nil || s.f == nil || s.observe().queueing {
		return false, nil
	}
	if w, ok := s.answer(); ok && w.miss <= s.f.farBehind() {
		return false, nil
	}
	q := s.inst.one.accepted
	if together := s.clusterMax(s.inst.checkedTo); together <= q+countSlack(q) {
		return false, nil
	}
	s.inst.again, s.inst.checked = true, false
	trace("instances: checked again: the design's answer fits nothing")
	err = s.checkInstances(ctx)
	if errors.Is(err, errBudget) && s.sent < s.opts.maxRequests() {
		s.stopped, err = false, nil
	}
	if err != nil || s.inst.found == nil {
		return false, err
	}
	s.forgetValidation()
	return true, nil
}

// clusterMax returns the most accepted requests of one cluster (requests
// that arrived too close together to order), counting only those made
// from the results at index from of the session's on.
func (s *prober) clusterMax(from int) int {
	o := s.observe()
	most := 0
	for _, cl := range o.clusters {
		n := 0
		for _, x := range o.list[cl[0]:cl[1]] {
			if x.accepted && s.fitFrom+x.ref >= from {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// confirmInstances runs the run on new connections again, once, when the
// fitted answer leaves the instance count open because a window edge of
// a clock-aligned window fell within it: this time starting just after
// an edge, as the fit places them. Its count replaces the first.
func (s *prober) confirmInstances(ctx context.Context) error {
	st := &s.inst
	if st.found == nil || st.confirmed {
		return nil
	}
	st.confirmed = true
	inf := s.conclude(s.f)
	if in, certain := st.judge(inf, s.opts.Origin); in == nil || certain || inf.Params.WindowS == nil || inf.Alignment == nil ||
		*inf.Alignment != AlignEpoch && *inf.Alignment != AlignTimer {
		return nil
	}
	// The fit is one instance's now: its time scale is the rest.
	at := nextEdge(s.after(s.restScale()), inf).Add(max(s.opts.lead(), 2*clusterGap))
	from := len(s.results)
	fresh, _, err := s.pacedRun(ctx, phaseNewConns, at, freshFactor*st.a0+exhaustBeyond, st.pace, func(int) int { return s.newConn() })
	st.apart = append(st.apart, s.results[from:]...)
	s.results = s.results[:from]
	if err != nil {
		return err
	}
	trace("instances: again after an edge: %d admitted on new connections", fresh.accepted)
	st.fresh = fresh
	st.note = instancesNote(st.one, fresh)
	return nil
}

// nextEdge returns the first edge of inf's clock-aligned windows at or
// after t.
func nextEdge(t time.Time, inf *Inference) time.Time {
	w := units.Seconds(inf.Params.WindowS.Value)
	phase := time.Duration(0)
	if inf.Params.PhaseS != nil {
		phase = units.Seconds(inf.Params.PhaseS.Value)
	}
	since := t.Sub(time.Unix(0, 0)) - phase
	return t.Add((w - since%w) % w)
}

// extendTo moves the deadline to end when it is earlier, within the
// longest run allowed (Options.MaxDuration), and announces the budget.
func (s *prober) extendTo(end time.Time) {
	if end.After(s.deadline) {
		s.deadline = minTime(end, s.start.Add(s.opts.maxDuration()))
		s.announceBudget()
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
