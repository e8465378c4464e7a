package session

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// CheckOptions choose what Check runs and how it judges. The zero value
// runs every check and fails on errors.
type CheckOptions struct {
	// Only and Skip choose checks by name (verify.Checks).
	Only, Skip []string
	// FailOn is the least severity of a certain finding that fails the
	// verdict; "" means verify.SeverityError.
	FailOn verify.Severity
	// Status is the declared reject status when no policy is given (the
	// preflight then reads the advertised one); 0 means 429 or 503.
	Status int
	// Advertised, when set, turns the rules the target advertises into the
	// policy to check (a front end applies its modifier flags, as
	// PolicySpec.Apply does); nil takes them as they are.
	Advertised func(rules []verify.Endpoint) (*verify.Policy, error)
	// Judge, when set, adjusts the report before it is appended to the
	// record file and its exit class is decided: check --from-config turns
	// findings into findings about the config there (and calls
	// verify.Report.Rejudge). inferred holds one entry per rule of the
	// policy when Infer is set, nil otherwise.
	Judge func(rep *verify.Report, inferred []Inferred)
	// Infer, when set, has Check infer the algorithm behind each rule's
	// URLs once the suites are done, within what is left of the caps (see
	// Inferred), and hand the inferences to Judge.
	Infer bool
}

// spoofValues are the addresses the key-spoof check claims (TEST-NET-3).
var spoofValues = func() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}).String()
	}
	return out
}()

// CheckPolicy refuses (Usage) a policy this session cannot check: rules
// with paths when the targets are not base URLs, or an explicit number of
// clients no rule can honour. Check calls it; a dry run may too.
func (s *Session) CheckPolicy(p *verify.Policy) error {
	for _, e := range p.Endpoints {
		if e.Path == "" {
			continue
		}
		for _, u := range s.cfg.Probe.URLs {
			if pu, err := url.Parse(u); err == nil && pu.RawQuery != "" {
				return Errorf(Usage, "the policy names endpoint paths: give base URLs without a query (%s)", u)
			}
		}
	}
	return s.checkClients(p)
}

// Check runs the check suite of every rule of policy against the targets
// and judges what they did: the verdict document of contract.md, also
// appended to the record file. A nil policy is read from what the target
// advertises in its answer to the preflight (no advertised policy:
// Usage, "declare a policy").
//
// Check sends one preflight request first (an answer neither accepted nor
// rejected: Aborted), then each rule's suite on its own probe engine,
// within the caps (zero caps: SuiteMaxRequests, SuiteMaxDuration). The
// report is nil when no verdict was reached. The error carries the exit
// class of the whole check: Usage before anything is sent; Findings for a
// failing verdict (wrapping any other error); Aborted for a suite that did
// not finish (interrupted, aborted, budget spent: the report says
// "complete": false).
func (s *Session) Check(ctx context.Context, policy *verify.Policy, opts CheckOptions) (*verify.Report, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	if opts.FailOn == "" {
		opts.FailOn = verify.SeverityError
	}
	c := &s.cfg.Caps
	if c.MaxRequests <= 0 {
		c.MaxRequests, c.MaxRequestsDefault = SuiteMaxRequests, true
	}
	if c.MaxDuration <= 0 {
		c.MaxDuration = SuiteMaxDuration
	}
	plan := ""
	declared := opts.Status
	preOpt := s.cfg.Probe
	if policy != nil {
		if err := s.CheckPolicy(policy); err != nil {
			return nil, err
		}
		plan = planLine(policy, opts.Only, opts.Skip)
		if len(policy.Endpoints) > 0 {
			// The preflight asks the first rule's endpoint: with a policy
			// file the targets are base URLs, and the base itself may
			// well be a 404.
			first := policy.Endpoints[0]
			declared = first.Status
			preOpt.URLs = ruleURLs(preOpt.URLs, first)
			if first.Method != "" {
				preOpt.Method = first.Method
			}
		}
	}
	if err := s.confirm(plan, false); err != nil {
		return nil, err
	}
	zero := s.cfg.zero()
	base, err := s.newEngine(preOpt, zero, 0)
	if err != nil {
		return nil, err
	}
	defer base.close()
	if err := s.open(ctx, zero, nil, policy); err != nil {
		return nil, err
	}
	return s.check(ctx, base, policy, opts, declared)
}

