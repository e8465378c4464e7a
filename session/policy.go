package session

import (
	"errors"
	"os"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/verify"
)

// PolicySpec is a declared policy as a user gives it: the policy flags of
// contract.md, one field each (a quota, its modifiers, the draft syntax or
// a policy file). Resolve turns it into a verify.Policy; Apply refines an
// advertised one with the modifiers.
type PolicySpec struct {
	Limit      int64
	Window     time.Duration
	WindowType string
	Align      string
	Rate       float64
	Capacity   int64
	Burst      int64
	Key        string
	Status     int
	Headers    string // dialects, comma-separated
	RetryAfter string
	Penalty    string // block:D, extend or restart (limiter.ParsePenalty)
	Draft      string // --policy: the RateLimit-Policy syntax
	File       string // --policy-file
	// Changed reports whether the user gave the field of a flag name
	// ("limit", "window-type"…); nil means none was given.
	Changed func(name string) bool
	// ReadFile reads File; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// PolicyFlags are the names of the policy flags of contract.md, one per
// field of a PolicySpec, in the order the CLI lists them.
var PolicyFlags = []string{"limit", "window", "window-type", "align", "rate", "capacity", "burst", "key", "status", "headers", "retry-after", "penalty", "policy", "policy-file"}

// quotaFlags declare a quota; modifierFlags refine it (or an advertised
// policy).
var (
	quotaFlags    = []string{"limit", "window", "rate", "capacity", "burst"}
	modifierFlags = []string{"window-type", "align", "key", "status", "headers", "retry-after", "penalty"}
)

func (p *PolicySpec) set(name string) bool { return p.Changed != nil && p.Changed(name) }

// Given returns the policy flags the user gave (see Changed), each as
// "--name", in PolicyFlags order; nil when none was given.
func (p *PolicySpec) Given() []string {
	var given []string
	for _, n := range PolicyFlags {
		if p.set(n) {
			given = append(given, "--"+n)
		}
	}
	return given
}

// CheckOptions returns the options of a check of the policy p declares:
// failOn is the least failing severity as the user spells it (info,
// warning or error, in any case), only and skip name checks
// (verify.Checks); Advertised applies p's modifiers to an advertised
// policy (Apply), and Status is p's declared reject status when it was
// given. Every problem is reported at once, as a Usage error naming its
// flag (--fail-on, --only, --skip); the options are returned even then.
func (p *PolicySpec) CheckOptions(failOn string, only, skip []string) (CheckOptions, error) {
	var probs []problem.Problem
	sev, err := ParseFailOn(failOn)
	probs = append(probs, problem.From(err)...)
	probs = append(probs, problem.Under("--only", verify.ValidateChecks(only))...)
	probs = append(probs, problem.Under("--skip", verify.ValidateChecks(skip))...)
	opts := CheckOptions{Only: only, Skip: skip, FailOn: sev, Advertised: p.Apply}
	if p.set("status") {
		opts.Status = p.Status
	}
	return opts, problems(probs)
}

// ParseFailOn parses a --fail-on severity (info, warning or error); a bad
// one (or none) is a Usage error naming the flag.
func ParseFailOn(s string) (verify.Severity, error) {
	sev, err := verify.ParseSeverity(s)
	if err != nil {
		return "", problems([]problem.Problem{{Field: "--fail-on", Message: "must be info, warning or error"}})
	}
	return sev, nil
}

// Problems is a Usage error listing every problem at once (a
// *problem.Error without What): the one problem as it is, or "N
// problems:" and one indented line each; nil for none.
func Problems(probs []problem.Problem) error { return problems(probs) }

// Resolve returns the declared policy, normalized and valid, or nil when
// the flags declare no quota (the caller then uses the advertised one and
// applies modifiers to it). Every problem is reported at once as a usage
// error.
func (p *PolicySpec) Resolve() (*verify.Policy, error) {
	var probs []problem.Problem
	var given []string
	for _, n := range append(append([]string{}, quotaFlags...), modifierFlags...) {
		if p.set(n) {
			given = append(given, "--"+n)
		}
	}
	if p.File != "" {
		if p.Draft != "" {
			probs = append(probs, msgf("--policy-file and --policy are exclusive"))
		}
		if len(given) > 0 {
			probs = append(probs, msgf("--policy-file declares the whole policy: drop %s (or write them in the file)", strings.Join(given, ", ")))
		}
		if len(probs) > 0 {
			return nil, problems(probs)
		}
		readFile := p.ReadFile
		if readFile == nil {
			readFile = os.ReadFile
		}
		data, err := readFile(p.File)
		if err != nil {
			return nil, Errorf(Usage, "--policy-file: %v", err)
		}
		pol, err := verify.ParsePolicyFile(data, p.File)
		if err != nil {
			return nil, WithClass(Usage, err)
		}
		return &pol, nil
	}
	if p.set("capacity") && p.set("burst") {
		probs = append(probs, msgf("give --capacity or --burst, not both (capacity = burst + 1)"))
	}
	var rules []verify.Endpoint
	switch {
	case p.Draft != "":
		for _, n := range quotaFlags {
			if p.set(n) {
				probs = append(probs, msgf("--policy declares the quota: drop --%s", n))
			}
		}
		es, err := verify.ParseDraftPolicy(p.Draft)
		probs = append(probs, problem.From(err)...)
		rules = es
	case p.declaresQuota():
		e := verify.Endpoint{Limit: p.Limit, Window: p.Window, Rate: p.Rate, Capacity: p.Capacity}
		if p.set("burst") && !p.set("capacity") {
			b := p.Burst
			e.Burst = &b
		}
		rules = []verify.Endpoint{e}
	default:
		if len(probs) > 0 {
			return nil, problems(probs)
		}
		// Modifiers alone are checked when they are applied.
		return nil, p.checkModifiers()
	}
	for i := range rules {
		p.applyModifiers(&rules[i])
	}
	if len(probs) > 0 {
		return nil, problems(probs)
	}
	pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: rules}
	if err := pol.Validate(); err != nil {
		return nil, policyUsage(err)
	}
	pol = pol.Normalize()
	return &pol, nil
}

