package infer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// retryAfterTol is the timing uncertainty of the model's exact wait: an
// advertised Retry-After within it is exact.
const retryAfterTol = 100 * time.Millisecond

// conclude builds the document from the observations and the fit.
func conclude(results []record.Result, origin time.Time, o *observations, f *fit, key string, opts *Options) *Inference {
	inf := &Inference{
		Schema:       Schema,
		Tool:         opts.Tool,
		Key:          key,
		Headers:      dialects(results, origin, opts.RejectStatus),
		Alternatives: []Alternative{},
		Misses:       []Miss{},
		Quirks:       []Behaviour{},
		Complete:     true,
	}
	if o.rejectStatus != 0 {
		st := o.rejectStatus
		inf.RejectStatus = &st
	}
	if o.rejected == 0 || f == nil {
		concludeQuiet(inf, results, o, opts.RejectStatus)
		return inf
	}
	a, _ := advertOf(results, origin, opts.RejectStatus)
	w, ok := f.winnerFor(a)
	if !ok {
		// Requests were refused and no hypothesis is left to account for
		// them: nothing fits, and nothing comes closest ("none" would say
		// nothing was refused).
		inf.Algorithm, inf.Closest, inf.Fit = "", "", FitMisfit
		inf.Misses = []Miss{{Experiment: "the whole run", Expected: "a model of the refusals", Observed: fmt.Sprintf("%d of %d refused", o.rejected, o.accepted+o.rejected)}}
		return inf
	}
	inf.Algorithm, inf.Closest = w.h.v.fam, w.h.v.fam
	inf.Reproduced = share(f.total-w.miss, f.total)
	inf.Fit, inf.Misses = judgeFit(w, f, o, origin)
	f.bracket(w, o)
	fillParams(inf, f, w, a, o.timingSlack(), o.first)
	// Waits are judged with the reported model: the middle of the equally
	// good range, not its edge, whose window edges drift from the truth's
	// over a long run of spread requests.
	mid := centred(f, w, o)
	inf.RetryAfter = judgeRetryAfter(results, origin, o, mid, f)
	inf.Advertised = claims(results, origin, o, mid, f.perClient)
	inf.Alternatives = alternatives(f, w, origin, o)
	if inf.Fit == FitMisfit {
		inf.Algorithm = ""
	}
	return inf
}

// centred returns w moved to the middle of its equally good range (count
// and continuous parameter as reported), when it fits as well there;
// else w.
func centred(f *fit, w scored, o *observations) scored {
	n, x, _ := f.estimate(w)
	h := w.h
	h.n, h.x = int64(math.Round(n.value)), x.value
	if h == w.h || h.n <= 0 || !(h.x > 0) {
		return w
	}
	r := replayObs(h, o, f.perClient, w.miss)
	if r.pruned || r.miss > w.miss {
		return w
	}
	return scoreOf(h, r)
}

// maxMissesListed bounds the document's misses.
const maxMissesListed = 10

// misfitShare: an answer that reproduces less than this share of the
// outcomes, and misses more than a family that can no longer win
// (farBehind), fits nothing. Between the slack and this, the misses are
// more than timing noise explains but few (another client spending the
// same quota, a stall): the answer is approximate at best.
const misfitShare = 0.95

// judgeFit says how well the winner w fits: misfit when it misses more
// outcomes than a family that can no longer win (farBehind: 3·slack + 2,
// the slack being one miss plus one per 50 clusters; every miss is
// already beyond the timing bounds of its own requests, see replayWith)
// and reproduces less than misfitShare of them, else approximate — exact
// is only for an answer that misses no more than the slack and survived a
// validation experiment, which the prober decides. It lists the outcomes
// w misses.
func judgeFit(w scored, f *fit, o *observations, origin time.Time) (Fit, []Miss) {
	r := replayWith(w.h, o, f.perClient, -1, 0, replay{collect: true}, timeTolDiv)
	misses := []Miss{}
	slices.SortStableFunc(r.all, func(a, b mismatch) int { return b.miss - a.miss })
	for _, m := range r.all {
		misses = append(misses, missOf(m, w.h, origin))
	}
	trace("fit: %v misses %d of %d (slack %d, %d clusters)", w.h, w.miss, f.total, f.slack, len(o.clusters))
	for _, v := range allVariants {
		if b, ok := f.best[v]; ok {
			trace("  best %v: %v misses %d", v, b.h, b.miss)
		}
	}
	if w.miss > f.farBehind() && share(f.total-w.miss, f.total) < misfitShare {
		return FitMisfit, misses
	}
	return FitApproximate, misses
}

