package infer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// stage is one step of an inference run. The driver (prober.infer) runs
// the current stage, which does its experiments and names the next one,
// until stageDone:
//
//	opening ──► design ──► validate ──► (instances) ──► (concurrent) ──► done
//	               ▲          │
//	               └─ extend ◄┘  (a failed or impossible validation, once)
//
// opening sends the fixed first experiments and makes the first fit (or
// concludes none); design runs the experiments that tell the plausible
// answers apart; validate tests the answer on an experiment it was not
// fitted on; extend doubles the budget once for an answer not yet exact;
// concurrent measures an over-admitting target's concurrent maximum.
// After a design whose answer fits nothing, the instance check may run
// once more (checkAgain); when it finds instances, design starts afresh.
type stage int

const (
	stageOpening stage = iota
	stageDesign
	stageValidate
	stageExtend
	stageInstances
	stageConcurrent
	stageDone
)

func (st stage) String() string {
	return [...]string{"opening", "design", "validate", "extend", "instances", "concurrent", "done"}[st]
}

// Tuning of validation.
const (
	// maxValidations bounds the validation experiments of one run: an
	// answer that failed one is refitted, designed for and validated
	// again, but not forever.
	maxValidations = 12
	// maxRivalRounds bounds the rival validations of one run, across
	// validate's calls: each tells the answer from the rival of the moment
	// by at least one outcome, and a rival refitted to every new outcome
	// may take a few.
	maxRivalRounds = 4
	// maxPrecisionRounds bounds the precision validations of one run: each
	// splits the answer's widest range where its ends disagree most, and a
	// bucket that blocks after every exhaustion (1/s, capacity 3, a block
	// of 6 s) narrowed its rate from 0.97–1.23/s to 0.97–1.13/s in one.
	maxPrecisionRounds = 3
	// maxPlainRivalScale: a plain answer of a longer time scale gets no
	// rival validation. A 60 s epoch window's rival was a timer of
	// 59.98 s whose ticks fell on the minute near the run: two rounds of
	// a minute each did not tell them apart, and the run took 360 s
	// instead of 260 s to stay approximate.
	maxPlainRivalScale = 10 * time.Second
	// budgetExtension is the factor by which an answer not yet exact
	// extends the budget, once: 2·(6·W + 30 s).
	budgetExtension = 2
	// validationPhase prefixes the phase of a validation experiment in the
	// record, so that its outcomes are told from those fitted before.
	validationPhase = "validate-"
	// freshPhaseShare places the fresh exhaust-and-recover of a validation
	// without a runner-up at another phase of the time scale: an
	// irrational share, so that it never falls on the phase of the
	// experiments before it.
	freshPhaseShare = 0.382
	// nearTop: a validation experiment that tells the answer from its
	// runner-up with at least this share of the best one's information is
	// as good, and the one that ends first is run (a time scale of a
	// minute makes every experiment long).
	nearTop = 0.9
	// sustainedFactor is the load of the sustained validation, in times
	// the answer's own rate (quota per time scale): enough that the answer
	// refuses two of three, while a limiter with a shorter window or a
	// faster refill whose penalty the model stretched admits them.
	sustainedFactor = 3
	// maxSustainedValidation bounds the sustained validation's requests:
	// a quota too large for it is validated by the first experiment alone.
	maxSustainedValidation = 120
	// trickleFactor and trickleScales shape the trickle validation: load
	// below the answer's rate for two time scales, which a plain model
	// admits nearly whole, while a limiter whose requests keep its window
	// open (extend) or whose quota does not come back as the model's does
	// refuses some of it.
	trickleFactor = 0.8
	trickleScales = 2
	// maxTrickleScale: an answer of a longer time scale is not trickled
	// (two of its scales would double a run's length); a penalty that
	// keeps a long window open goes unvalidated there (a known limit).
	maxTrickleScale = 10 * time.Second
	// trickleRest is the quiet before the trickle, in time scales: enough
	// for a sliding-window counter's key to forget an exhaustion.
	trickleRest = 2
	// holdSpacing and holdScales shape the hold validation: after an
	// exhausting burst, a request every 0.7 time scales for 4 of them.
	// Each request comes before the answer's window could end, so a
	// limiter whose refusals keep the key shut (restart, a counter that
	// counts them) and one that blocks for a fixed time from the first
	// refusal, or lets quota back at the window's end, predict different
	// first admissions.
	holdSpacing = 0.7
	holdScales  = 4.0
	// pauseShare and pauseLate are the pause validation's gaps, in time
	// scales: after the first a bucket has refilled about half, a window
	// has not reset, and a bucket that forgets a key idle for less than
	// the gap is full again; the second, longer, catches a bucket that
	// forgets a key idle for up to three quarters of its refill (at least
	// a quarter of its capacity admitted more than a plain bucket's).
	pauseShare = 0.5
	pauseLate  = 0.75
	// maxSpread bounds an exact answer's equally good ranges (the ratio of
	// their ends, before the timing slack widens them): within it, the
	// middle value lies within 4 % of any value in the range. A wider
	// range gets the precision validation, designed between its ends.
	maxSpread = 1.08
)