func (p *PolicySpec) declaresQuota() bool {
	for _, n := range quotaFlags {
		if p.set(n) {
			return true
		}
	}
	return false
}

// applyModifiers sets the modifier flags given on e.
func (p *PolicySpec) applyModifiers(e *verify.Endpoint) {
	if p.set("window-type") {
		e.WindowType = verify.WindowType(p.WindowType)
	}
	if p.set("align") {
		setString(&e.Align, p.Align)
	}
	if p.set("key") {
		e.Key = p.Key
	}
	if p.set("status") {
		e.Status = p.Status
	}
	if p.set("headers") {
		e.Headers = verify.SplitList(p.Headers)
	}
	if p.set("retry-after") {
		e.RetryAfter = p.RetryAfter
	}
	if p.set("penalty") {
		// limiter.ParsePenalty, through the field's UnmarshalText; a
		// spelling it refuses is kept as the kind, which Validate names.
		if err := e.Penalty.UnmarshalText([]byte(p.Penalty)); err != nil {
			e.Penalty.Duration = 0
			setString(&e.Penalty.Kind, p.Penalty)
		}
	}
}

// setString sets a string-typed field (limiter.Align, limiter.PenaltyKind)
// from its spelling.
func setString[T ~string](dst *T, s string) { *dst = T(s) }

// checkModifiers validates the modifier flags on a stand-in quota.
func (p *PolicySpec) checkModifiers() error {
	e := verify.Endpoint{Limit: 1, Window: time.Second}
	p.applyModifiers(&e)
	pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{e}}
	if err := pol.Validate(); err != nil {
		return policyUsage(err)
	}
	return nil
}

// Apply applies the modifiers to every rule of an advertised policy and
// validates it.
func (p *PolicySpec) Apply(rules []verify.Endpoint) (*verify.Policy, error) {
	for i := range rules {
		p.applyModifiers(&rules[i])
	}
	pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: rules}
	if err := pol.Validate(); err != nil {
		return nil, policyUsage(err)
	}
	pol = pol.Normalize()
	return &pol, nil
}

// policyUsage turns verify's *problem.Error of a policy from flags into a
// usage error naming the flags.
func policyUsage(err error) error {
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Source != "" {
		return WithClass(Usage, err)
	}
	probs := make([]problem.Problem, len(pe.Problems))
	for i, pr := range pe.Problems {
		field := strings.ReplaceAll(pr.Field, "_", "-")
		if !strings.HasPrefix(field, "endpoints[") && !strings.HasPrefix(field, "policy[") {
			field = "--" + field
		}
		probs[i] = problem.Problem{Field: field, Message: pr.Message}
	}
	return problems(probs)
}
