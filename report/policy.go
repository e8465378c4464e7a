package report

import (
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

// clockAligned reports whether the rule's fixed windows start at instants
// of the clock (epoch or a timer's phase) rather than at a key's request.
func (r *rule) clockAligned() bool {
	return string(r.Align) == infer.AlignEpoch || string(r.Align) == infer.AlignTimer
}

// edgeOrigin returns the time, in ns relative to start (Unix ns), of a
// window edge of a clock-aligned rule: edges fall at Phase + k·Window since
// the Unix epoch (Phase 0 for epoch alignment).
func (r *rule) edgeOrigin(start int64) int64 {
	w := int64(r.Window)
	var ph int64
	if string(r.Align) == infer.AlignTimer {
		ph = int64(r.Phase)
	}
	return -((((start - ph) % w) + w) % w)
}

// align says where fixed windows start: epoch, first-request or timer.
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

// inferredRule is the rule an inference describes (infer's
// Inference.Rule, the one conversion), nil when it describes none.
func inferredRule(inf *infer.Inference) *rule {
	e, _, err := inf.Rule()
	if err != nil {
		return nil
	}
	r := rule{Endpoint: e, inferred: true}
	if !r.isWindow() && !r.isBucket() {
		return nil
	}
	return &r
}
