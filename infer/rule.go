package infer

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// ErrNoRule is wrapped by Rule's error when the inference describes no
// rule: no family fits (misfit), no limiting was observed (none), or the
// parameters were not estimated.
var ErrNoRule = errors.New("the inference describes no rule")

// Rule is the one conversion of an inference into a policy rule: what the
// answer promises, as verify checks it. Window families give Limit per
// Window — fixed-window a Fixed window with its alignment (epoch, or
// first-request, also for an unknown alignment: the weaker promise),
// sliding-log and sliding-window-counter a Sliding one (N in any W, the
// promise a sliding-window counter approximates); buckets (token-bucket,
// leaky-bucket-queue) Capacity and Rate; an inferred penalty becomes the
// rule's Penalty (a block's length to the millisecond). The key is the inferred one
// (global when unknown), the reject status the one seen.
//
// The note is empty for an exact fit; for an approximate one it says that
// the rule is the closest family's and was not validated. A misfit, none,
// or missing parameters give an error wrapping ErrNoRule.
func (inf *Inference) Rule() (rule verify.Endpoint, note string, err error) {
	switch {
	case inf.Fit == FitMisfit || inf.Algorithm == "":
		return rule, "", fmt.Errorf("infer: %w: no family fits (%s)", ErrNoRule, inf.ClosestPhrase())
	case inf.Algorithm == None:
		return rule, "", fmt.Errorf("infer: %w: no limiting was observed", ErrNoRule)
	}
	rule.Key = inf.Key
	if rule.Key == KeyUnknown {
		rule.Key = ""
	}
	if inf.RejectStatus != nil {
		rule.Status = *inf.RejectStatus
	}
	p := inf.Params
	switch inf.Algorithm {
	case FixedWindow, SlidingLog, SlidingWindowCounter:
		if p.Limit == nil || p.WindowS == nil {
			return verify.Endpoint{}, "", fmt.Errorf("infer: %w: %s without limit and window", ErrNoRule, inf.Algorithm)
		}
		rule.Limit, rule.Window = int64(math.Round(p.Limit.Value)), units.Seconds(p.WindowS.Value)
		rule.WindowType = verify.Sliding
		if inf.Algorithm == FixedWindow {
			rule.WindowType, rule.Align = verify.Fixed, limiter.AlignFirstRequest
			switch {
			case inf.Alignment == nil:
			case *inf.Alignment == AlignEpoch:
				rule.Align = limiter.AlignEpoch
			case *inf.Alignment == AlignTimer && p.PhaseS != nil:
				rule.Align = limiter.AlignTimer
				rule.Phase, rule.PhaseSpread = timerPhase(*p.PhaseS, rule.Window)
			}
		}
	case TokenBucket, LeakyBucketQueue:
		if p.Capacity == nil || p.RatePerS == nil {
			return verify.Endpoint{}, "", fmt.Errorf("infer: %w: %s without capacity and rate", ErrNoRule, inf.Algorithm)
		}
		rule.Capacity, rule.Rate = int64(math.Round(p.Capacity.Value)), p.RatePerS.Value
	default:
		return verify.Endpoint{}, "", fmt.Errorf("infer: %w: unknown family %q", ErrNoRule, inf.Algorithm)
	}
	if pen := inf.Penalty; pen != nil {
		rule.Penalty = limiter.Penalty{Kind: pen.Kind}
		if pen.Kind == limiter.PenaltyBlock {
			if pen.DurationS == nil {
				return verify.Endpoint{}, "", fmt.Errorf("infer: %w: a block without its length", ErrNoRule)
			}
			rule.Penalty.Duration = max(units.Seconds(pen.DurationS.Value).Round(time.Millisecond), time.Millisecond)
		}
	}
	if inf.Fit == FitApproximate {
		note = fmt.Sprintf("the rule of the closest family, %s, not validated by an experiment it was not fitted on (fit approximate)", inf.Algorithm)
	}
	return rule, note, nil
}

// minPhaseSpread is the least uncertainty of an inferred timer's phase, a
// fraction of its window: arrival estimates that place the edges carry
// more than the phases that tie at the answer's length show.
const minPhaseSpread = 50

// timerPhase returns an inferred timer's phase within [0, window) and its
// spread: half the range of the phases that fit as well, at least
// window/minPhaseSpread.
func timerPhase(p Param, window time.Duration) (phase, spread time.Duration) {
	phase = units.Seconds(p.Value).Round(time.Microsecond)
	phase = ((phase % window) + window) % window
	spread = units.Seconds(math.Max(p.Value-p.Low, p.High-p.Value)).Round(time.Microsecond)
	return phase, max(spread, window/minPhaseSpread)
}
