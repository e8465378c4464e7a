package infer

import (
	"fmt"
	"math"
	"time"
)

// What the document says of instances: the check's runs judged again
// with the quota of one instance as the final fit says it.

// report fills the document's instances, judged again with the quota of
// one instance as the fit of one connection says it (a count already
// known is not blurred by countSlack; where quota may have come back whole
// while the run went out, by a whole quota per instance); an answer the
// counts do not fix is never exact.
func (st *instancesState) report(inf *Inference, origin time.Time) {
	if st.found == nil {
		return
	}
	if st.found.By == BalanceRequest {
		st.reportByRequest(inf)
		return
	}
	in, certain := st.judge(inf, origin)
	if in == nil {
		// The fitted quota of one instance explains what new connections
		// admitted (a first rest too short), or no family fits the one
		// connection: no instances concluded.
		st.over.report(inf)
		if inf.Algorithm == "" {
			inf.Note = joinNote(inf.Note, "no family fits one connection either, so several instances are not concluded: "+st.note)
		}
		return
	}
	inf.Instances = in
	inf.OverAdmission = nil
	if !certain && inf.Fit == FitExact {
		inf.Fit = FitApproximate
	}
	inf.Note = joinNote(inf.Note, fmt.Sprintf("%d instances by %s, each enforcing params: %s", in.Value, in.By, st.note))
}

// judge returns the instances the runs show with the quota of one
// instance as the document inf says it (nil when that quota explains the
// run on new connections), and whether the counts fix them. The one
// connection's own bursts after the rest (pacedMax) must agree with the
// first run on it: when they admitted more, that run started from a state
// not yet whole, and its count proves nothing; their count is then the
// quota, and the answer is never certain. Without a family that fits the
// one connection, nothing says it reached one instance: nil.
func (st *instancesState) judge(inf *Inference, origin time.Time) (*Instances, bool) {
	if inf.Algorithm == "" {
		return nil, false
	}
	if p := st.pacedMax(inf, origin); p > 0 && p > st.one.accepted+countSlack(st.one.accepted) {
		slack := countSlack(p)
		in, _ := judgeInstances(p-slack, p, slack, st.fresh)
		return in, false
	}
	in := *st.found
	certain := st.certain
	if q := inf.Params.Limit; inf.Algorithm != "" && (q != nil || inf.Params.Capacity != nil) {
		if q == nil {
			q = inf.Params.Capacity
		}
		extra, ok := refillDuring(inf, st.fresh, origin)
		if !ok {
			extra = int(q.High) // a whole quota may have come back
		}
		again, c := judgeInstances(int(q.Low), int(q.High), extra, st.fresh)
		if again == nil {
			return nil, false
		}
		in, certain = *again, c && ok
	}
	return &in, certain
}

// pacedMax is the most a refused paced burst on the one connection
// admitted (st.paced), of the bursts within which inf's policy gives no
// whole quota back: a burst across an edge of a clock-aligned window
// admits two quotas of one instance, and says nothing of the first run's
// state.
func (st *instancesState) pacedMax(inf *Inference, origin time.Time) int {
	most := 0
	for _, b := range st.paced {
		if !quotaBackWithin(inf, b, origin) {
			most = max(most, b.accepted)
		}
	}
	return most
}

// refillDuring returns how much quota, per instance, the fitted answer
// gives back while the accepted requests of run r were sent: its quota
// per time scale times their span, rounded up. ok is false when that does not
// bound it: the answer has no quota and time scale, or a whole quota may
// come back within the run (quotaBackWithin).
func refillDuring(inf *Inference, r connRun, origin time.Time) (extra int, ok bool) {
	n, scale, known := quotaScale(inf.Params)
	if !known || quotaBackWithin(inf, r, origin) {
		return 0, false
	}
	return int(math.Ceil(n * r.span.Seconds() / scale)), true
}

// quotaScale returns the quota of params (a window's limit, a bucket's
// capacity, the high ends) and the time, in seconds, in which it comes
// back (the window, or capacity over rate); known is false when params
// have neither.
func quotaScale(p Params) (n, scale float64, known bool) {
	switch {
	case p.Limit != nil && p.WindowS != nil:
		return p.Limit.High, p.WindowS.Low, p.WindowS.Low > 0
	case p.Capacity != nil && p.RatePerS != nil && p.RatePerS.High > 0:
		return p.Capacity.High, p.Capacity.Low / p.RatePerS.High, p.Capacity.Low > 0
	}
	return 0, 0, false
}

// quotaBackWithin reports whether inf's policy may give a whole quota back
// while the accepted requests of run r were sent: the run lasts its time
// scale or longer, or an edge of a clock-aligned window falls within it
// (or too near to tell). Params without a quota and time scale say no.
func quotaBackWithin(inf *Inference, r connRun, origin time.Time) bool {
	p := inf.Params
	_, scale, known := quotaScale(p)
	if !known {
		return false
	}
	if r.span.Seconds() >= scale {
		return true
	}
	if p.WindowS != nil && inf.Alignment != nil && (*inf.Alignment == AlignEpoch || *inf.Alignment == AlignTimer) {
		phase := 0.0
		if p.PhaseS != nil {
			phase = p.PhaseS.Value
		}
		start := origin.Add(time.Duration(r.from)).Sub(time.Unix(0, 0)).Seconds() - phase
		w := p.WindowS.Value
		edge := math.Floor(start/w)*w + w
		return start+r.span.Seconds() >= edge-(p.WindowS.High-p.WindowS.Low)
	}
	return false
}
