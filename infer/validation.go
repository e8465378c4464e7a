package infer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// The validation experiments: what validate runs to test an answer on
// outcomes it was not fitted on.

// validationExperiment chooses the experiment that validates w: among the
// candidate experiments, the one where w and its runner-up (the best
// hypothesis of any other variant: another family, alignment or way of
// counting) disagree most; without a runner-up, or when they agree on
// every candidate, a fresh exhaust-and-recover at another phase. It
// returns nil when nothing fits the budget, and says why it chose.
func (s *prober) validationExperiment(w scored, kind validationKind) (*experiment, string) {
	s0 := s.now().Add(s.opts.lead())
	margin := max(s.opts.lead(), 2*clusterGap)
	fits := func(e *experiment) bool {
		return !e.end().After(s.deadline) && s.sent+len(e.at) <= s.opts.maxRequests()
	}
	if kind >= validateTrickle {
		// The extra validations leave room for what follows them: an
		// over-admitting target's concurrent burst, one time scale after
		// the last request (see concurrentCheck).
		var reserve time.Duration
		reqs := 0
		if s.over != nil {
			reserve, reqs = w.h.scale()+2*s.opts.lead(), int(2*w.quota()+4)
		}
		fits = func(e *experiment) bool {
			return !e.end().Add(reserve).After(s.deadline) && s.sent+len(e.at)+reqs <= s.opts.maxRequests()
		}
	}
	if kind == validateSustained {
		if slices.ContainsFunc(s.fitted(), func(r record.Result) bool { return r.Phase == "sustained" }) {
			return nil, fittedOnSustained
		}
		m := int(sustainedFactor * w.quota())
		if m > maxSustainedValidation {
			return nil, fmt.Sprintf("%d requests would be needed", m)
		}
		e := newBuilder("sustained").spread(s0.Add(margin), w.h.scale(), m).done()
		if !fits(&e) {
			return nil, ""
		}
		return &e, fmt.Sprintf("%d requests over %s, %g times its rate", m, units.HumanDuration(w.h.scale()), float64(sustainedFactor))
	}
	if kind == validateTrickle {
		m := int(math.Ceil(trickleFactor * trickleScales * float64(w.quota())))
		if m > maxSustainedValidation || m < 2 {
			return nil, fmt.Sprintf("%d requests would be needed", m)
		}
		if w.h.scale() > maxTrickleScale {
			return nil, fmt.Sprintf("it would take %s", units.HumanDuration((trickleRest+trickleScales)*w.h.scale()))
		}
		span := trickleScales * w.h.scale()
		// From rest: the quiet before it lets every model's key come back
		// to its zero state (a counter's previous window decays over a
		// second time scale), so that what the trickle tests is how
		// admitted requests move the window, not the refusals before it.
		e := newBuilder("trickle").spread(s0.Add(margin+trickleRest*w.h.scale()), span, m).done()
		if !fits(&e) {
			// An extra test, not the one exactness rests on: the budget
			// ends the validation here, with what passed so far.
			return nil, outOfBudget
		}
		return &e, fmt.Sprintf("%d requests over %s, %g times its rate", m, units.HumanDuration(span), trickleFactor)
	}
	if kind == validatePause {
		X := w.h.scale()
		// A bucket gets the second, longer pause too: only a bucket
		// forgets idle keys.
		bursts := 2
		if !w.h.v.windowed() {
			bursts = 3
		}
		m := bursts * (int(w.quota()) + 2)
		if m > maxSustainedValidation {
			return nil, fmt.Sprintf("%d requests would be needed", m)
		}
		t0 := s0.Add(margin)
		p, q := time.Duration(pauseShare*float64(X)), time.Duration(pauseLate*float64(X))
		b := newBuilder("pause").burst(t0, int(w.quota())+2).burst(t0.Add(p), int(w.quota())+2)
		what := fmt.Sprintf("two exhausting bursts %s apart", units.HumanDuration(p))
		if bursts == 3 {
			b.burst(t0.Add(p+q), int(w.quota())+2)
			what = fmt.Sprintf("three exhausting bursts, %s and %s apart", units.HumanDuration(p), units.HumanDuration(q))
		}
		e := b.done()
		if !fits(&e) {
			return nil, outOfBudget
		}
		return &e, what
	}
	if kind == validateHold {
		X := w.h.scale()
		k := int(math.Ceil(holdScales / holdSpacing))
		m := int(w.quota()) + 2 + k
		if m > maxSustainedValidation {
			return nil, fmt.Sprintf("%d requests would be needed", m)
		}
		if X > maxTrickleScale {
			return nil, fmt.Sprintf("it would take %s", units.HumanDuration(time.Duration(holdScales*float64(X))))
		}
		t0 := s0.Add(margin)
		b := newBuilder("hold").burst(t0, int(w.quota())+2)
		for i := 1; i <= k; i++ {
			b.burst(t0.Add(time.Duration(float64(i)*holdSpacing*float64(X))), 1)
		}
		e := b.done()
		if !fits(&e) {
			return nil, outOfBudget
		}
		return &e, fmt.Sprintf("an exhausting burst, then a request every %s for %s", units.HumanDuration(time.Duration(holdSpacing*float64(X))), units.HumanDuration(time.Duration(holdScales*float64(X))))
	}
	if kind == validateRival {
		r, _ := s.f.rival(w)
		if e := s.unblocked(s.rivalDesigner(w, r), w, s0, margin, fits); e != nil {
			return e, fmt.Sprintf("where %v and its rival %v disagree most", w.h.v, r.h.v)
		}
		return nil, "no experiment within the budget tells it from its rival"
	}
	if kind == validatePrecision {
		dz := s.precisionDesigner(w)
		if e := s.unblocked(dz, w, s0, margin, fits); e != nil {
			lo, hi := dz.ws[0].s.h, dz.ws[len(dz.ws)-1].s.h
			return e, fmt.Sprintf("where %v and %v, the ends of its equally good range, disagree most", lo, hi)
		}
		return nil, "no experiment within the budget splits its range"
	}
	if ru, ok := s.runnerUp(w); ok {
		if e := s.splitting(w, ru, s0, margin, fits); e != nil {
			return e, fmt.Sprintf("where %v and the runner-up %v disagree most", w.h.v, ru.h)
		}
	}
	e := s.freshRecovery(w, s0, margin)
	if !fits(&e) {
		return nil, ""
	}
	return &e, "a fresh exhaust-and-recover at another phase"
}