// infer runs the stages from opening to done and concludes.
func (s *prober) infer(ctx context.Context) (*Inference, error) {
	var err error
	for st := stageOpening; st != stageDone; {
		trace("stage %v", st)
		st, err = s.step(ctx, st)
	}
	return s.conclude(s.f), err
}

// step runs stage st and returns the next one.
func (s *prober) step(ctx context.Context, st stage) (stage, error) {
	switch st {
	case stageOpening:
		f, err := s.opening(ctx)
		s.f = f
		if f == nil || err != nil || s.stopped {
			return stageDone, err
		}
		if err := s.checkInstances(ctx); err != nil || s.f == nil || s.stopped {
			return stageDone, err
		}
		return stageDesign, nil
	case stageDesign:
		f, err := s.design(ctx, s.f)
		s.f = f
		if err != nil {
			return stageDone, err
		}
		if again, err := s.checkAgain(ctx); err != nil || s.f == nil {
			return stageDone, err
		} else if again {
			return stageDesign, nil
		}
		return stageValidate, nil
	case stageValidate:
		return s.validate(ctx)
	case stageExtend:
		s.extendBudget()
		return stageDesign, nil
	case stageInstances:
		if err := s.confirmInstances(ctx); err != nil {
			return stageDone, err
		}
		return s.afterValidation(), nil
	case stageConcurrent:
		if s.over != nil {
			s.concurrentCheck(ctx, s.f)
		}
		return stageDone, nil
	}
	return stageDone, nil
}

// afterValidation is the stage after validation ended, one way or another.
func (s *prober) afterValidation() stage {
	if s.inst.found != nil && !s.inst.confirmed {
		return stageInstances
	}
	if s.over != nil {
		return stageConcurrent
	}
	return stageDone
}