// check runs the preflight and the suites once the record is open.
func (s *Session) check(ctx context.Context, base *engine, pol *verify.Policy, opts CheckOptions, declared int) (*verify.Report, error) {
	if err := s.waitStart(ctx); err != nil {
		return nil, errors.Join(err, s.close(record.ReasonInterrupted))
	}
	// The budget counts from the start: the wait for StartAt is not in it.
	start := time.Now()
	pre, err := base.checkedPreflight(ctx, declared)
	if err != nil {
		return nil, errors.Join(err, s.close(record.ReasonAborted))
	}
	if pol == nil {
		if pol, err = s.advertised(pre, opts); err != nil {
			return nil, errors.Join(err, s.close(record.ReasonCompleted))
		}
	}
	maxDur := s.cfg.Caps.MaxDuration
	planned := verify.PlanDuration(*pol, opts.Only, opts.Skip)
	s.line("plan: %s", planLine(pol, opts.Only, opts.Skip))
	if rested, err := s.restAfterRefusal(ctx, pre, declared, pol); err != nil {
		return nil, errors.Join(err, s.close(record.ReasonInterrupted))
	} else if rested {
		start = time.Now() // the rest, like the wait for StartAt, is not in the budget
	}
	for _, e := range pol.Endpoints {
		if t := BucketTimeout(e, s.cfg.Probe.Timeout); s.cfg.TimeoutDefault && t != s.cfg.Probe.Timeout {
			s.line("a queueing bucket may hold a request up to %s: --timeout %s for %s (give --timeout to keep it)",
				units.HumanDuration(e.Period()), units.HumanDuration(t), e.String())
		}
	}
	if done, _ := s.rec.counts(); s.cfg.Caps.MaxRequestsDefault {
		if cap := SuiteCap(pol, opts.Only, opts.Skip, int(done)); cap > s.cfg.Caps.MaxRequests {
			s.line("the plan sends up to %d requests: the default --max-requests %d raised to it (give --max-requests to cap it)", cap, s.cfg.Caps.MaxRequests)
			s.cfg.Caps.MaxRequests = cap
		}
	}
	if planned > maxDur {
		s.line("warning: the plan needs %s, over --max-duration %s: the suite will stop early (complete: false)", units.HumanDuration(planned), units.HumanDuration(maxDur))
	}
	budget, cancel := context.WithDeadline(ctx, start.Add(maxDur))
	defer cancel()
	progress := planned
	if opts.Infer {
		for _, e := range pol.Endpoints {
			progress += InferNeeds(e)
		}
	}
	s.started(start, min(progress, maxDur), patterns.Schedule{})
	var runErr error
	for i := range pol.Endpoints {
		done, _ := s.rec.counts()
		if runErr = s.runRule(budget, pol.Endpoints[i], opts, base.zero, i+1, s.cfg.Caps.MaxRequests-int(done), pre, declared); runErr != nil {
			break
		}
	}
	var inferred []Inferred
	var docs []any
	if opts.Infer {
		inferred = make([]Inferred, len(pol.Endpoints))
		if runErr == nil {
			runErr = s.inferRules(budget, pol, base.zero, inferred)
		}
		for i := range inferred {
			if inf := inferred[i].Inference; inf != nil {
				docs = append(docs, inf)
			} else if inferred[i].Skipped == "" {
				inferred[i].Skipped = "the suites did not finish"
			}
		}
	}
	reason, err := s.suiteError(ctx, runErr)
	if s.counts.tooManyOther.Load() {
		reason, err = record.ReasonAborted, s.otherError(true)
	}
	if cerr := s.close(reason, docs...); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(runErr, probe.ErrUsage) {
		return nil, err
	}
	run := s.Record()
	rep := verify.Analyze(record.Merge(run), *pol, verify.Options{
		Schema: verify.SchemaCheck, Tool: s.cfg.Tool, FailOn: opts.FailOn,
		Targets: run.Header.Targets, RecordFile: s.rec.path, Incomplete: reason != record.ReasonCompleted, Time: time.Now(),
	})
	if opts.Judge != nil {
		opts.Judge(&rep, inferred)
	}
	s.appendDoc(rep)
	return &rep, VerdictError(&rep, err)
}