// outOfBudget is why an extra validation was not run when the budget left
// no room for it (rather than the answer's quota or time scale).
const outOfBudget = "it does not fit the budget"

// spread returns the ends of answer w's widest equally good range, found
// afresh over every observation (fit.bracket), and whether it is wider
// than maxSpread (fit.widest).
func (s *prober) spread(w scored) (lo, hi scored, wide bool) {
	s.f.bracket(w, s.observe())
	lo, hi, wide = s.f.widest(w)
	trace("spread of %v: %v … %v, wide %v (brackets %d)", w.h, lo.h, hi.h, wide, len(s.f.brackets))
	return lo, hi, wide
}

// splitting returns, among the candidate experiments that fit, the one
// where hypotheses a and b disagree most (of those that come close to the
// most, the one that ends first); nil when none tells them apart.
func (s *prober) splitting(a, b scored, s0 time.Time, margin time.Duration, fits func(*experiment) bool) *experiment {
	return s.best(&designer{ws: []weighted{{a, 0.5}, {b, 0.5}}, perClient: s.f.perClient, client: s.client, pace: s.pace}, []time.Time{s0}, margin, fits)
}

// precisionDesigner weighs precisionPoints hypotheses spread evenly (in
// ratio) over answer w's widest equally good range (spread), each its own
// answer: w's hypothesis with only that parameter moved, so that the
// experiment splits the range where it is widest, near its middle. (Two
// ends alone are split as well by an experiment at either end's edge,
// which shaves the range by a hair; and ends found across the pool can
// differ in another parameter too: a fixed window of 1.89–2.10 s that
// blocks was split three times over on its block, 7.996 s against
// 8.003 s.) Points that do not fit as well as w are left out.
func (s *prober) precisionDesigner(w scored) *designer {
	lo, hi, _ := s.spread(w)
	at := func(h *hyp) *float64 { return &h.x }
	if w.h.v.timed() && lo.h.p > 0 && lo.h.x > 0 && hi.h.p/lo.h.p > hi.h.x/lo.h.x {
		at = func(h *hyp) *float64 { return &h.p }
	}
	a, b := *at(&lo.h), *at(&hi.h)
	o := s.observe()
	dz := &designer{perClient: s.f.perClient, client: s.client, pace: s.pace}
	// The other parameter, where the range's ends differ in it too, moved
	// alongside in proportion: a bucket that blocks trades its rate
	// against its block's length (1.08/s blocking 5.96 s fits as well as
	// 0.97/s blocking 6.06 s), and a point with the rate moved alone does
	// not fit.
	other := func(h *hyp) *float64 { return &h.p }
	if at(&lo.h) == &lo.h.p {
		other = func(h *hyp) *float64 { return &h.x }
	}
	c, d := *other(&lo.h), *other(&hi.h)
	for i := range precisionPoints {
		q := float64(i) / float64(precisionPoints-1)
		h := w.h
		*at(&h) = a * math.Pow(b/a, q)
		r := replayObs(h, o, s.f.perClient, w.miss)
		if (r.pruned || r.miss > w.miss) && c > 0 && d > 0 && c != d {
			*other(&h) = c * math.Pow(d/c, q)
			r = replayObs(h, o, s.f.perClient, w.miss)
		}
		if !r.pruned && r.miss <= w.miss {
			dz.ws = append(dz.ws, weighted{s: scoreOf(h, r), w: 1})
			dz.ans = append(dz.ans, answer{c: classOf(h), group: i})
		}
	}
	if len(dz.ws) < 2 {
		// The range is not one of w's parameter alone: its two ends.
		dz.ws = []weighted{{lo, 0.5}, {hi, 0.5}}
		dz.ans = nil
	}
	return dz
}