// validate tests the current answer on experiments it was not fitted
// on: first the one where it and its runner-up disagree most (or a fresh
// exhaust-and-recover), then sustained load at three times its rate over
// one time scale (a limiter whose penalty or quirk the fitted model
// stretched into a longer window or a slower rate admits what the model
// refuses there). Each time it predicts the outcome from the fitted
// answer, runs the experiment and checks the prediction; the answer is
// then refitted with the new outcomes. Predictions that held, whose refit
// names the same answer, make the answer exact. A failed one (or one the
// budget has no room for) extends the budget once and designs again.
func (s *prober) validate(ctx context.Context) (stage, error) {
	if w, ok := s.answer(); ok && !s.rechecked {
		s.rechecked = true
		s.f = s.recheck(s.f, w)
	}
	for i := 0; i < len(validationKinds); i++ {
		kind := validationKinds[i]
		w, ok := s.answer()
		if !ok || s.validations >= maxValidations {
			break // what passed so far stands (see below)
		}
		if kind == validateRival {
			// Again while a rival stands, the answer validated so far,
			// and the rounds last (for a plain answer, up to
			// maxPlainRivalScale).
			if s.validated == nil || *s.validated != w.h.v || !s.validatedEnough() || s.rivalRounds >= maxRivalRounds {
				break
			}
			if w.h.v.beh == "" && w.h.scale() > maxPlainRivalScale {
				break
			}
			if _, tied := s.f.rival(w); !tied {
				break
			}
			s.rivalRounds++
			i-- // this kind again, after the experiment
		} else if kind == validatePrecision {
			// Again while the answer's ranges stay wide, up to
			// maxPrecisionRounds.
			if _, _, wide := s.spread(w); !wide || s.precisionRounds >= maxPrecisionRounds {
				continue // narrow already, or it stays approximate
			}
			s.precisionRounds++
			i-- // this kind again, after the experiment
		} else if s.validated != nil && *s.validated == w.h.v && s.passed[kind] {
			continue // this answer passed it before the budget was extended
		}
		e, why := s.validationExperiment(w, kind)
		if e == nil && (kind == validatePrecision || kind == validateRival) {
			trace("no %v validation: %s", kind, why)
			if !s.extended && w.h.v.beh != "" {
				// A behaviour answer not yet exact for want of room: the
				// budget is extended once, and the design goes on (what
				// passed stands for the same answer). A plain answer stays
				// approximate: its design already had the room it asked
				// for, and more of it behind a balancer of many instances
				// only ran into the budget (an incomplete run).
				return stageExtend, nil
			}
			if kind == validateRival {
				break // the answer stays approximate (conclude names the rival)
			}
			continue // the answer stays approximate (validatedEnough)
		}
		if e == nil {
			if kind != validateDisagreement && why != "" {
				trace("no %v validation: %s", kind, why)
				if why == outOfBudget && w.h.v.beh != "" && !s.extended {
					// A behaviour answer is exact only with every kind
					// passed (validatedEnough): the budget is extended
					// once, as for a failed prediction.
					return stageExtend, nil
				}
				if s.excused == nil {
					s.excused = map[validationKind]string{}
				}
				s.excused[kind] = why
				continue // it cannot be afforded at this quota; the first one stands
			}
			trace("no validation experiment fits the budget")
			s.validated = nil
			if !s.extended {
				return stageExtend, nil
			}
			s.stopped = true
			return s.afterValidation(), nil
		}
		s.validations++
		o := s.observe()
		before := replayObs(w.h, o, s.f.perClient, -1)
		rng := s.f.rangeOf(w, o)
		start := e.at[0]
		if _, err := s.run(ctx, validationPhase+e.phase, start, e.sends(start)); err != nil {
			s.f = s.refit(s.f)
			return stageDone, err
		}
		after := replayObs(w.h, s.observe(), s.f.perClient, -1)
		s.f = s.refit(s.f)
		nw, _ := s.answer()
		// The prediction is the answer's equally good range, not its one
		// hypothesis: the winner may lie at an end of its range, where an
		// experiment can fall between it and the truth by a fraction of a
		// millisecond. It held when the outcomes are reproduced as well as
		// before by a hypothesis in the range.
		held := after.miss <= before.miss || rng.contains(nw.h) && nw.miss <= w.miss
		if kind == validateRival {
			// What it tests is the family and behaviour, the parameters
			// having passed the others: it holds when the refitted answer
			// names the same and reproduces the outcomes as well as before
			// (a window a few milliseconds off may miss where the
			// experiment falls between the two).
			held = nw.miss <= w.miss
		}
		trace("validation %s (%s): %v predicted, misses %d → %d; refit %v", e.phase, why, w.h, before.miss, after.miss, nw.h)
		if !held || nw.h.v != w.h.v {
			s.forgetValidation()
			if !s.extended {
				return stageExtend, nil
			}
			return stageDesign, nil
		}
		if s.validated == nil || *s.validated != w.h.v {
			s.passed, s.passedHow, s.excused = map[validationKind]bool{}, nil, nil
		}
		s.validated = &w.h.v
		s.passed[kind] = true
		s.passedHow = append(s.passedHow, fmt.Sprintf("%s (%s at %s, %s)", validationPhase+e.phase,
			plural(len(e.at), "request"), units.HumanDuration(start.Sub(s.start)), why))
	}
	s.validation = ""
	if s.validatedEnough() {
		s.validation = strings.Join(s.passedHow, " and ") + ": predicted and held"
		if w, ok := s.answer(); ok && s.designCut && s.f.decisive(w) {
			// The design found no experiment to split the plausible
			// models, but the validations did: they were told apart after
			// all. (A later stage cut by the budget still counts.)
			s.stopped, s.designCut = false, false
		}
	}
	return s.afterValidation(), nil
}

// forgetValidation forgets the validations passed so far: the answer
// they were for failed one, or the outcomes it was fitted on were set
// aside. The next answer is searched for afresh too (recheck).
func (s *prober) forgetValidation() {
	s.validated, s.passed, s.passedHow, s.excused = nil, nil, nil, nil
	s.rechecked = false
}

