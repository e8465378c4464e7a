package infer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// The cost of an experiment beyond its duration: the refit and the next
// design take time too, so that many short experiments do not beat one
// that settles the answer.
const (
	overheadDiv = 4
	minOverhead = 50 * time.Millisecond
)

// scoreTie is the relative difference below which two experiments' scores
// are equal.
const scoreTie = 1e-9

// design runs designed experiments until the plausible models agree, no
// experiment can split them, or the budget ends.
func (s *prober) design(ctx context.Context, f *fit) (*fit, error) {
	// futile holds the kinds of experiment that, run last, told the
	// designed hypotheses nothing (told); they are not designed again
	// until an experiment does.
	futile := map[string]bool{}
	for range maxRounds {
		p := f.plausible(designSlack)
		if a, ok := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus); ok && a.settles(p) {
			trace("settled by the advertised %d per %v, epoch-aligned", a.quota, a.window)
			return f, nil
		}
		if resolved(p) {
			trace("resolved: %d plausible, first %v: %s", len(p), p[0].h, summarize(p))
			return f, nil
		}
		dz := &designer{ws: weigh(f.candidates(designSlack), maxDesignHyps), perClient: s.perClient, client: s.client, pace: s.pace}
		s0 := s.now().Add(s.opts.lead())
		margin := max(s.opts.lead(), 2*clusterGap)
		overhead := max(dz.scale()/overheadDiv, minOverhead)
		var best *experiment
		score := 0.0
		cands := dz.candidates(s0, margin)
		if free := dz.free(s0, margin, freeShare); free.Sub(s0) > dz.scale() {
			// Shut for longer than a time scale under most of the weight
			// (a block): the same experiments from when that weight
			// admits again, or only those that wait it out tell anything
			// (a counter and a log that block for 3 s were "recovered"
			// from sixteen times, a fifth of a bit each about the block's
			// length, while a spread after the block would split the
			// two).
			cands = append(cands, dz.candidates(free, margin)...)
		}
		for _, e := range cands {
			if e.end().After(s.deadline) || s.sent+len(e.at) > s.opts.maxRequests() || futile[e.phase] {
				continue
			}
			e.info = dz.information(&e)
			e.cost = e.end().Sub(s.now()) + overhead
			trace("  candidate %s %d sends ending %v: %.3f bits", e.phase, len(e.at), e.end().Sub(s.start), e.info)
			if e.info < minInfo {
				continue
			}
			// Scores equal but for rounding (information sums over maps,
			// in no fixed order) go to the earlier candidate, so that a run
			// designs the same experiments every time.
			if sc := e.info / e.cost.Seconds(); best == nil || sc > score*(1+scoreTie) {
				ee := e
				best, score = &ee, sc
			}
		}
		trace("round: %d plausible (%d designed) %s", len(p), len(dz.ws), summarize(p))
		if debugf != nil {
			mass := map[answer]float64{}
			for i, x := range dz.ws {
				mass[dz.answerOf(i)] += x.w
			}
			for a, m := range mass {
				if m > 0.01 {
					trace("   answer %+v mass %.3f", a, m)
				}
			}
		}
		if best != nil {
			trace("chose %s (%d sends, %.3f bits over %v)", best.phase, len(best.at), best.info, best.cost)
		}
		if best == nil {
			// Nothing tells the plausible models apart (or nothing fits the
			// budget): the latter is an incomplete inference.
			if !s.anyFeasible(dz, s0, margin) {
				s.stopped, s.designCut = true, true
			}
			return f, nil
		}
		start := best.at[0]
		if _, err := s.run(ctx, best.phase, start, best.sends(start)); err != nil {
			return s.refit(f), err
		}
		f = s.refit(f)
		if told(dz.ws, f, s.observe(), s.perClient) {
			clear(futile)
		} else {
			trace("%s told nothing: every designed hypothesis missed as many more outcomes", best.phase)
			futile[best.phase] = true
		}
	}
	// The rounds ran out before the models were told apart.
	s.stopped, s.designCut = true, true
	return f, nil
}

// freeShare is the share of the design's weight whose key must be shut
// for longer than a time scale before the design also looks past the
// shut: a few blocking hypotheses among plain ones (a 60 s epoch window
// with blocks of 103 s still in the pool) sent a run of 330 s to 569 s
// waiting them out.
const freeShare = 0.5