// precisionPoints is how many hypotheses precisionDesigner spreads over a
// range.
const precisionPoints = 5

// unblocked returns the best experiment of dz that fits (prober.best)
// starting from s0, from once every hypothesis of dz would admit a
// request again, or a time scale of w after that: a key that is blocked,
// or whose refusals restart its window, stays shut meanwhile, and what
// starts from s0 can tell only when the shut ends (a bucket that blocks
// for 6 s after each exhaustion, whose rate only a request it admits
// splits: a probe at the block's end, a fifth of a bit, was taken before
// the experiments after the block were looked at, three rounds running).
func (s *prober) unblocked(dz *designer, w scored, s0 time.Time, margin time.Duration, fits func(*experiment) bool) *experiment {
	free := dz.free(s0, margin, 1)
	froms := []time.Time{s0}
	if free.After(s0) {
		froms = append(froms, free, free.Add(w.h.scale()))
	}
	return s.best(dz, froms, margin, fits)
}

// rivalDesigner weighs the answer's variant against its rival's, half
// each: their hypotheses within the slack of the best, each variant's
// share spread over them as weigh spreads it, and the answers they stand
// for are the two variants. What an experiment tells is then which
// variant holds, whatever its parameters within what the outcomes allow
// (two hypotheses alone would be split where their parameters differ by a
// few milliseconds, which tells nothing of the family).
func (s *prober) rivalDesigner(w, r scored) *designer {
	var p []scored
	for _, x := range s.f.candidates(s.f.slack) {
		if x.h.v == w.h.v || x.h.v == r.h.v {
			p = append(p, x)
		}
	}
	if !slices.ContainsFunc(p, func(x scored) bool { return x.h.v == r.h.v }) {
		p = append(p, r)
	}
	ws := weigh(p, maxDesignHyps)
	share := map[variant]float64{}
	for _, x := range ws {
		share[x.s.h.v] += x.w
	}
	dz := &designer{ws: ws, perClient: s.f.perClient, client: s.client, pace: s.pace, ans: make([]answer, len(ws))}
	for i := range ws {
		v := ws[i].s.h.v
		ws[i].w *= 0.5 / share[v]
		if v == r.h.v {
			dz.ans[i].group = 1
		}
	}
	return dz
}

// best returns, among dz's candidate experiments from each of froms that
// fit, the one that tells most about its answers (of those that come
// close to the most, the one that ends first); nil when none tells
// anything.
func (s *prober) best(dz *designer, froms []time.Time, margin time.Duration, fits func(*experiment) bool) *experiment {
	var cands []experiment
	top := 0.0
	for _, from := range froms {
		for _, e := range dz.candidates(from, margin) {
			if !fits(&e) {
				continue
			}
			if e.info = dz.information(&e); e.info >= minInfo {
				cands = append(cands, e)
				top = max(top, e.info)
			}
		}
	}
	var best *experiment
	for i := range cands {
		e := &cands[i]
		if e.info >= nearTop*top && (best == nil || e.end().Before(best.end())) {
			best = e
		}
	}
	return best
}

// runnerUp returns the best hypothesis of any variant other than w's.
func (s *prober) runnerUp(w scored) (scored, bool) {
	var ru scored
	found := false
	for _, v := range allVariants {
		b, ok := s.f.best[v]
		if !ok || v == w.h.v {
			continue
		}
		if !found || b.miss < ru.miss {
			ru, found = b, true
		}
	}
	return ru, found
}

// freshRecovery is an exhausting burst at another phase of w's time
// scale, then single probes around the moment w says quota returns:
// just before (refused), just after (admitted) and half a time scale
// later.
func (s *prober) freshRecovery(w scored, s0 time.Time, margin time.Duration) experiment {
	X := w.h.scale()
	t0 := s0.Add(time.Duration(freshPhaseShare * float64(X)))
	k := int(w.quota() + 2)
	dz := &designer{ws: []weighted{{w, 1}}, perClient: s.f.perClient, client: s.client, pace: s.pace}
	burst := make([]time.Time, k)
	for i := range burst {
		burst[i] = t0
	}
	m := max(margin, X/10)
	rec := dz.recoveries(burst, t0.Add(margin))[0]
	b := newBuilder("recovery").burst(t0, k)
	if before := rec.Add(-m); before.After(t0.Add(margin)) {
		b.burst(before, 1)
	}
	b.burst(rec.Add(m), 1)
	b.burst(rec.Add(m+X/2), 1)
	return b.done()
}
