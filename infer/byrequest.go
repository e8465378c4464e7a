package infer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// A balancer that sends each request to the next instance spreads every
// connection's requests over all of them: paced requests on one kept-alive
// connection admit K·N, as a concurrent burst does, and for a window
// family the counts alone cannot tell K instances from one limiter of K·N
// (the instances fill and empty together). What does tell them apart is
// the state each instance advertises: from a whole state, paced requests
// read remaining values that fall by one every K requests (K countdowns
// interleaved: N−1 K times, then N−2 K times, … 0 K times), while one
// limiter of K·N counts down from K·N − 1 one by one. The headers are read
// as behaviour, the remaining quota of whoever answered; never a header
// that names an instance.

// countdownRun is what the remaining values of a paced run on one
// connection show: k interleaved countdowns from top, each run to zero.
type countdownRun struct {
	k   int
	top int64
}

// quota is what the k countdowns admitted together.
func (c countdownRun) quota() int { return c.k * int(c.top+1) }

// remainingOf returns the first remaining value the headers of r carry,
// and the quota advertised beside it (0: none).
func remainingOf(r *record.Result, origin time.Time) (remaining, quota int64, ok bool) {
	if len(r.Headers) == 0 {
		return 0, 0, false
	}
	p := headers.Parse(r.Headers, origin.Add(time.Duration(r.TTFB)))
	for _, l := range p.Limits {
		if !l.HasRemaining {
			continue
		}
		if l.HasLimit {
			quota = l.Limit
		}
		for _, pol := range p.Policies {
			if pol.Name == l.Name && pol.Quota > 0 {
				quota = pol.Quota
			}
		}
		return l.Remaining, quota, true
	}
	return 0, 0, false
}

// countdownsOf reads the remaining values of the accepted requests of a
// paced run res on one connection, in the order they were sent. They show
// k ≥ 2 instances by request when the run was refused at its end, its
// values split into countdowns (splitCountdowns), and the last stretch
// holds k countdowns each run to zero (ranOut). ok is false otherwise: a
// value missing or out of place, one countdown (one limiter), a bucket's
// refill between two values.
func countdownsOf(res []record.Result, origin time.Time, rejectStatus int) (countdownRun, bool) {
	vs, quota, refused, ok := remainingsOf(res, origin, rejectStatus)
	trace("instances: remaining values %v of %d (refused %v, ok %v)", vs, quota, refused, ok)
	if !ok || !refused {
		return countdownRun{}, false
	}
	c, final := splitCountdowns(vs)
	if c.k == 0 || c.top < 1 || quota > 0 && c.top != quota-1 {
		return countdownRun{}, false
	}
	k, ok := ranOut(final, c.top)
	if !ok {
		return countdownRun{}, false
	}
	return countdownRun{k: k, top: c.top}, true
}

// ranOut returns how many countdowns from top the last stretch final of a
// refused run holds, each run to zero: k ≥ 2 of them, every value in one
// (k·(top+1) values). A window edge within a stretch's first k requests
// does not show as a rise (every value before it was top, as is the first
// after it), and the stretch then starts with up to k more top values than
// it has zeros: those are what the instances admitted before the edge, and
// are not counted. ok is false when the values do not split so.
func ranOut(final []int64, top int64) (k int, ok bool) {
	lead := 0
	for lead < len(final) && final[lead] == top {
		lead++
	}
	zeros := 0
	for _, v := range final {
		if v == 0 {
			zeros++
		}
	}
	if before := lead - zeros; before > 0 && before <= zeros {
		final = final[before:]
	}
	last := verify.Countdowns(final, top)
	if len(last) < 2 || len(final) != len(last)*int(top+1) || slices.ContainsFunc(last, func(v int64) bool { return v != 0 }) {
		return 0, false
	}
	return len(last), true
}

// splitCountdowns splits remaining values vs into stretches at every rise
// (a window edge starts every instance afresh) and each stretch into
// countdowns from the highest value, top (verify.Countdowns). k is the
// most countdowns a stretch held, 0 when a stretch does not split so;
// final is the last stretch.
func splitCountdowns(vs []int64) (c countdownRun, final []int64) {
	if len(vs) == 0 {
		return countdownRun{}, nil
	}
	c.top = slices.Max(vs)
	from := 0
	for i := 1; i <= len(vs); i++ {
		if i < len(vs) && vs[i] <= vs[i-1] {
			continue
		}
		final = vs[from:i]
		last := verify.Countdowns(final, c.top)
		if last == nil {
			return countdownRun{}, nil
		}
		c.k = max(c.k, len(last))
		from = i
	}
	return c, final
}

