package report

import (
	"fmt"
	"strings"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/units"
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

// describeEndpoint says a rule in words for people: "GET /api: 10 in any
// 1s", "capacity 4, 2/s", with every number in the one display format.
func describeEndpoint(e *verify.Endpoint) string {
	var s string
	switch {
	case e.IsBucket():
		s = fmt.Sprintf("capacity %d, %s", e.Quota(), units.HumanRate(e.Rate))
	case e.Limit > 0 && e.WindowType == verify.Fixed:
		a := string(e.Align)
		if a == "" {
			a = infer.AlignFirstRequest
		}
		s = fmt.Sprintf("%d per %s window (%s)", e.Limit, units.HumanDuration(e.Window), a)
	case e.Limit > 0:
		s = fmt.Sprintf("%d in any %s", e.Limit, units.HumanDuration(e.Window))
	case e.Status != 0:
		s = fmt.Sprintf("rejects with %d", e.Status)
	default:
		s = "no limit"
	}
	if e.PerClient() {
		s += " per " + e.Key
	}
	if e.Method != "" || e.Path != "" {
		s = strings.TrimSpace(e.Method+" "+e.Path) + ": " + s
	}
	return s
}

// describePolicy says a policy in words, its rules joined by "; "; "no
// policy" when it has none.
func describePolicy(p *verify.Policy) string {
	if len(p.Endpoints) == 0 {
		return "no policy"
	}
	parts := make([]string, len(p.Endpoints))
	for i := range p.Endpoints {
		parts[i] = describeEndpoint(&p.Endpoints[i])
	}
	return strings.Join(parts, "; ")
}

// describe says the drawn rule in words.
func (r *rule) describe() string {
	s := describeEndpoint(&r.Endpoint)
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