// advertised returns the policy the target advertised in its answer to
// the preflight (Usage when it advertises none).
func (s *Session) advertised(pre record.Result, opts CheckOptions) (*verify.Policy, error) {
	received := s.rec.hdr.Start.Add(time.Duration(pre.TTFB))
	adv := verify.Advertised(pre.Headers, received)
	if len(adv) == 0 {
		return nil, NoPolicyError(s.Targets()[0])
	}
	apply := opts.Advertised
	if apply == nil {
		apply = (&PolicySpec{}).Apply
	}
	pol, err := apply(adv)
	if err != nil {
		return nil, err
	}
	if err := s.checkClients(pol); err != nil {
		return nil, err
	}
	s.line("policy: advertised by the target: %s", pol.String())
	return pol, nil
}

// NoPolicyError is the Usage error of a check or analysis with nothing
// to judge against: no policy declared, and none advertised by what.
func NoPolicyError(what string) error {
	return Errorf(Usage, "declare a policy: %s advertises none (no RateLimit-Policy, no X-RateLimit-Limit with a window); give --limit N --window D, --rate R --capacity C, --policy or --policy-file", what)
}

// VerdictError returns the error of a verdict reached despite err: err
// when it is a Usage or Internal error; a Findings error for a failing
// verdict (wrapping err); else err, or an Aborted error without a
// message for an incomplete verdict. Precedence: 2, 4, 1, 3, 0.
func VerdictError(rep *verify.Report, err error) error {
	if c := ClassOf(err); err != nil && (c == Usage || c == Internal) {
		return err
	}
	if rep.Failed() {
		return &Error{Class: Findings, Err: err}
	}
	if err == nil && !rep.Complete {
		return &Error{Class: Aborted}
	}
	return err
}

// VerdictOutputError returns the error of a verdict rep once writing its
// outputs (report files, the printed verdict) failed with werr: err, the
// verdict's error (from VerdictError or Check), when it says something of
// its own; else VerdictError(rep, werr), so that the write failure is
// reported with the class the verdict and the failure decide. A nil werr
// leaves err as it is.
func VerdictOutputError(rep *verify.Report, err, werr error) error {
	if werr == nil {
		return err
	}
	var se *Error
	if err == nil || (errors.As(err, &se) && se.Err == nil) {
		return VerdictError(rep, werr)
	}
	return err
}

// ruleURLs returns the targets of rule e: each base URL joined with its
// path, or the URLs as given when it names none.
func ruleURLs(urls []string, e verify.Endpoint) []string {
	if e.Path == "" {
		return urls
	}
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimSuffix(u, "/") + e.Path
	}
	return out
}

// ruleOptions returns the probe options of rule (its URLs, method and the
// header carrying a header key) and how many client identities they can
// present: 0 for as many as wanted (synthetic k1…kN values), 1 for one.
func (s *Session) ruleOptions(rule verify.Endpoint) (probe.Options, int) {
	opt := s.cfg.Probe
	if s.cfg.TimeoutDefault {
		opt.Timeout = BucketTimeout(rule, opt.Timeout)
	}
	opt.URLs = ruleURLs(opt.URLs, rule)
	if rule.Method != "" {
		opt.Method = rule.Method
	}
	identities := 1
	switch {
	case rule.Key == verify.KeyIP && len(opt.SourceIPs) > 1:
		identities = len(opt.SourceIPs)
	case strings.HasPrefix(rule.Key, "header:"):
		name := strings.TrimPrefix(rule.Key, "header:")
		switch {
		case strings.EqualFold(opt.ClientHeader, name):
			identities = len(opt.ClientValues) // 0: synthetic k1…kN, as many as wanted
		case opt.ClientHeader == "" && opt.Header.Get(name) == "":
			opt.ClientHeader, opt.ClientValues, identities = name, nil, 0
		}
	}
	return opt, identities
}

// checkClients refuses an explicit number of clients that no rule of p
// can honour: check uses client identities only where the key is per
// client (ip with source addresses, or header:NAME), to give probes that
// need fresh quota a fresh identity instead of waiting. Clients N caps the
// identities of every per-client rule at N (1 makes the suite wait for
// quota to return, as for a global key); it is a Usage error when a rule
// can present fewer than N, or when N > 1 and every rule is global.
func (s *Session) checkClients(p *verify.Policy) error {
	if !s.cfg.ClientsSet {
		return nil
	}
	n, perClient := s.cfg.clients(), false
	for _, rule := range p.Endpoints {
		if !rule.PerClient() {
			continue
		}
		perClient = true
		if _, avail := s.ruleOptions(rule); avail != 0 && avail < n {
			how := "give as many --source-ips"
			if strings.HasPrefix(rule.Key, "header:") {
				how = "give as many --client-values, or drop the fixed -H value of the key header"
			}
			noun := "client identities"
			if avail == 1 {
				noun = "client identity"
			}
			return Errorf(Usage, "--clients %d: rule %s (key %s) can present only %d %s: %s", n, rule.String(), rule.Key, avail, noun, how)
		}
	}
	if !perClient && n > 1 {
		return Errorf(Usage, "--clients %d: the policy's key is global (one quota for every client), so check has no use for client identities: declare --key ip or --key header:NAME if the limit is per client", n)
	}
	return nil
}