// missOf words one mismatch of h for the document.
func missOf(m mismatch, h hyp, origin time.Time) Miss {
	where := m.phase
	if where == "" {
		where = "requests"
	}
	at := where + " at " + units.HumanDuration(m.at.Sub(origin))
	if m.delays {
		return Miss{Experiment: at, Expected: fmt.Sprintf("%d accepted, held as %v delays them", m.modelAccepted, h),
			Observed: fmt.Sprintf("%d accepted, held for other times", m.observedAccept)}
	}
	return Miss{Experiment: at,
		Expected: fmt.Sprintf("%d of %d accepted (%v)", m.modelAccepted, m.size, h),
		Observed: fmt.Sprintf("%d of %d accepted", m.observedAccept, m.size)}
}

// fillParams (first: the run's first request) sets the winner's parameters, with the ranges over which
// they fit as well, and the switches the data settled (alignment, counting
// rejected requests); a switch the data could not settle is unknown, unless
// the advertisement a names the winner. The continuous parameter's range
// is widened by slack, the timing the run could not resolve.
func fillParams(inf *Inference, f *fit, w scored, a advert, slack time.Duration, first time.Time) {
	n, x, d := f.estimate(w)
	// The range of equally good values is widened by what the timing of
	// the run cannot resolve: slack relative to the time scale.
	if sc := w.h.scale(); sc > 0 {
		r := float64(slack) / float64(sc)
		x.lo, x.hi = x.lo*(1-r), x.hi*(1+r)
	}
	if a.names(w.h) && x.lo <= a.window.Seconds() && a.window.Seconds() <= x.hi {
		x.value = a.window.Seconds() // the advertised length, among those that fit
	}
	switch w.h.v.fam {
	case FixedWindow, SlidingLog, SlidingWindowCounter:
		inf.Params.Limit = &Param{Value: n.value, Low: n.lo, High: n.hi}
		inf.Params.WindowS = roundParam(x)
	case TokenBucket:
		inf.Params.Capacity = &Param{Value: n.value, Low: n.lo, High: n.hi}
		inf.Params.RatePerS = roundParam(x)
	case LeakyBucketQueue:
		inf.Params.Capacity = &Param{Value: n.value, Low: n.lo, High: n.hi}
		inf.Params.RatePerS = roundParam(x)
		inf.Params.Undelayed = &Param{Value: d.value + 1, Low: d.lo + 1, High: d.hi + 1}
		inf.Params.Queue = &Param{Value: n.value - d.value - 1, Low: math.Max(n.lo-d.hi-1, 0), High: n.hi - d.lo - 1}
	}
	fillBehaviour(inf, f, w, n.value, first)
	aligns, crs := map[limiter.Align]bool{}, map[bool]bool{}
	for _, s := range f.pool {
		if s.h.v.fam == w.h.v.fam && s.miss == w.miss {
			if epochOrTimer(s.h.v.align) && epochOrTimer(w.h.v.align) && s.h.v.align != w.h.v.align {
				continue // decided by the lengths' roundness (fit.epochTimer)
			}
			aligns[s.h.v.align] = true
			crs[s.h.v.cr] = true
		}
	}
	switch w.h.v.fam {
	case FixedWindow, SlidingWindowCounter:
		al := string(w.h.v.align)
		if len(aligns) > 1 && !a.names(w.h) {
			al = AlignUnknown
		}
		inf.Alignment = &al
	}
	switch w.h.v.fam {
	case SlidingLog, SlidingWindowCounter:
		if len(crs) == 1 {
			cr := w.h.v.cr
			inf.CountsRejected = &cr
		}
	case TokenBucket, LeakyBucketQueue:
		no := false
		inf.CountsRejected = &no
	}
}

// epochOrTimer reports whether a is an alignment to the clock: windows
// at multiples of their length since the Unix epoch, at phase 0 or at a
// timer's phase.
func epochOrTimer(a limiter.Align) bool { return a == limiter.AlignEpoch || a == limiter.AlignTimer }

// alternatives lists every other family's best, with what ruled it out,
// most confident first.
func alternatives(f *fit, w scored, origin time.Time, o *observations) []Alternative {
	alts := []Alternative{}
	for _, fam := range Families {
		if fam == w.h.v.fam {
			continue
		}
		if fam == None {
			alts = append(alts, Alternative{
				Algorithm:  None,
				Reproduced: share(o.accepted, f.total),
				RuledOutBy: fmt.Sprintf("%d requests were rejected", o.rejected),
			})
			continue
		}
		b, ok := f.fam[fam]
		if !ok {
			if fam == LeakyBucketQueue {
				alts = append(alts, Alternative{
					Algorithm: fam, Reproduced: 0,
					RuledOutBy: "no accepted request was held longer than rejections were answered (no queueing)",
				})
			}
			continue
		}
		alts = append(alts, Alternative{
			Algorithm:  fam,
			Reproduced: share(f.total-b.miss, f.total),
			RuledOutBy: ruledOut(b, origin, o),
		})
	}
	slices.SortStableFunc(alts, func(a, b Alternative) int {
		switch {
		case a.Reproduced > b.Reproduced:
			return -1
		case a.Reproduced < b.Reproduced:
			return 1
		}
		return 0
	})
	return alts
}