// validatedEnough reports whether the validated answer passed the
// validations exactness rests on: the disagreement experiment, and the
// sustained one — which a plain answer may do without when its quota or
// the budget cannot afford it, an answer with a behaviour never (a block
// resets the key after every exhaustion, and the sustained load is what
// tests the rate or window behind it). The trickle is an extra test: when
// the bound on validations or the budget ends it, what passed stands.
// When the bound ends the validation before the sustained one ran, the
// answer stays approximate: one experiment chosen against a runner-up that
// was itself a poor fit proves little.
func (s *prober) validatedEnough() bool {
	if len(s.passedHow) == 0 || !s.passed[validateDisagreement] || s.validated == nil {
		return false
	}
	if w, ok := s.answer(); !ok || w.h.v != *s.validated {
		return false
	} else if _, _, wide := s.spread(w); wide {
		return false // the experiments left a parameter unsettled
	} else if w.h.v.align == limiter.AlignEpoch && roundness(w.h.x) >= unroundEpoch {
		trace("an epoch-aligned window of %v: a length no server configures", units.Seconds(w.h.x))
		return false
	}
	why := s.excused[validateSustained]
	sustained := s.passed[validateSustained] || why == fittedOnSustained
	if s.validated.beh != "" {
		// A behaviour answer: every kind, the extra ones too — they are
		// what tells one penalty or quirk from another.
		return sustained && s.passed[validateTrickle] && s.passed[validateHold] && s.passed[validatePause]
	}
	return sustained || why != ""
}

// unroundEpoch is the roundness (decimal digits of the length in seconds,
// to the millisecond) from which an epoch-aligned answer is never exact:
// servers configure lengths such as 1 s, 1.5 s or 250 ms, and windows of
// neighbouring lengths fall at phases that look random, so over a run one
// of them — 2.498 s — passes for a limiter's own timer of 2.5 s, or for a
// window that drifts, and would drift out of step within the hour.
const unroundEpoch = 3

// fittedOnSustained excuses the sustained validation: the design already
// held the answer to sustained load above its rate, and a model
// stretched by a penalty would have missed there.
const fittedOnSustained = "the answer was fitted on sustained load already"

// validationKind is which validation experiment to design.
type validationKind int

const (
	// validateDisagreement: where the answer and its runner-up disagree
	// most, else a fresh exhaust-and-recover at another phase.
	validateDisagreement validationKind = iota
	// validateSustained: sustained load at sustainedFactor times the
	// answer's rate over one time scale.
	validateSustained
	// validateTrickle: requests paced at trickleFactor times the answer's
	// rate over trickleScales time scales.
	validateTrickle
	// validateHold: an exhausting burst, then single requests every
	// holdSpacing time scales for holdScales time scales.
	validateHold
	// validatePause: an exhausting burst, another pauseShare of a time
	// scale later, and for a bucket a third pauseLate after that.
	validatePause
	// validatePrecision: where the ends of the answer's widest equally
	// good range disagree most, when it is wider than maxSpread.
	validatePrecision
	// validateRival: once the others passed, where the answer and its
	// rival (fit.rival: another answer the outcomes do not yet tell from
	// it) disagree most, again while one stands, up to maxRivalRounds
	// times. The design weighs hypotheses by their misses, so it leaves a
	// rival a few misses behind alone, while exactness for an answer with
	// a behaviour (a penalty or a quirk) wants it beyond the timing slack
	// (a block ends every exhausting experiment alike, so a sliding log
	// stays within a few misses of a fixed window). A plain answer's rival
	// misses no more than it: the design judges whether the answer is
	// settled on the plain models alone, so behind three instances by
	// request a limiter's own timer of 2.01 s, which reproduced every
	// outcome of an epoch window of 2 s, was never aimed at.
	validateRival
)

// validationKinds are the validation experiments in the order they run.
var validationKinds = []validationKind{validateDisagreement, validateSustained, validateTrickle, validateHold, validatePause, validatePrecision, validateRival}

func (k validationKind) String() string {
	return [...]string{"disagreement", "sustained", "trickle", "hold", "pause", "precision", "rival"}[k]
}

// answer is the current fit's winner as the document will name it: among
// equally good hypotheses, the one the advertisement names.
func (s *prober) answer() (scored, bool) {
	if s.f == nil {
		return scored{}, false
	}
	a, _ := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus)
	return s.f.winnerFor(a)
}

// extendBudget extends the deadline once, to 2·(6·W + 30 s) from the
// start, still within Options.MaxDuration (Options.MaxRequests is checked
// per experiment as ever).
func (s *prober) extendBudget() {
	s.extended = true
	if s.budget <= 0 {
		return
	}
	d := s.start.Add(min(budgetExtension*s.budget, s.opts.maxDuration()))
	if d.After(s.deadline) {
		trace("budget extended to %v", d.Sub(s.start))
		s.deadline = d
		s.stopped = false
		s.announceBudget()
	}
}

// announceBudget tells Options.OnBudget the budget as the deadline now
// sets it, once it was announced first: progress counts against it.
func (s *prober) announceBudget() {
	if s.opts.OnBudget != nil && s.budgetSet {
		s.opts.OnBudget((s.budget-budgetSlack)/6, s.deadline.Sub(s.start))
	}
}

// plural returns "1 request", "2 requests".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