// runRule runs the suite of one rule on its own probe engine (its URLs,
// method and client identities), and the key-spoof engines it asks for.
func (s *Session) runRule(ctx context.Context, rule verify.Endpoint, opts CheckOptions, zero time.Time, id, budget int, pre record.Result, declared int) error {
	if budget <= 0 {
		return fmt.Errorf("%w: --max-requests %d reached", verify.ErrBudget, s.cfg.Caps.MaxRequests)
	}
	opt, identities := s.ruleOptions(rule)
	if s.cfg.ClientsSet && rule.PerClient() {
		identities = s.cfg.clients() // checkClients made sure the engine has as many
	}
	var mu sync.Mutex
	var engines []*engine
	defer func() {
		for _, e := range engines {
			e.close()
		}
	}()
	newEngine := func(po probe.Options) (*engine, error) {
		e, err := s.newEngine(po, zero, 0)
		if err != nil {
			return nil, err
		}
		e.guard, e.declared = true, declared
		mu.Lock()
		engines = append(engines, e)
		mu.Unlock()
		return e, nil
	}
	eng, err := newEngine(opt)
	if err != nil {
		return err
	}
	spoofing := rule.Key == verify.KeyIP && opt.ClientHeader == ""
	suite := verify.Suite{
		Rule:    rule,
		Engine:  eng,
		Options: verify.SuiteOptions{Only: opts.Only, Skip: opts.Skip, Identities: identities, Spoofing: spoofing, MaxRate: opt.MaxRate},
		Zero:    zero, MaxRequests: budget, Prior: []record.Result{pre},
	}
	if spoofing {
		suite.Spoof = func(header string) (verify.Engine, error) {
			po := opt
			po.ClientHeader, po.ClientValues = header, spoofValues
			if len(po.SourceIPs) > 1 {
				po.SourceIPs = po.SourceIPs[:1]
			}
			return newEngine(po)
		}
	}
	prefix := "check: "
	if rule.Path != "" || rule.Method != "" {
		method := rule.Method + " "
		if strings.TrimSpace(method) == "" {
			method = ""
		}
		prefix = fmt.Sprintf("check %s%s: ", method, rule.Path)
	}
	suite.Progress = func(line string) { s.line("%s", prefix+line) }
	_, err = suite.Run(ctx)
	return err
}

// BucketTimeout is the request timeout check uses by default for rule:
// for a bucket, timeout plus the rule's period (capacity/rate), since a
// leaky bucket that queues (nginx without nodelay) may hold a request
// that long before answering; else timeout.
func BucketTimeout(rule verify.Endpoint, timeout time.Duration) time.Duration {
	if !rule.IsBucket() {
		return timeout
	}
	return timeout + rule.Period()
}

// SuiteCap is the request cap check uses by default for policy p: the
// requests its suites plan (verify.Plan.Requests) after done already sent,
// at least SuiteMaxRequests, at most SuiteMaxRequestsCeiling.
func SuiteCap(p *verify.Policy, only, skip []string, done int) int {
	need := done
	for _, e := range p.Endpoints {
		need += verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true}).Requests()
	}
	return min(max(need, SuiteMaxRequests), SuiteMaxRequestsCeiling)
}

// planLine describes the suite's plan: its checks and planned duration.
func planLine(p *verify.Policy, only, skip []string) string {
	var checks []string
	for _, e := range p.Endpoints {
		for _, st := range verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true}).Steps {
			if !slices.Contains(checks, st.Check) {
				checks = append(checks, st.Check)
			}
		}
	}
	return fmt.Sprintf("%s for %s, at most %v", strings.Join(checks, ", "), p.String(), units.HumanDuration(verify.PlanDuration(*p, only, skip)))
}