// told reports whether the experiment just run, refitted into f, told
// the hypotheses ws it was designed over apart: some missed more outcomes
// than another over the observations o, or fell out of the fit as
// degenerate. The design predicts outcomes at the exact instants, but a
// replay gives a request within the timing tolerance of a hypothesis's
// boundary the benefit of the doubt: an experiment aimed at such a
// boundary (a block of 2.998 s against one of 3.002 s) scores as
// informative, round after round, and tells nothing. A hypothesis the
// refit's pool no longer holds is replayed afresh: the search samples
// anew each time, and one it did not sample again has not for that been
// told apart (before, any such one counted as told, and an experiment
// aimed at a boundary was never found futile while the pool moved).
func told(ws []weighted, f *fit, o *observations, perClient bool) bool {
	after := make(map[hyp]int, len(f.pool))
	for _, s := range f.pool {
		after[s.h] = s.miss
	}
	// Those the pool holds first, their misses known; each replay of the
	// rest then stops once it misses more than would tie them.
	var rest []weighted
	first, set := 0, false
	for _, x := range ws {
		m, ok := after[x.s.h]
		if !ok {
			rest = append(rest, x)
			continue
		}
		d := m - x.s.miss
		if set && d != first {
			return true
		}
		first, set = d, true
	}
	for _, x := range rest {
		bound := -1 // the first replay runs whole
		if set {
			if bound = x.s.miss + first; bound < 0 {
				return true // it cannot miss fewer than none
			}
		}
		r := replayObs(x.s.h, o, perClient, bound)
		if r.pruned {
			return true // degenerate now, or missed more than the others
		}
		d := r.miss - x.s.miss
		if set && d != first {
			return true
		}
		first, set = d, true
	}
	return false
}

// anyFeasible reports whether some informative experiment exists at all,
// ignoring the budget: when one does, the budget is what stopped us.
func (s *prober) anyFeasible(dz *designer, s0 time.Time, margin time.Duration) bool {
	for _, e := range dz.candidates(s0, margin) {
		if dz.information(&e) >= minInfo {
			return true
		}
	}
	return false
}

// refit fits everything observed within the space of the previous fit's
// pool. While the key test is undecided, the same space is fitted with a
// key per client too, and keyVerdict decides as soon as the observations
// since tell the keyings apart.
func (s *prober) refit(prev *fit) *fit {
	o := s.observe()
	f := prev.extend(o)
	if f == nil {
		f = search(o, prev.narrowed())
	}
	a, _ := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus)
	if w, ok := f.winnerFor(a); ok {
		f.widen(o, w)
	}
	if s.keySent && !s.keyTested {
		sp := prev.narrowed()
		sp.perClient = true
		g := search(o, sp)
		if decided, perClient := keyVerdict(f, g); decided {
			trace("key test decided later: per client %v", perClient)
			s.keyTested, s.perClient = true, perClient
			if perClient {
				return g
			}
		}
	}
	return f
}

// recheck searches the first fit's space afresh over every observation
// and merges what it finds into f, when f's answer w has a behaviour. A
// refit continues its pool and refines around it, so a region it dropped
// early — when a block's length was not yet known, say — is never seen
// again, even when the truth lies there (a counter that blocks came out an
// exact sliding log); before such an answer is validated (and so may
// become exact), the space is searched once more. Epoch-aligned windows
// are left out: a refit keeps every one of their surviving lengths
// (narrowed), and they are the costliest to search. Plain answers are not
// rechecked: the search costs as much again as the first fit, and no plain
// answer was seen to lose its truth this way.
func (s *prober) recheck(f *fit, w scored) *fit {
	if s.firstSpace == nil || f == nil || w.h.v.beh == "" {
		return f
	}
	o := s.observe()
	sp := s.firstSpace(o)
	sp.perClient = f.perClient
	sp.axes = slices.DeleteFunc(sp.axes, func(ax axis) bool { return ax.v.aligned() })
	g := search(o, sp)
	if !slices.Equal(g.refs, f.refs) {
		return f
	}
	m := f.merge(g)
	w0, _ := f.winner()
	w1, _ := m.winner()
	trace("recheck: %v misses %d → %v misses %d", w0.h, w0.miss, w1.h, w1.miss)
	return m
}

// summarize lists the variants of p with their counts and ranges (for
// traces).
func summarize(p []scored) string {
	type agg struct {
		lo, hi float64
		ns     map[int64]bool
		best   int
	}
	m := map[variant]*agg{}
	for _, s := range p {
		a := m[s.h.v]
		if a == nil {
			a = &agg{lo: s.h.x, hi: s.h.x, ns: map[int64]bool{}, best: s.miss}
			m[s.h.v] = a
		}
		a.lo, a.hi = math.Min(a.lo, s.h.x), math.Max(a.hi, s.h.x)
		a.ns[s.h.n] = true
		a.best = min(a.best, s.miss)
	}
	out := ""
	for _, v := range allVariants {
		if a := m[v]; a != nil {
			out += fmt.Sprintf("[%v miss=%d n=%d x=%.4g..%.4g] ", v, a.best, len(a.ns), a.lo, a.hi)
		}
	}
	return out
}
