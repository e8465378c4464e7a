package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newCheckCmd(f, g) })
}

// verdictOptions are the flags check and analyze share beyond the policy:
// --fail-on and the report files.
type verdictOptions struct {
	failOn string
	out    outputOptions
}

func addVerdictFlags(cmd *cobra.Command, o *verdictOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.failOn, "fail-on", string(verify.SeverityError), "exit 1 for a certain finding at or above this severity: info, warning or error")
	addOutputFlags(cmd, &o.out)
}

// checkOptions are the flags of `rlprobe check`.
type checkOptions struct {
	target  *targetOptions
	policy  policyOptions
	verdict verdictOptions
	only    []string
	skip    []string
	// now reads the clock; probeOptions adjusts every probe engine's
	// options (tests: an in-memory Dial and timer pacing).
	now          func() time.Time
	probeOptions func(*probe.Options)
}

// testProbeOptions, when set (by tests only), adjusts the probe options of
// every check: an in-memory Dial and timer pacing under synctest.
var testProbeOptions func(*probe.Options)

func newCheckCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &checkOptions{target: newTargetOptions("check"), now: time.Now, probeOptions: testProbeOptions}
	cmd := &cobra.Command{
		Use:   "check URL... [policy flags]",
		Short: "Run the check suite against a declared policy and give verdicts",
		Long: `Run the check suite against the target and judge what it did against a
declared policy: a window (--limit N --window D, sliding by default or
--window-type fixed with --align), a bucket (--rate R --capacity C or
--burst B), the draft syntax (--policy '"api";q=100;w=60') or a file
(--policy-file, one rule per endpoint, each tested at BASE_URL + path).
Without a declared quota, the target's own advertised RateLimit-Policy (or
X-RateLimit-Limit) is checked.

The checks: burst (quota + extra from idle), edge (quota on each side of a
window edge, found from reset headers or by watching quota return),
sustained (twice the allowed rate), recovery (when quota returns, against
reset and Retry-After), retry-after (retries at the advertised moment and
shortly before), race (a batch released together at fresh quota), key-spoof
(--key ip: varying X-Forwarded-For, X-Real-IP, True-Client-IP) and headers
(syntax and honesty of every rate-limit header seen). The planned duration
(at most 6 windows + 30 s per rule) is printed once the window is known;
--only, --skip, --max-duration and --max-requests bound it.

Every request is recorded to --out, and the verdicts are appended to it.
The summary starts with the one-line verdict. Exit codes: 0 pass, 1 a
certain finding at or above --fail-on, 2 usage, 3 unreachable, interrupted
or budget spent before the suite finished (complete: false).`,
		Example: `  rlprobe check https://staging.example/api --limit 100 --window 60s
  rlprobe check http://127.0.0.1:8080/ --rate 1r/s --burst 3 --status 429 --only burst,retry-after
  rlprobe check https://api.example --policy-file policy.yaml --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), f, g, args)
		},
	}
	addTargetFlags(cmd, o.target)
	addPolicyFlags(cmd, &o.policy)
	fl := cmd.Flags()
	fl.Lookup("start-at").Usage = startAtSuiteUsage
	fl.Lookup("clients").Usage = "client identities for a per-client key (ip with --source-ips, header:NAME): at most `N` fresh identities instead of waiting for quota to return (more than 1 is refused for a global key)"
	fl.StringSliceVar(&o.only, "only", nil, "run only these `CHECKS` (comma-separated): "+strings.Join(verify.Checks, ", "))
	fl.StringSliceVar(&o.skip, "skip", nil, "leave out these `CHECKS` (comma-separated)")
	addVerdictFlags(cmd, &o.verdict)
	return cmd
}

// spoofValues are the addresses the key-spoof check claims (TEST-NET-3).
var spoofValues = func() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}).String()
	}
	return out
}()

func (o *checkOptions) run(ctx context.Context, f *Factory, g *GlobalOptions, urls []string) error {
	now := o.now()
	var probs []string
	pol, err := o.policy.resolve(nil)
	if err != nil {
		return err
	}
	failOn, err := verify.ParseSeverity(o.verdict.failOn)
	if err != nil {
		probs = append(probs, "--fail-on: must be info, warning or error")
	}
	if err := verify.ValidateChecks(o.only); err != nil {
		probs = append(probs, "--only: "+strings.TrimPrefix(err.Error(), "verify: "))
	}
	if err := verify.ValidateChecks(o.skip); err != nil {
		probs = append(probs, "--skip: "+strings.TrimPrefix(err.Error(), "verify: "))
	}
	if len(probs) > 0 {
		return usageProblems(probs)
	}
	t, err := o.target.resolve(f, urls, now)
	if err != nil {
		return err
	}
	if o.probeOptions != nil {
		o.probeOptions(&t.probe)
	}
	if pol != nil {
		if err := checkRulePaths(pol, urls); err != nil {
			return err
		}
		if err := checkClients(t, pol); err != nil {
			return err
		}
	}
	if o.target.dryRun {
		return o.printDryRun(f, g, t, pol)
	}
	summary := fmt.Sprintf("targets: %s\ncaps: %d requests, %v", strings.Join(redactedTargets(t), ", "), t.o.maxRequests, t.o.maxDuration)
	if pol != nil {
		summary += fmt.Sprintf("\nplan: %s", planLine(pol, o.only, o.skip))
	}
	if f.IO.ErrTTY && !g.Quiet {
		fmt.Fprintln(f.IO.ErrOut, summary)
	}
	if err := t.confirm(f, summary); err != nil {
		return err
	}

	declared := 0
	if pol != nil && len(pol.Endpoints) > 0 {
		declared = pol.Endpoints[0].Status
	} else if o.policy.set("status") {
		declared = o.policy.status
	}
	// The preflight asks the first rule's endpoint: with a policy file
	// the targets are base URLs, and the base itself may well be a 404.
	preOpt := t.probe
	if pol != nil && len(pol.Endpoints) > 0 {
		preOpt.URLs = ruleURLs(t.urls, pol.Endpoints[0])
		if m := pol.Endpoints[0].Method; m != "" {
			preOpt.Method = m
		}
	}
	base, err := probe.New(preOpt)
	if err != nil {
		return UsageErr(err)
	}
	defer base.Close()
	zero := time.Now()
	rec, hdr, err := t.startRecord(ctx, f, zero, nil, pol)
	if err != nil {
		return err
	}
	sink := newRunSink(rec, declared)
	seqs := newSeqSink(sink)
	results := []record.Result{}
	if err := waitStart(ctx, f, g, t); err != nil {
		return errors.Join(err, rec.close(record.ReasonInterrupted, 0, 0))
	}
	// The budget counts from the start: the wait for --start-at is not in it.
	start := time.Now()
	pre, err := preflight(ctx, base, zero, declared, seqs.engine(0))
	if pre.Outcome != "" {
		pre.Seq = seqs.lookup(0, pre.Seq)
		results = append(results, pre)
	}
	finish := func(reason string) error {
		sent := int64(0)
		for _, r := range results {
			if r.Outcome != record.OutcomeNotSent {
				sent++
			}
		}
		return rec.close(reason, int64(len(results)), sent)
	}
	if err != nil {
		if cerr := finish(record.ReasonAborted); cerr != nil {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: %v\n", cerr)
		}
		return err
	}
	if pol == nil {
		received := zero.Add(time.Duration(pre.TTFB))
		adv := verify.Advertised(pre.Headers, received)
		if len(adv) == 0 {
			_ = finish(record.ReasonCompleted)
			return errNoPolicy(t.redactor.URL(urls[0]))
		}
		if pol, err = o.policy.withModifiers(adv); err != nil {
			_ = finish(record.ReasonCompleted)
			return err
		}
		if err := checkClients(t, pol); err != nil {
			_ = finish(record.ReasonCompleted)
			return err
		}
		if !g.Quiet {
			fmt.Fprintf(f.IO.ErrOut, "policy: advertised by the target: %s\n", describePolicy(pol))
		}
	}
	if !g.Quiet {
		fmt.Fprintf(f.IO.ErrOut, "plan: %s\n", planLine(pol, o.only, o.skip))
		if d := verify.PlanDuration(*pol, o.only, o.skip); d > t.o.maxDuration {
			fmt.Fprintf(f.IO.ErrOut, "warning: the plan needs %v, over --max-duration %v: the suite will stop early (complete: false)\n", d, t.o.maxDuration)
		}
	}

	// The suite, rule by rule, within the duration budget.
	budget, cancel := context.WithDeadline(ctx, start.Add(t.o.maxDuration))
	defer cancel()
	prog := newCheckProgress(f, g, min(verify.PlanDuration(*pol, o.only, o.skip), t.o.maxDuration))
	prog.start(start)
	var runErr error
	for i := range pol.Endpoints {
		rule := pol.Endpoints[i]
		res, err := o.runRule(budget, t, rule, zero, seqs, prog, i+1, t.o.maxRequests-len(results), pre)
		results = append(results, res...)
		if err != nil {
			runErr = err
			break
		}
	}
	prog.stop()
	if werr := seqs.flush(); werr != nil && runErr == nil {
		runErr = fmt.Errorf("write %s: %w", rec.path, werr)
	}
	reason, cmdErr := suiteError(ctx, runErr, rec)
	if sink.tooManyOther.Load() {
		reason = record.ReasonAborted
		cmdErr = Unreachablef("aborted: %s; the results so far are in %s\nhint: %s", sink.otherReport(), rec.path, sink.otherHint())
	}
	if cerr := finish(reason); cerr != nil && cmdErr == nil {
		cmdErr = cerr
	}
	if errors.Is(runErr, probe.ErrUsage) {
		return cmdErr
	}

	end := &rec.end // with the clock estimate, as analyze will see it
	run := &record.Run{Header: hdr, Results: results, End: end}
	rep := verify.Analyze(record.Merge(run), *pol, verify.Options{
		Schema: verify.SchemaCheck, Tool: "rlprobe " + f.Version, FailOn: failOn,
		Targets: hdr.Targets, RecordFile: rec.path, Incomplete: reason != record.ReasonCompleted,
	})
	if err := appendDocument(rec.path, rep); err != nil {
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %v\n", err)
	}
	if err := writeReports(f, o.verdict, record.Merge(run), []string{rec.path}, rep); err != nil && cmdErr == nil {
		cmdErr = err
	}
	if err := printVerdict(f, g, &rep, describePolicy(pol)); err != nil && cmdErr == nil {
		cmdErr = err
	}
	return verdictExit(&rep, cmdErr)
}

// checkRulePaths refuses rules with paths when the targets are not base
// URLs they can be appended to.
func checkRulePaths(p *verify.Policy, urls []string) error {
	for _, e := range p.Endpoints {
		if e.Path == "" {
			continue
		}
		for _, u := range urls {
			if pu, err := url.Parse(u); err == nil && pu.RawQuery != "" {
				return Usagef("the policy names endpoint paths: give base URLs without a query (%s)", u)
			}
		}
	}
	return nil
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

// ruleEngine returns the probe options of rule (its URLs, method and the
// header carrying a header key) and how many client identities they can
// present: 0 for as many as wanted (synthetic k1…kN values), 1 for one.
func ruleEngine(t *target, rule verify.Endpoint) (probe.Options, int) {
	opt := t.probe
	opt.URLs = ruleURLs(t.urls, rule)
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

// checkClients refuses an explicit --clients N that no rule of p can
// honour: check uses client identities only where the key is per client
// (ip with --source-ips, or header:NAME), to give probes that need fresh
// quota a fresh identity instead of waiting. --clients N caps the
// identities of every per-client rule at N (1 makes the suite wait for
// quota to return, as for a global key); it is a usage error when a rule
// can present fewer than N, or when N > 1 and every rule is global.
func checkClients(t *target, p *verify.Policy) error {
	if t.o.changed == nil || !t.o.changed("clients") {
		return nil
	}
	n, perClient := t.clients, false
	for _, rule := range p.Endpoints {
		if !rule.PerClient() {
			continue
		}
		perClient = true
		if _, avail := ruleEngine(t, rule); avail != 0 && avail < n {
			how := "give as many --source-ips"
			if strings.HasPrefix(rule.Key, "header:") {
				how = "give as many --client-values, or drop the fixed -H value of the key header"
			}
			return Usagef("--clients %d: rule %s (key %s) can present only %s: %s", n, rule.String(), rule.Key, plural(avail, "client identity"), how)
		}
	}
	if !perClient && n > 1 {
		return Usagef("--clients %d: the policy's key is global (one quota for every client), so check has no use for client identities: declare --key ip or --key header:NAME if the limit is per client", n)
	}
	return nil
}

// runRule runs the suite of one rule on its own probe engine (its URLs,
// method and client identities), recording through seqs and reporting
// through prog.
func (o *checkOptions) runRule(ctx context.Context, t *target, rule verify.Endpoint,
	zero time.Time, seqs *seqSink, prog *checkProgress, id, budget int, pre record.Result) ([]record.Result, error) {
	if budget <= 0 {
		return nil, fmt.Errorf("%w: --max-requests %d reached", verify.ErrBudget, t.o.maxRequests)
	}
	opt, identities := ruleEngine(t, rule)
	if t.o.changed != nil && t.o.changed("clients") && rule.PerClient() {
		identities = t.clients // checkClients made sure the engine has as many
	}
	newEngine := func(po probe.Options, engineID int) (verify.Engine, func(), error) {
		pe, err := probe.New(po)
		if err != nil {
			return nil, nil, UsageErr(err)
		}
		se, err := scenario.NewEngine(scenario.EngineConfig{Probe: pe, Sink: seqs.engine(engineID), Zero: zero, OnResult: prog.traffic.onResult})
		if err != nil {
			pe.Close()
			return nil, nil, err
		}
		return seqEngine{eng: se, seqs: seqs, id: engineID}, func() { pe.Close() }, nil
	}
	eng, closeEng, err := newEngine(opt, id*100)
	if err != nil {
		return nil, err
	}
	defer closeEng()
	var spoofMu sync.Mutex
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	spoofing := rule.Key == verify.KeyIP && opt.ClientHeader == ""
	s := verify.Suite{
		Rule:    rule,
		Engine:  eng,
		Options: verify.SuiteOptions{Only: o.only, Skip: o.skip, Identities: identities, Spoofing: spoofing, MaxRate: opt.MaxRate},
		Zero:    zero, MaxRequests: budget, Prior: []record.Result{pre},
	}
	if spoofing {
		n := 0
		s.Spoof = func(header string) (verify.Engine, error) {
			po := opt
			po.ClientHeader, po.ClientValues = header, spoofValues
			if len(po.SourceIPs) > 1 {
				po.SourceIPs = po.SourceIPs[:1]
			}
			spoofMu.Lock()
			n++
			engineID := id*100 + n
			spoofMu.Unlock()
			e, c, err := newEngine(po, engineID)
			if err != nil {
				return nil, err
			}
			closers = append(closers, c)
			return e, nil
		}
	}
	prefix := "check: "
	if rule.Path != "" || rule.Method != "" {
		prefix = fmt.Sprintf("check %s%s: ", cmpStr(rule.Method+" ", ""), rule.Path)
	}
	s.Progress = func(line string) { prog.line("%s", prefix+line) }
	res, err := s.Run(ctx)
	return res.Results, err
}

// checkProgress reports a check through the shared reporter: the suite's
// line per step, and the status line with the requests done and the time
// against the planned duration.
type checkProgress struct {
	*reporter
	traffic traffic
}

// newCheckProgress returns the reporter of a suite planned to last planned.
func newCheckProgress(f *Factory, g *GlobalOptions, planned time.Duration) *checkProgress {
	p := &checkProgress{}
	p.reporter = newReporter(f, g, func(elapsed time.Duration) string {
		return fmt.Sprintf("check: %s · %s of at most %s", p.traffic.status(), fmtElapsed(elapsed), fmtElapsed(planned))
	})
	return p
}

func cmpStr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// suiteError maps the suite's error to the record's end reason and the
// command's error (exit 3 for budget, interruption and abort).
func suiteError(ctx context.Context, err error, rec *recording) (string, error) {
	where := "; the results so far are in " + rec.path
	switch {
	case err == nil:
		return record.ReasonCompleted, nil
	case errors.Is(err, probe.ErrUsage):
		return record.ReasonAborted, UsageErr(err)
	case errors.Is(err, verify.ErrBudget):
		return record.ReasonBudget, Unreachablef("%v%s", err, where)
	case errors.Is(err, probe.ErrBudget) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil):
		return record.ReasonBudget, Unreachablef("budget spent (--max-duration) before the suite finished%s", where)
	case errors.Is(err, probe.ErrInterrupted) || ctx.Err() != nil:
		return record.ReasonInterrupted, Unreachablef("interrupted before the suite finished%s", where)
	case errors.Is(err, probe.ErrAborted):
		return record.ReasonAborted, Unreachablef("%v%s", err, where)
	}
	return record.ReasonAborted, Unreachablef("%v%s", err, where)
}

// verdictExit returns the command's error: cmdErr when it is a usage or
// internal error, exit 1 for a failing verdict, else cmdErr (exit 3 for an
// incomplete run). Precedence: 2, 4, 1, 3, 0.
func verdictExit(rep *verify.Report, cmdErr error) error {
	if c := ExitCode(cmdErr); cmdErr != nil && (c == ExitUsage || c == ExitInternal) {
		return cmdErr
	}
	if rep.Failed() {
		if cmdErr != nil {
			return WithCode(ExitFindings, cmdErr)
		}
		return &ExitError{Code: ExitFindings}
	}
	if cmdErr == nil && !rep.Complete {
		return &ExitError{Code: ExitUnreachable}
	}
	return cmdErr
}

// seqSink gives the results of several probe engines one Seq sequence in
// the record file, so that "agent:seq" refs stay unique. Each engine's
// results are renumbered as they are written; the results Run returns get
// the same numbers.
type seqSink struct {
	mu      sync.Mutex
	w       probe.Sink
	next    int64
	m       map[[2]int64]int64
	pending []record.Result // returned but never written (the engine stopped writing)
}

func newSeqSink(w probe.Sink) *seqSink { return &seqSink{w: w, m: map[[2]int64]int64{}} }

func (s *seqSink) assign(engine int, seq int64) int64 {
	k := [2]int64{int64(engine), seq}
	n, ok := s.m[k]
	if !ok {
		n = s.next
		s.next++
		s.m[k] = n
	}
	return n
}

// lookup returns the record Seq of an engine's result.
func (s *seqSink) lookup(engine int, seq int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assign(engine, seq)
}

func (s *seqSink) engine(id int) probe.Sink { return engineSink{s, id} }

type engineSink struct {
	s  *seqSink
	id int
}

// WriteResult renumbers r into the record's Seq sequence and writes it.
func (e engineSink) WriteResult(r record.Result) error {
	e.s.mu.Lock()
	r.Seq = e.s.assign(e.id, r.Seq)
	e.s.mu.Unlock()
	return e.s.w.WriteResult(r)
}

// returned renumbers results an engine returned, and remembers those it
// never wrote.
func (s *seqSink) returned(engine int, res []record.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range res {
		k := [2]int64{int64(engine), res[i].Seq}
		if _, ok := s.m[k]; !ok {
			res[i].Seq = s.assign(engine, res[i].Seq)
			s.pending = append(s.pending, res[i])
			continue
		}
		res[i].Seq = s.m[k]
	}
}

// flush writes the results never written (after an engine stopped writing
// to a failed sink).
func (s *seqSink) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.pending {
		if err := s.w.WriteResult(r); err != nil && !errors.Is(err, errTooManyOther) {
			return err
		}
	}
	s.pending = nil
	return nil
}

// seqEngine is a verify.Engine whose results carry record Seqs.
type seqEngine struct {
	eng  *scenario.Engine
	seqs *seqSink
	id   int
}

// Run runs s on the scenario engine and renumbers the results.
func (e seqEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	res, err := e.eng.Run(ctx, s)
	e.seqs.returned(e.id, res)
	return res, err
}

// appendDocument appends a check or analyze document to a record file.
func appendDocument(path string, doc any) error {
	a, err := record.Append(path)
	if err != nil {
		return fmt.Errorf("cannot append the findings to %s: %w", path, err)
	}
	werr := a.WriteFinding(doc)
	if cerr := a.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("cannot append the findings to %s: %w", path, werr)
	}
	return nil
}

// writeReports writes the --html, --junit and --markdown files, and the
// Markdown summary to $GITHUB_STEP_SUMMARY when that is set.
func writeReports(f *Factory, o verdictOptions, m *record.Merged, files []string, rep verify.Report) error {
	if !o.out.wanted(f) {
		return nil
	}
	in := report.FromMerged(m, files)
	in.Tool = rep.Tool
	if err := in.AddDocument(rep); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return o.out.write(f, in)
}

// describePolicy is the policy in one line.
func describePolicy(p *verify.Policy) string {
	parts := make([]string, len(p.Endpoints))
	for i := range p.Endpoints {
		parts[i] = p.Endpoints[i].String()
	}
	return strings.Join(parts, "; ")
}

// planLine describes the suite's plan: steps and planned duration.
func planLine(p *verify.Policy, only, skip []string) string {
	var checks []string
	for _, e := range p.Endpoints {
		for _, s := range verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true}).Steps {
			if !slices.Contains(checks, s.Check) {
				checks = append(checks, s.Check)
			}
		}
	}
	return fmt.Sprintf("%s for %s, at most %v", strings.Join(checks, ", "), describePolicy(p), verify.PlanDuration(*p, only, skip).Round(time.Millisecond))
}

// checkDryRunDoc is the --dry-run --json document of check: the suite's
// plan per rule (docs/schema/check-dry-run.schema.json). Policy is nil when
// it will come from the target's advertised headers.
type checkDryRunDoc struct {
	Schema    string            `json:"schema"`
	Tool      string            `json:"tool"`
	DryRun    bool              `json:"dry_run"`
	Targets   []string          `json:"targets"`
	Policy    *verify.Policy    `json:"policy"`
	Rules     []checkDryRunRule `json:"rules"`
	DurationS float64           `json:"duration_s"`
	Caps      map[string]any    `json:"caps"`
}

type checkDryRunRule struct {
	Rule      string            `json:"rule"`
	DurationS float64           `json:"duration_s"`
	Requests  int               `json:"requests"`
	Steps     []checkDryRunStep `json:"steps"`
	Skipped   map[string]string `json:"skipped"`
}

type checkDryRunStep struct {
	Check     string  `json:"check"`
	Name      string  `json:"name"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// printDryRun prints the plan without sending anything.
func (o *checkOptions) printDryRun(f *Factory, g *GlobalOptions, t *target, p *verify.Policy) error {
	if g.JSON {
		doc := checkDryRunDoc{
			Schema: verify.SchemaCheck, Tool: "rlprobe " + f.Version, DryRun: true, Targets: redactedTargets(t), Policy: p,
			Rules: []checkDryRunRule{},
			Caps:  t.capsDoc(),
		}
		if p != nil {
			for _, e := range p.Endpoints {
				pl := verify.PlanSuite(e, verify.SuiteOptions{Only: o.only, Skip: o.skip, Identities: 1, Spoofing: true})
				r := checkDryRunRule{Rule: e.String(), DurationS: pl.Duration().Seconds(), Requests: pl.Requests(),
					Steps: []checkDryRunStep{}, Skipped: map[string]string{}}
				for _, s := range pl.Steps {
					r.Steps = append(r.Steps, checkDryRunStep{s.Check, s.Name, s.Duration.Seconds(), s.Requests})
				}
				maps.Copy(r.Skipped, pl.Skipped)
				doc.Rules = append(doc.Rules, r)
			}
			doc.DurationS = verify.PlanDuration(*p, o.only, o.skip).Seconds()
		}
		return writeJSON(f.IO.Out, doc)
	}
	if p == nil {
		_, err := fmt.Fprintln(f.IO.Out, "plan: the policy will come from the target's advertised headers (preflight); declare one to see the plan")
		return err
	}
	var b strings.Builder
	for _, e := range p.Endpoints {
		pl := verify.PlanSuite(e, verify.SuiteOptions{Only: o.only, Skip: o.skip, Identities: 1, Spoofing: true})
		fmt.Fprintf(&b, "rule: %s — %v, at most %d requests\n", e.String(), pl.Duration().Round(time.Millisecond), pl.Requests())
		for _, s := range pl.Steps {
			fmt.Fprintf(&b, "  %-10s %-10v %4d requests  %s\n", s.Check, s.Duration.Round(time.Millisecond), s.Requests, s.Name)
		}
		var skipped []string
		for c, why := range pl.Skipped {
			skipped = append(skipped, c+" ("+why+")")
		}
		slices.Sort(skipped)
		if len(skipped) > 0 {
			fmt.Fprintf(&b, "  skipped: %s\n", strings.Join(skipped, ", "))
		}
	}
	fmt.Fprintf(&b, "plan: %v\n", verify.PlanDuration(*p, o.only, o.skip).Round(time.Millisecond))
	_, err := io.WriteString(f.IO.Out, b.String())
	return err
}

// printVerdict writes the document (--json) or the summary, verdict first.
func printVerdict(f *Factory, g *GlobalOptions, rep *verify.Report, policy string) error {
	if g.JSON {
		enc := json.NewEncoder(f.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b strings.Builder
	b.WriteString(verdictLine(rep) + "\n")
	for _, fd := range rep.Findings {
		who := ""
		if fd.Client != "" {
			who = " client " + fd.Client
		}
		check := ""
		if fd.Check != "" {
			check = " [" + fd.Check + "]"
		}
		fmt.Fprintf(&b, "  %-7s %-8s %s%s%s: %s\n", fd.Severity, fd.Certainty, fd.ID, check, who, fd.Message)
		if fd.Hint != "" {
			fmt.Fprintf(&b, "          hint: %s\n", fd.Hint)
		}
		if n := len(fd.Evidence.Refs); n > 0 {
			refs := fd.Evidence.Refs
			more := ""
			if n > 6 {
				refs, more = refs[:6], fmt.Sprintf(" … (%d)", fd.Evidence.Count)
			}
			fmt.Fprintf(&b, "          evidence: %s%s\n", strings.Join(refs, " "), more)
		}
	}
	fmt.Fprintf(&b, "policy: %s\n", policy)
	if len(rep.Targets) > 0 {
		fmt.Fprintf(&b, "targets: %s\n", strings.Join(rep.Targets, ", "))
	}
	if rep.RecordFile != "" {
		fmt.Fprintf(&b, "record: %s\n", rep.RecordFile)
	}
	_, err := io.WriteString(f.IO.Out, b.String())
	return err
}

// verdictLine is the summary's first line.
func verdictLine(rep *verify.Report) string {
	var failing, certain, possible []string
	for _, fd := range rep.Findings {
		switch {
		case fd.Certainty == verify.Certain && fd.Severity.AtLeast(rep.FailOn()):
			if !slices.Contains(failing, fd.ID) {
				failing = append(failing, fd.ID)
			}
		case fd.Certainty == verify.Certain:
			certain = append(certain, fd.ID)
		default:
			possible = append(possible, fd.ID)
		}
	}
	var also []string
	if n := len(certain); n > 0 {
		also = append(also, fmt.Sprintf("%d below --fail-on %s", n, rep.FailOn()))
	}
	if n := len(possible); n > 0 {
		also = append(also, fmt.Sprintf("%d possible", n))
	}
	rest := ""
	if len(also) > 0 {
		rest = "; also " + strings.Join(also, ", ")
	}
	switch rep.Verdict {
	case verify.VerdictFail:
		return fmt.Sprintf("FAIL: %s%s", strings.Join(failing, ", "), rest)
	case verify.VerdictIncomplete:
		return fmt.Sprintf("INCOMPLETE: the suite did not finish; no certain finding at or above %s so far%s", rep.FailOn(), rest)
	}
	if len(rep.Findings) == 0 {
		return "PASS: the target kept the policy; no finding"
	}
	return fmt.Sprintf("PASS: no certain finding at or above %s%s", rep.FailOn(), rest)
}