// share returns a/b rounded to 4 decimals (0 when b is 0).
func share(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*1e4) / 1e4
}

// roundParam turns a continuous interval into a Param with 4 significant
// digits.
func roundParam(x interval) *Param {
	if math.IsInf(x.lo, 0) {
		return nil
	}
	return &Param{Value: sig4(x.value), Low: sig4(x.lo), High: sig4(x.hi)}
}

func sig4(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// ruledOut says which observation a family's best model got most wrong.
func ruledOut(b scored, origin time.Time, o *observations) string {
	m := b.r.worst
	if m.miss == 0 {
		return fmt.Sprintf("fits as well, but a simpler model comes first (%v)", b.h)
	}
	at := units.HumanDuration(m.at.Sub(origin))
	where := fmt.Sprintf("%s at %s", m.phase, at)
	if m.phase == "" {
		where = fmt.Sprintf("requests at %s", at)
	}
	if m.delays {
		return fmt.Sprintf("%s: accepted requests were held for other times than %v predicts (best fit misses %d of %d outcomes)",
			where, b.h, b.miss, len(o.list))
	}
	return fmt.Sprintf("%s: %v predicts %d of %d accepted, %d were (best fit misses %d of %d outcomes)",
		where, b.h, m.modelAccepted, m.size, m.observedAccept, b.miss, len(o.list))
}

// dialects lists the header dialects the responses speak (headers.Detect:
// r/t responses are draft-11 when their values read so), "none" when
// there were none. status is the declared reject status (0: none).
func dialects(results []record.Result, origin time.Time, status int) []string {
	var samples []headers.Sample
	for _, r := range results {
		if r.Outcome != record.OutcomeResponse || len(r.Headers) == 0 {
			continue
		}
		received := origin.Add(time.Duration(r.TTFB))
		c, _ := record.Classify(r, status)
		samples = append(samples, headers.Sample{Sent: origin.Add(time.Duration(r.Sent)), Received: received,
			Admitted: c == record.ClassAccepted, Parsed: headers.Parse(r.Headers, received)})
	}
	var out []string
	for _, d := range headers.Detect(samples, nil) {
		out = append(out, string(d))
	}
	return out
}

// judgedOnExact leaves what is judged against the answer's model — the
// Retry-After grade and the headers' claims — to an exact answer. An
// approximate or misfit answer's waits and quota are not shown to be the
// limiter's, and grading the headers by them states as fact what nothing
// validated: a misfit called an honest server on a clock 700 ms off
// dishonest, "early". Otherwise both are unjudged (nil); a malformed
// Retry-After is read, not judged, and stays.
func judgedOnExact(inf *Inference) {
	if inf.Fit == FitExact {
		return
	}
	if ra := &inf.RetryAfter; ra.Grade == nil || *ra.Grade != GradeMalformed {
		ra.Honest, ra.Grade, ra.TrueWaitS = nil, nil, nil
	}
	inf.Advertised = nil
}

// judgeRetryAfter grades every rejection's Retry-After against the
// winning model's exact wait (verify.GradeRetryAfter: exact, rounded-up,
// late, early), the wait known to within retryAfterTol plus a twentieth of
// itself; the document carries the worst grade and its true wait, and
// honest means exact or rounded-up. Within a cluster, whose order is
// unknown, advertised and modelled waits are compared sorted. Without an
// observed recovery (no request accepted after a rejection) the model's
// waits are an extrapolation, and nothing is judged.
func judgeRetryAfter(results []record.Result, origin time.Time, o *observations, w scored, f *fit) RetryAfter {
	var ra RetryAfter
	c := w.h.config()
	st := states{rotate: o.rotate}
	var worst verify.RetryAfterGrading
	judged := false
	recovered, refused := false, false
	for _, ob := range o.list {
		refused = refused || !ob.accepted
		recovered = recovered || (refused && ob.accepted)
	}
	for _, cl := range o.clusters {
		var adv []waitRange
		var model []time.Duration
		for i := cl[0]; i < cl[1]; i++ {
			ob := o.list[i]
			key := st.next(ob.client, f.perClient)
			next, d := c.Step(st.get(key), ob.at)
			st = st.set(key, next)
			if !d.Allowed {
				model = append(model, d.RetryAfter)
			}
			if a, sent, ok := advertised(results[ob.ref], origin, ob); sent {
				ra.Sent = true
				if ok {
					adv = append(adv, a)
				}
			}
		}
		if len(adv) == 0 || len(adv) != len(model) || !recovered {
			continue // the model disagrees with these outcomes, or guesses: no judgement
		}
		for _, a := range adv {
			// The server's order within the cluster is unknown: a value is
			// graded only when its grade holds paired with every rejection
			// of the cluster.
			g, ok := gradeEveryPairing(a, model)
			if !ok {
				continue
			}
			trace("retry-after %s at %v: advertised %v from arrival, model %v (%v)", g.Grade, o.list[cl[0]].at.Sub(origin), a, model, w.h)
			if !judged || worst.Grade.Worse(g.Grade) != worst.Grade {
				worst = g
			}
			judged = true
		}
	}
	if raw, ok := malformedRetryAfter(results, o); ok {
		// A value that breaks the grammar is sent, and worse than any
		// wrong wait: a client cannot read it.
		no, grade := false, GradeMalformed
		ra.Sent, ra.Raw, ra.Honest, ra.Grade, ra.TrueWaitS = true, raw, &no, &grade, nil
		return ra
	}
	if ra.Sent && judged {
		honest := worst.Grade.Honest()
		grade := string(worst.Grade)
		wait := math.Round(worst.TrueWait.Seconds()*1000) / 1000
		ra.Honest, ra.Grade, ra.TrueWaitS = &honest, &grade, &wait
	}
	return ra
}

// GradeMalformed is the Retry-After grade of a rejection whose value
// breaks RFC 9110's grammar (delay-seconds or an HTTP-date).
const GradeMalformed = "malformed"

// gradeEveryPairing grades the advertised wait a against each modelled
// wait of its cluster; it returns the grade (against the middle wait) only
// when every pairing gives the same one.
func gradeEveryPairing(a waitRange, model []time.Duration) (verify.RetryAfterGrading, bool) {
	var first verify.RetryAfterGrading
	for i, m := range model {
		tol := retryAfterTol + m/20
		g := verify.GradeRetryAfterWithin(a.lo, a.hi, m-tol, m+tol)
		if i == 0 {
			first = g
		} else if g.Grade != first.Grade {
			return first, false
		}
	}
	sorted := slices.Clone(model)
	slices.Sort(sorted)
	m := sorted[len(sorted)/2]
	tol := retryAfterTol + m/20
	return verify.GradeRetryAfterWithin(a.lo, a.hi, m-tol, m+tol), true
}

// waitRange is the bounds of an advertised wait.
type waitRange struct{ lo, hi time.Duration }

// malformedRetryAfter returns the first Retry-After value of a rejection
// that breaks the grammar, verbatim. Accepted answers are never graded.
func malformedRetryAfter(results []record.Result, o *observations) (string, bool) {
	for _, ob := range o.list {
		if ob.accepted {
			continue
		}
		r := results[ob.ref]
		for _, v := range headers.Values(r.Headers, "Retry-After") {
			if _, err := headers.ParseRetryAfter(v, time.Unix(0, 0)); err != nil {
				return v, true
			}
		}
	}
	return "", false
}

// advertised returns the bounds of the wait a rejection's Retry-After asks
// for, counted from the server's arrival of the request, with sent true
// for a value that parses, and ok when it can be judged. Delay-seconds
// count from the response (taken as its receipt). An HTTP-date is read
// against the response's Date, the server's own clock: at most
// headers.DateSlack longer than meant from the answer, which came after
// the arrival by up to the receipt's distance; without a Date it names a
// moment on a clock infer cannot place, and is not judged.
func advertised(r record.Result, origin time.Time, ob observation) (a waitRange, sent, ok bool) {
	if ob.accepted {
		return a, false, false
	}
	v := headers.Get(r.Headers, "Retry-After")
	if v == "" {
		return a, false, false
	}
	received := origin.Add(time.Duration(r.TTFB))
	if headers.IsDelaySeconds(v) {
		d, err := headers.ParseRetryAfter(v, received)
		if err != nil {
			return a, false, false
		}
		d += received.Sub(ob.at)
		return waitRange{d, d}, true, true
	}
	now, dated := headers.ServerNow(r.Headers, received)
	d, err := headers.ParseRetryAfter(v, now)
	if err != nil {
		return a, false, false
	}
	if !dated {
		return a, true, false
	}
	return waitRange{max(0, d-headers.DateSlack), d + max(0, received.Sub(ob.at))}, true, true
}