// untilReset returns res in the order they were sent, up to the first
// accepted request that follows a refusal: one exhausting run. What comes
// after was admitted by a state that started again (a window's edge fell
// within the run) or refilled.
func untilReset(res []record.Result, rejectStatus int) []record.Result {
	res = slices.Clone(res)
	slices.SortFunc(res, func(a, b record.Result) int { return cmp.Compare(a.Wrote, b.Wrote) })
	refused := false
	for i := range res {
		switch c, _ := record.Classify(res[i], rejectStatus); c {
		case record.ClassAccepted:
			if refused {
				return res[:i]
			}
		case record.ClassRejected:
			refused = true
		}
	}
	return res
}

// remainingsOf returns the remaining values of the accepted requests of
// res in the order they were sent, up to its first reset (untilReset), the
// quota advertised beside them (0: none), and whether any request was
// refused; ok is false when an accepted answer carries none or advertises
// another quota.
func remainingsOf(res []record.Result, origin time.Time, rejectStatus int) (vs []int64, quota int64, refused, ok bool) {
	res = untilReset(res, rejectStatus)
	for i := range res {
		switch c, _ := record.Classify(res[i], rejectStatus); c {
		case record.ClassAccepted:
			v, q, has := remainingOf(&res[i], origin)
			if !has || len(vs) > 0 && q != quota {
				return nil, 0, false, false
			}
			vs, quota = append(vs, v), q
		case record.ClassRejected:
			refused = true
		}
	}
	return vs, quota, refused, true
}

// countdownsOwed returns how many more paced requests a run res on one
// connection that was never refused needs to run its countdowns out: when
// its remaining values already split into k ≥ 2 countdowns (which a
// concurrent burst never refused did not bound, or a window edge started
// afresh), the quota of k countdowns less what the last stretch admitted;
// 0 otherwise.
func countdownsOwed(res []record.Result, origin time.Time, rejectStatus int) int {
	vs, quota, refused, ok := remainingsOf(res, origin, rejectStatus)
	if !ok || refused {
		return 0
	}
	c, final := splitCountdowns(vs)
	if c.k < 2 || c.top < 1 || quota > 0 && c.top != quota-1 {
		return 0
	}
	return max(0, c.quota()-len(final))
}

// judgeByRequest decides whether a paced run on one connection, res, shows
// instances behind a per-request balancer: its remaining values count down
// in k ≥ 2 interleaved countdowns (countdownsOf), and a concurrent burst,
// which one limiter advertising those values would hold to top + 1, admitted
// more than one countdown's quota (a0, at least countSlack more) and no
// more than all k (within countSlack).
func judgeByRequest(res []record.Result, origin time.Time, rejectStatus, a0 int) (*Instances, countdownRun) {
	c, ok := countdownsOf(res, origin, rejectStatus)
	if !ok {
		return nil, countdownRun{}
	}
	one := int(c.top + 1)
	if a0 <= one+countSlack(one) || a0 > c.quota()+countSlack(c.quota()) {
		return nil, countdownRun{}
	}
	return &Instances{Value: c.k, Low: c.k, High: c.k, By: BalanceRequest}, c
}

// byRequestNote says, for the document's note, what the run showed.
func byRequestNote(one connRun, c countdownRun, a0 int) string {
	return fmt.Sprintf("paced requests on one kept-alive connection admitted %d, their remaining values counting down from %d in %d interleaved sequences, and a concurrent burst admitted %d",
		one.accepted, c.top, c.k, a0)
}

// reportByRequest fills the document's instances found by request: the
// fitted answer is one instance's policy (the models stepped each request
// on the next instance, observations.rotate), and its quota must agree with
// one countdown's (top + 1) within countSlack, else no instances are
// concluded (the note says why).
func (st *instancesState) reportByRequest(inf *Inference) {
	q := inf.Params.Limit
	if q == nil {
		q = inf.Params.Capacity
	}
	k := st.found.Value
	one := int(st.countdown.top + 1)
	if inf.Algorithm == "" || q == nil || math.Abs(q.Value-float64(one)) > float64(countSlack(one)) {
		fitted := "no family fits"
		if inf.Algorithm != "" && q != nil {
			fitted = fmt.Sprintf("the fitted quota of one instance is %g", q.Value)
		}
		inf.Note = joinNote(inf.Note, fmt.Sprintf("%s; %d countdowns of %d each, so several instances are not concluded: %s",
			fitted, k, one, st.note))
		st.over.report(inf)
		return
	}
	inf.Instances = st.found
	inf.OverAdmission = nil
	if !st.certain && inf.Fit == FitExact {
		inf.Fit = FitApproximate
	}
	inf.Note = joinNote(inf.Note, fmt.Sprintf("%d instances by request, each enforcing params: %s", k, st.note))
}

// joinNote appends part to a document's note.
func joinNote(note, part string) string {
	if note == "" {
		return part
	}
	return note + "; " + part
}
