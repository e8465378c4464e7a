package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// policyOptions are the policy flags of check and analyze (contract.md
// "Policy flags").
type policyOptions struct {
	limit      int64
	window     time.Duration
	windowType string
	align      string
	rate       float64
	capacity   int64
	burst      int64
	key        string
	status     int
	headers    string
	retryAfter string
	policy     string
	policyFile string

	changed func(name string) bool
}

// quotaFlags declare a quota; modifierFlags refine it (or an advertised
// policy).
var (
	quotaFlags    = []string{"limit", "window", "rate", "capacity", "burst"}
	modifierFlags = []string{"window-type", "align", "key", "status", "headers", "retry-after"}
)

func addPolicyFlags(cmd *cobra.Command, o *policyOptions) {
	fl := cmd.Flags()
	fl.Int64Var(&o.limit, "limit", 0, "declared policy: at most `N` accepted requests per --window")
	fl.Var((*units.Duration)(&o.window), "window", "declared policy: the window length (Go syntax: 60s, 1m)")
	fl.StringVar(&o.windowType, "window-type", "", "sliding (N in any interval of length W; the default) or fixed (N per window)")
	fl.StringVar(&o.align, "align", "", "where fixed windows start: epoch or first-request (the default)")
	fl.Var((*units.Rate)(&o.rate), "rate", "declared policy: a bucket refilled at this rate (N/s, N/m, N/h, Nr/s, Nr/m)")
	fl.Int64Var(&o.capacity, "capacity", 0, "declared policy: the bucket's capacity (requests accepted at once from idle)")
	fl.Int64Var(&o.burst, "burst", 0, "declared policy: nginx's burst, capacity − 1 (give --capacity or --burst)")
	fl.StringVar(&o.key, "key", "", "who shares a quota: global (the default), ip or header:NAME")
	fl.IntVar(&o.status, "status", 0, "the declared reject status (default: 429 or 503)")
	fl.StringVar(&o.headers, "headers", "", "expected rate-limit header `DIALECTS`, comma-separated: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8")
	fl.StringVar(&o.retryAfter, "retry-after", "", "required: a rejection without Retry-After is an error; optional (the default): a warning")
	fl.StringVar(&o.policy, "policy", "", "declared policy in the RateLimit-Policy syntax, e.g. '\"api\";q=100;w=60'")
	fl.StringVar(&o.policyFile, "policy-file", "", "declared policy `FILE` (YAML or JSON: version: 1, endpoints: [...])")
	o.changed = fl.Changed
}

func (o *policyOptions) set(name string) bool { return o.changed != nil && o.changed(name) }

// resolve returns the declared policy, normalized and valid, or nil when
// the flags declare no quota (the caller then uses the advertised one and
// applies modifiers to it). Every problem is reported at once as a usage
// error.
func (o *policyOptions) resolve(readFile func(string) ([]byte, error)) (*verify.Policy, error) {
	var probs []string
	var given []string
	for _, n := range append(append([]string{}, quotaFlags...), modifierFlags...) {
		if o.set(n) {
			given = append(given, "--"+n)
		}
	}
	if o.policyFile != "" {
		if o.policy != "" {
			probs = append(probs, "--policy-file and --policy are exclusive")
		}
		if len(given) > 0 {
			probs = append(probs, fmt.Sprintf("--policy-file declares the whole policy: drop %s (or write them in the file)", strings.Join(given, ", ")))
		}
		if len(probs) > 0 {
			return nil, usageProblems(probs)
		}
		if readFile == nil {
			readFile = os.ReadFile
		}
		data, err := readFile(o.policyFile)
		if err != nil {
			return nil, Usagef("--policy-file: %v", err)
		}
		p, err := verify.ParsePolicyFile(data, o.policyFile)
		if err != nil {
			return nil, UsageErr(err)
		}
		return &p, nil
	}
	if o.set("capacity") && o.set("burst") {
		probs = append(probs, "give --capacity or --burst, not both (capacity = burst + 1)")
	}
	var rules []verify.Endpoint
	switch {
	case o.policy != "":
		for _, n := range quotaFlags {
			if o.set(n) {
				probs = append(probs, fmt.Sprintf("--policy declares the quota: drop --%s", n))
			}
		}
		es, err := verify.ParseDraftPolicy(o.policy)
		if err != nil {
			probs = append(probs, strings.TrimPrefix(err.Error(), "verify: "))
		}
		rules = es
	case o.declaresQuota():
		e := verify.Endpoint{Limit: o.limit, Window: o.window, Rate: o.rate, Capacity: o.capacity}
		if o.set("burst") && !o.set("capacity") {
			b := o.burst
			e.Burst = &b
		}
		rules = []verify.Endpoint{e}
	default:
		if len(probs) > 0 {
			return nil, usageProblems(probs)
		}
		// Modifiers alone are checked when they are applied.
		return nil, o.checkModifiers()
	}
	for i := range rules {
		o.applyModifiers(&rules[i])
	}
	if len(probs) > 0 {
		return nil, usageProblems(probs)
	}
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: rules}
	if err := p.Validate(); err != nil {
		return nil, policyUsage(err)
	}
	p = p.Normalize()
	return &p, nil
}

func (o *policyOptions) declaresQuota() bool {
	for _, n := range quotaFlags {
		if o.set(n) {
			return true
		}
	}
	return false
}

// applyModifiers sets the modifier flags given on e.
func (o *policyOptions) applyModifiers(e *verify.Endpoint) {
	if o.set("window-type") {
		e.WindowType = verify.WindowType(o.windowType)
	}
	if o.set("align") {
		e.Align = limiter.Align(o.align)
	}
	if o.set("key") {
		e.Key = o.key
	}
	if o.set("status") {
		e.Status = o.status
	}
	if o.set("headers") {
		e.Headers = verify.SplitList(o.headers)
	}
	if o.set("retry-after") {
		e.RetryAfter = o.retryAfter
	}
}

// checkModifiers validates the modifier flags on a stand-in quota.
func (o *policyOptions) checkModifiers() error {
	e := verify.Endpoint{Limit: 1, Window: time.Second}
	o.applyModifiers(&e)
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{e}}
	if err := p.Validate(); err != nil {
		return policyUsage(err)
	}
	return nil
}

// withModifiers applies the modifier flags to every rule of an advertised
// policy and validates it.
func (o *policyOptions) withModifiers(rules []verify.Endpoint) (*verify.Policy, error) {
	for i := range rules {
		o.applyModifiers(&rules[i])
	}
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: rules}
	if err := p.Validate(); err != nil {
		return nil, policyUsage(err)
	}
	p = p.Normalize()
	return &p, nil
}

// policyUsage turns a *verify.PolicyError on flags into a usage error
// naming the flags.
func policyUsage(err error) error {
	var pe *verify.PolicyError
	if !errors.As(err, &pe) || pe.Source != "" {
		return UsageErr(err)
	}
	probs := make([]string, len(pe.Problems))
	for i, p := range pe.Problems {
		field := strings.ReplaceAll(p.Field, "_", "-")
		if !strings.HasPrefix(field, "endpoints[") && !strings.HasPrefix(field, "policy[") {
			field = "--" + field
		}
		probs[i] = field + ": " + p.Message
	}
	return usageProblems(probs)
}
