package infer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// A limiter whose counter is not updated atomically (read, decide, write
// back, as a shared store without a script does) admits more under
// concurrency than its limit: requests decided within one round trip of
// each other read the same count. A burst from idle then admits too many,
// and the remaining values its answers carry repeat (lost updates) or rise.
// Fitting such bursts would make the limit whatever the race allowed; so
// once the answers show it, infer fits the family and parameters from paced
// experiments only (the requests of a burst sent one after the other, each
// after the previous one was decided) and runs one concurrent burst from
// idle as a separate experiment, reported as over_admission.

// minRepeat is how many accepted answers of one burst must carry the same
// remaining value to count as lost updates (two may tie under a bucket's
// refill).
const minRepeat = 3

// lostUpdates returns the evidence of over-admission in the answers of one
// burst (empty when there is none): a remaining value carried by minRepeat
// or more accepted answers, remaining values that rose in the order the
// answers came back (with, as further evidence, more accepted than the
// advertised limit).
func lostUpdates(res []record.Result, origin time.Time, rejectStatus int) string {
	type ans struct {
		at  int64
		rem int64
	}
	var as []ans
	accepted := 0
	var limit int64
	for _, r := range res {
		if c, _ := record.Classify(r, rejectStatus); c != record.ClassAccepted {
			continue
		}
		accepted++
		p := headers.Parse(r.Headers, origin.Add(time.Duration(r.TTFB)))
		for _, l := range p.Limits {
			if l.HasLimit {
				limit = max(limit, l.Limit)
			}
			if l.HasRemaining {
				as = append(as, ans{r.TTFB, l.Remaining})
				break
			}
		}
	}
	var ev []string
	count := map[int64]int{}
	for _, a := range as {
		count[a.rem]++
	}
	rems := make([]int64, 0, len(count))
	for v, n := range count {
		if n >= minRepeat {
			rems = append(rems, v)
		}
	}
	slices.Sort(rems)
	for _, v := range rems {
		ev = append(ev, fmt.Sprintf("remaining %d on %d accepted answers", v, count[v]))
	}
	slices.SortStableFunc(as, func(a, b ans) int { return int(a.at - b.at) })
	rose := 0
	for i := 1; i < len(as); i++ {
		if as[i].rem > as[i-1].rem {
			rose++
		}
	}
	if rose > 0 && len(ev) > 0 {
		ev = append(ev, fmt.Sprintf("remaining rose %d times in the order the answers came back", rose))
	}
	if limit > 0 && int64(accepted) > limit && len(ev) > 0 {
		// More accepted than advertised is a claim broken, not by itself
		// evidence of lost updates (headers that show the refill rate
		// break it too): it only adds to what the remaining values show.
		ev = append(ev, fmt.Sprintf("%d accepted at once where %d are advertised", accepted, limit))
	}
	return strings.Join(ev, "; ")
}

// overAdmission is what the session knows of over-admission so far.
type overAdmission struct {
	evidence      []string
	concurrentMax int
}

// maxPace bounds the spacing of paced sends.
const maxPace = 100 * time.Millisecond

// paceOf is the spacing of paced sends after a burst res that showed lost
// updates: three times the slowest answer among its accepted (each request
// decided, and its update written, before the next arrives), at least
// 10 ms, at most maxPace.
func paceOf(res []record.Result, rejectStatus int) time.Duration {
	var worst int64
	for _, r := range res {
		if c, _ := record.Classify(r, rejectStatus); c == record.ClassAccepted {
			lo, hi := verify.ClientBounds(&r)
			worst = max(worst, hi-lo)
		}
	}
	return min(max(3*time.Duration(worst), 10*time.Millisecond), maxPace)
}

