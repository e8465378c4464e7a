package report

import (
	"math"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/verify"
)

// rule is the limit drawn against the trailing-window counts: a declared
// policy rule (verify's Endpoint, normalized), or one built from an
// inferred model.
type rule struct {
	verify.Endpoint
	inferred bool
}

func (r *rule) isWindow() bool { return !r.IsBucket() && r.Limit > 0 && r.Window > 0 }
func (r *rule) isBucket() bool { return r.IsBucket() && r.Rate > 0 && r.Quota() > 0 }
func (r *rule) fixed() bool    { return r.WindowType == verify.Fixed }

// align says where fixed windows start: epoch or first-request.
func (r *rule) align() string {
	if r.Align == "" {
		return infer.AlignFirstRequest
	}
	return string(r.Align)
}

// describe says the drawn rule in words: verify's one description of a
// rule (Endpoint.String), marked when inferred.
func (r *rule) describe() string {
	s := r.Endpoint.String()
	if r.inferred {
		s += " — inferred"
	}
	return s
}

// inferredRule turns an inference into a rule, nil when it has no usable
// parameters.
func inferredRule(inf *infer.Inference) *rule {
	r := rule{inferred: true}
	if inf.Key != infer.KeyUnknown {
		r.Key = inf.Key
	}
	if inf.RejectStatus != nil {
		r.Status = *inf.RejectStatus
	}
	p := inf.Params
	switch inf.Algorithm {
	case infer.FixedWindow, infer.SlidingLog, infer.SlidingWindowCounter:
		if p.Limit == nil || p.WindowS == nil {
			return nil
		}
		r.Limit = int64(math.Round(p.Limit.Value))
		r.Window = time.Duration(p.WindowS.Value * float64(time.Second))
		r.WindowType = verify.Sliding
		if inf.Algorithm == infer.FixedWindow {
			r.WindowType = verify.Fixed
			r.Align = infer.AlignFirstRequest
			if inf.Alignment != nil && *inf.Alignment == infer.AlignEpoch {
				r.Align = infer.AlignEpoch
			}
		}
	case infer.TokenBucket, infer.LeakyBucketQueue:
		if p.Capacity == nil || p.RatePerS == nil {
			return nil
		}
		r.Capacity = int64(math.Round(p.Capacity.Value))
		r.Rate = p.RatePerS.Value
	default:
		return nil
	}
	if !r.isWindow() && !r.isBucket() {
		return nil
	}
	return &r
}
