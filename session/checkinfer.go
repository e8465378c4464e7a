package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// Inferred is what Check's inference (CheckOptions.Infer) made of one
// rule: its inference, or why there is none.
type Inferred struct {
	// Inference is infer's answer about the rule's URLs; nil when the
	// rule was not inferred. Its Complete is false when the budget ended
	// it before the candidates were told apart.
	Inference *infer.Inference
	// Skipped says why the rule was not inferred ("" when it was): what
	// was left of --max-duration or --max-requests could not hold it, or
	// the suites did not finish; beside an Inference, the error that
	// ended it early.
	Skipped string
}

// inferMinRequests is the fewest requests left for an inference to be
// started: its opening bursts and scans alone need about as many.
const inferMinRequests = 50

// InferNeeds is the time an inference of rule e is planned to take at
// most, waiting for the rule's quota to be whole first (IdleWait) then
// infer's budget of 6·W + 30 s with the rule's period as W. Check infers
// a rule only when this much is left of its --max-duration.
func InferNeeds(e verify.Endpoint) time.Duration {
	return IdleWait(e) + 6*e.Period() + 30*time.Second
}

// IdleWait is how long Check waits after the suites before it infers
// rule e: twice the time the declared rule needs to be whole again
// (Endpoint.Fresh) plus 5 s, so that a limiter somewhat slower than
// declared is whole again too. Infer opens with bursts from idle; a
// limiter that is not yet whole makes its opening miss the fitted model,
// so the fit comes out approximate or misfit: a mismatch is then
// possible, never a false certain one.
func IdleWait(e verify.Endpoint) time.Duration {
	return 2*e.Fresh() + 5*time.Second
}

// inferRules infers, after the suites, the algorithm behind each rule of
// pol in turn, each on an engine of its own (the rule's URLs, method and
// key header), once the rule's quota is whole again (IdleWait after the
// last request), within what is left of ctx's deadline (the
// --max-duration budget) and of --max-requests. A rule whose
// InferNeeds is beyond what is left is skipped, and so is every rule
// after it. It fills out (one entry per rule) and returns the error that
// ended it: the context's, or an engine's.
func (s *Session) inferRules(ctx context.Context, pol *verify.Policy, zero time.Time, out []Inferred) error {
	for i, rule := range pol.Endpoints {
		left := time.Duration(0)
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		done, _ := s.rec.counts()
		reqLeft := s.cfg.Caps.MaxRequests - int(done)
		if need := InferNeeds(rule); left < need || reqLeft < inferMinRequests {
			for j := i; j < len(out); j++ {
				out[j].Skipped = fmt.Sprintf("not inferred: an inference of %s needs up to %s and %d requests; %s and %d requests were left of --max-duration and --max-requests",
					pol.Endpoints[j].String(), units.HumanDuration(RoundDuration(InferNeeds(pol.Endpoints[j]))), inferMinRequests, units.HumanDuration(RoundDuration(max(left, 0))), max(reqLeft, 0))
			}
			return nil
		}
		inf, err := s.inferRule(ctx, rule, i+1, zero, left-IdleWait(rule), reqLeft)
		out[i].Inference = inf
		if err != nil {
			if inf == nil || ctx.Err() != nil || errors.Is(err, probe.ErrUsage) {
				return err
			}
			// The suites' verdict stands: an inference an engine error
			// ended early is kept as it is (complete false), and the
			// next rule is inferred.
			out[i].Skipped = "the inference stopped early: " + err.Error()
		}
	}
	return nil
}

// inferRule waits until rule's quota is whole, then infers the algorithm
// behind its URLs within maxDur and maxReq.
func (s *Session) inferRule(ctx context.Context, rule verify.Endpoint, id int, zero time.Time, maxDur time.Duration, maxReq int) (*infer.Inference, error) {
	opt, identities := s.ruleOptions(rule)
	opt.RaceMode = ""
	s.line("infer rule %d (%s): waiting %s for its quota to be whole", id, rule.String(), units.HumanDuration(RoundDuration(IdleWait(rule))))
	t := time.NewTimer(IdleWait(rule))
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	eng, err := s.newEngine(opt, zero, 0)
	if err != nil {
		return nil, err
	}
	defer eng.close()
	// The session's lead rather than infer's shorter default: after a
	// suite, on a busy machine, a schedule planned 20 ms ahead may be
	// due before the engine is ready.
	o := s.inferOptions(InferOptions{Lead: defaultLead}, opt, zero, nil)
	o.MaxDuration, o.MaxRequests = maxDur, maxReq
	if identities == 1 {
		o.Clients = 1
	}
	o.OnBudget = func(window, budget time.Duration) {
		s.line("infer rule %d: time scale W ≈ %s: budget at most %s", id, units.HumanDuration(RoundDuration(window)), units.HumanDuration(RoundDuration(min(budget, maxDur))))
	}
	inf, err := infer.Infer(ctx, eng, o)
	if inf != nil {
		inf.RecordFile = s.rec.path
	}
	if err != nil && inf != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = nil // the budget ended it: inf says complete false
	}
	return inf, err
}