// goPaced switches the session to paced experiments after a concurrent
// burst res showed over-admission (evidence ev): it keeps the burst's count
// as the concurrent maximum, exhausts the quota with a paced burst of that
// count plus four (the lost updates left the counter wherever they left
// it), waits for quota to return with single probes, and from the probe
// that was accepted on fits only what follows: the limiter's state there is
// as close to idle as a recovery makes it.
//
// The paced burst should end exhausted (its last request refused); it is
// sent again until it does, at most maxBursts times. One that nothing
// refused grows as the opening's bursts do (times burstGrowth): the
// concurrent burst may have been admitted whole, so the quota is only
// known to be at least its count, and a window that began between the two
// gives all of it back. One admitted again after a refusal crossed a
// window's edge and goes again as it was. The last one refused anywhere
// stands (a bucket that refills faster than the pace never ends refused
// for long).
func (s *prober) goPaced(ctx context.Context, res []record.Result, ev string) error {
	acc, _ := s.counts(res)
	s.over = &overAdmission{evidence: []string{ev}, concurrentMax: acc}
	s.pace = paceOf(res, s.opts.RejectStatus)
	s.conn = s.newConn() // paced on one kept-alive connection
	trace("over-admission (%s): paced at %v from now on", ev, s.pace)
	var ex []record.Result
	for i, size := 0, acc+4; ; i++ {
		var err error
		ex, err = s.run(ctx, "exhaust", s.now().Add(s.opts.lead()), burstSends(size))
		if err != nil {
			return err
		}
		_, rej := s.counts(ex)
		last := i+1 >= maxBursts
		if rej > 0 && (s.endsRefused(ex) || last) {
			break
		}
		if last {
			s.stopped = true // paced, nothing was refused: no limit to fit
			return nil
		}
		if rej == 0 {
			size *= burstGrowth
		}
		trace("over-admission: the paced exhaust of %d did not end refused (%d refused): again", len(ex), rej)
	}
	_, hi, err := s.scan(ctx, "scan", s.lastSent(ex), scanStart, s.advertisedReturn(ex))
	if err != nil {
		return err
	}
	if hi == 0 {
		s.stopped = true
		return nil
	}
	// The accepted probe is the last result: fits start with it.
	s.fitFrom = len(s.results) - 1
	return nil
}

// endsRefused reports whether the last of res to be sent was refused.
func (s *prober) endsRefused(res []record.Result) bool {
	if len(res) == 0 {
		return false
	}
	last := slices.MaxFunc(res, func(a, b record.Result) int { return cmp.Compare(a.Wrote, b.Wrote) })
	c, _ := record.Classify(last, s.opts.RejectStatus)
	return c == record.ClassRejected
}

// paced keeps, when the session is paced, every send at least pace after
// the one before it (in order): the sends of a burst follow one another,
// and the sends after a burst move later as far as it grew.
func (s *prober) paced(sends []patterns.Send) []patterns.Send {
	return pacedSends(sends, s.pace)
}

// pacedSends returns sends in time order with every send at least pace
// after the one before it (pace ≤ 0: sends as they are).
func pacedSends(sends []patterns.Send, pace time.Duration) []patterns.Send {
	if pace <= 0 {
		return sends
	}
	out := slices.Clone(sends)
	slices.SortStableFunc(out, func(a, b patterns.Send) int { return int(a.At - b.At) })
	for i := 1; i < len(out); i++ {
		out[i].At = max(out[i].At, out[i-1].At+pace)
	}
	return out
}

// concurrentCheck runs the separate experiment of an over-admitting target:
// once the fitted model has forgotten everything (its time scale after the
// last send), a concurrent burst of twice the fitted count plus four. Its
// results are set apart from the fitted ones; the most it accepted is the
// concurrent maximum.
func (s *prober) concurrentCheck(ctx context.Context, f *fit) {
	w, ok := f.winner()
	if !ok || s.over == nil {
		return
	}
	n := int(2*w.h.n + 4)
	at := s.lastSent(s.results).Add(w.h.forgets() + s.opts.lead())
	pace := s.pace
	s.pace = 0
	from := len(s.results)
	res, err := s.run(ctx, phaseConcurrent, at, burstSends(n))
	s.pace = pace
	if err != nil && len(res) == 0 {
		return
	}
	s.concurrent = append(s.concurrent, s.results[from:]...)
	s.results = s.results[:from]
	acc, _ := s.counts(res)
	s.over.concurrentMax = max(s.over.concurrentMax, acc)
	if ev := lostUpdates(res, s.opts.Origin, s.opts.RejectStatus); ev != "" {
		s.over.evidence = append(s.over.evidence, ev)
	}
}

// phaseConcurrent names the concurrent burst of an over-admitting target.
const phaseConcurrent = "concurrent"

// report fills the document's over_admission: the paced maximum is the
// fitted count (limit or capacity).
func (oa *overAdmission) report(inf *Inference) {
	if oa == nil {
		return
	}
	seq := 0
	switch {
	case inf.Params.Limit != nil:
		seq = int(inf.Params.Limit.Value)
	case inf.Params.Capacity != nil:
		seq = int(inf.Params.Capacity.Value)
	}
	ev := fmt.Sprintf("a concurrent burst from idle admitted %d, paced requests %d", oa.concurrentMax, seq)
	if oa.concurrentMax <= seq {
		ev = fmt.Sprintf("no concurrent burst admitted more than the %d paced requests did, but the answers showed lost updates", seq)
	}
	inf.OverAdmission = &OverAdmission{SequentialMax: seq, ConcurrentMax: oa.concurrentMax,
		Evidence: ev + "; " + strings.Join(oa.evidence, "; ")}
}
