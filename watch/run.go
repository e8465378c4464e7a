package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

// Phase names of a cycle's requests (record field "phase").
const (
	PhaseSample  = "watch"
	PhaseExhaust = "exhaust"
)

// DefaultOwnValue is the identity an exhausting cycle presents on a
// per-header limit, so that it spends only a quota nobody else uses.
const DefaultOwnValue = "rlprobe-watch"

// Config is one watch: a resolved target, the policy and the cadence.
type Config struct {
	// Session is the resolved target. Each cycle runs its own session over
	// a copy, with Out set to the cycle's record file.
	Session session.Config
	// Policy is the declared policy; nil watches for drift from the first
	// cycle's inference only.
	Policy *verify.Policy
	// Every is the time from one cycle's start to the next's, and at least
	// from a cycle's last budgeted request to the next cycle's start
	// (DefaultEvery when 0).
	Every time.Duration
	// Share is the budget: the share of the binding rule's quota per
	// period that cycles may spend (DefaultShare when 0).
	Share float64
	// Dir holds the cycles' record files.
	Dir Dir
	// Once runs one cycle and returns.
	Once bool
	// Infer runs a full inference as the first cycle, outside the budget
	// (always when Policy is nil). ConfirmInfer, when set, is asked first
	// with what it will send; an error refuses.
	Infer        bool
	ConfirmInfer func(summary string) error
	// InferMaxWindow bounds the windows the inference looks for (0: infer's
	// default).
	InferMaxWindow time.Duration
	// FailOn is the least severity of a certain finding that fails a
	// cycle's verdict ("" means error).
	FailOn verify.Severity
	// OwnValue is watch's own identity on a per-header limit
	// (DefaultOwnValue when empty).
	OwnValue string
	// MaxCycles stops the watch after that many cycles (0: until ctx ends).
	MaxCycles int
	// Metrics, Webhook and Log receive every event; each may be nil. Log is
	// called from the watch's goroutine; a webhook failure is logged, never
	// fatal.
	Metrics *Metrics
	Webhook *Webhook
	Log     func(Event)
	// Warn receives start-up warnings (nil: dropped).
	Warn func(string)
	// Tool is the events' "tool".
	Tool string
}

// Result is what a watch ends with.
type Result struct {
	Cycles int
	// Last is the last cycle's verdict against the policy (nil without a
	// policy, or when no cycle was judged).
	Last *verify.Report
	// Drifts counts drift events; Inference is the first cycle's.
	Drifts    int
	Inference *infer.Inference
	Budget    Budget
	Mode      Mode
}

// watcher is one running watch.
type watcher struct {
	cfg      Config
	rule     verify.Endpoint // the binding rule
	declared int             // its reject status
	budget   Budget
	mode     Mode
	base     Baseline
	res      Result
	targets  []string
	started  bool // the mode is chosen and the start announced
	planned  bool // the budget fits: a cycle's failure is no longer fatal
	first    int  // the first budgeted cycle
	// lastShared is when the last budgeted request went out: the next
	// cycle starts Every after it at the earliest.
	lastShared time.Time
	// part counts the cycle's sessions: the second (after the first
	// request chose the mode) records as agent NAME-2, the name the
	// verdict over both files gives it.
	part int
	// lastExhaust is when the last exhausting burst's last answer came:
	// the next may start only once its quota is fresh again.
	lastExhaust time.Time
}

// Run watches until ctx ends (a daemon's normal stop: the cycle under way
// stops sending, writes its end line, and Run returns nil), MaxCycles have
// run, or, with Once, after one cycle. Its error carries a session class:
// Usage when the budget cannot fit or nothing can be watched; a cycle's own
// failure (target down) is an event, not an error, except with Once.
func Run(ctx context.Context, cfg Config) (Result, error) {
	w := &watcher{cfg: cfg}
	if w.cfg.Every <= 0 {
		w.cfg.Every = DefaultEvery
	}
	if w.cfg.Share == 0 {
		w.cfg.Share = DefaultShare
	}
	if w.cfg.OwnValue == "" {
		w.cfg.OwnValue = DefaultOwnValue
	}
	if err := os.MkdirAll(cfg.Dir.Path, 0o755); err != nil {
		return w.res, session.WithClass(session.Usage, fmt.Errorf("watch: --dir: %w", err))
	}
	s, err := session.New(cfg.Session)
	if err != nil {
		return w.res, err
	}
	if msg, warn := cfg.Session.ProxyWarning(), cfg.Session.Warn; msg != "" && warn != nil {
		// Given once, above: not again by every cycle's session.
		w.cfg.Session.Warn = func(m string) {
			if m != msg {
				warn(m)
			}
		}
	}
	w.targets = s.Targets()
	if cfg.Policy != nil {
		w.rule = binding(cfg.Policy)
		w.declared = w.rule.Status
	}
	for n := 1; ; n++ {
		start := time.Now()
		err := w.cycle(ctx, n)
		w.res.Cycles = n
		if ctx.Err() != nil {
			w.emit(ctx, Event{Kind: KindStop, Cycle: n, Message: "watch stopped: " + context.Cause(ctx).Error()})
			return w.res, nil
		}
		if err != nil {
			if !w.planned || cfg.Once || session.ClassOf(err) == session.Usage {
				return w.res, err
			}
			w.emit(ctx, Event{Kind: KindCycleError, Cycle: n, Message: err.Error()})
		}
		if cfg.Once || (cfg.MaxCycles > 0 && n >= cfg.MaxCycles) {
			w.emit(ctx, Event{Kind: KindStop, Cycle: n, Message: fmt.Sprintf("watch stopped after %d cycle(s)", n)})
			return w.res, nil
		}
		select {
		case <-ctx.Done():
			w.emit(ctx, Event{Kind: KindStop, Cycle: n, Message: "watch stopped: " + context.Cause(ctx).Error()})
			return w.res, nil
		case <-time.After(time.Until(later(start.Add(w.cfg.Every), w.lastShared.Add(w.cfg.Every)))):
		}
	}
}

// binding returns the rule that binds watch's budget: the one whose quota
// comes back most slowly per request (the smallest quota per period).
func binding(p *verify.Policy) verify.Endpoint {
	best := p.Endpoints[0]
	rate := func(e verify.Endpoint) float64 {
		if e.Period() <= 0 {
			return math.Inf(1)
		}
		return float64(e.Quota()) / e.Period().Seconds()
	}
	for _, e := range p.Endpoints[1:] {
		if rate(e) < rate(best) {
			best = e
		}
	}
	return best
}

// cycle runs cycle n: the first sets the baseline (and, after its first
// request, the mode); every cycle judges against the policy and the
// baseline.
func (w *watcher) cycle(ctx context.Context, n int) error {
	if n == 1 && (w.cfg.Policy == nil || w.cfg.Infer) {
		if err := w.inferFirst(ctx, n); err != nil {
			return err
		}
		if w.cfg.Once && w.cfg.Policy == nil {
			return nil
		}
	}
	var runs []*record.Run
	var path string
	var err error
	w.part = 0
	spent := 0 // budgeted requests sent so far in this cycle
	if !w.started {
		var first *record.Run
		if first, path, err = w.choose(ctx, n); first == nil || err != nil {
			return err
		}
		runs, spent = append(runs, first), 1
	}
	shared := w.budget.PerCycle - spent
	if w.mode == ModeExhaust || shared > 0 {
		var run *record.Run
		run, path, err = w.probe(ctx, n, shared)
		if run == nil {
			return err
		}
		runs = append(runs, run)
	}
	results, start := runs[0].Results, runs[0].Header.Start
	merged := record.Merge(runs...)
	if len(runs) > 1 {
		results, start = merged.Results, merged.Start
	}
	obs := Observe(results, w.declared, start, map[bool]string{true: PhaseExhaust}[w.mode == ModeExhaust])
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Results(results, w.declared, func(r record.Result) bool { return r.Phase == PhaseExhaust })
		w.cfg.Metrics.Observation(obs, w.rule.IsBucket())
	}
	verdict := ""
	if w.cfg.Policy != nil {
		rep := verify.Analyze(merged, *w.cfg.Policy, verify.Options{Schema: verify.SchemaCheck, Tool: w.cfg.Tool, FailOn: w.cfg.FailOn, RecordFile: path, Incomplete: err != nil,
			SharedQuota: w.mode != ModeExhaust, Time: time.Now()})
		w.res.Last, verdict = &rep, rep.Verdict
		appendDoc(path, rep, nil)
		if w.cfg.Metrics != nil {
			w.cfg.Metrics.Verdict(rep)
		}
		for i := range rep.Findings {
			f := rep.Findings[i]
			w.emit(ctx, Event{Kind: KindFinding, Cycle: n, Finding: &f, RecordFile: path,
				Message: fmt.Sprintf("%s %s %s: %s", f.Severity, f.Certainty, f.ID, f.Message)})
		}
	}
	if n > 1 || w.base.Inference != nil || w.base.Observation.Responses > 0 {
		drifts := Compare(w.base, obs)
		for i := range drifts {
			d := drifts[i]
			f := DriftFinding(d, w.rule.String())
			w.res.Drifts++
			w.emit(ctx, Event{Kind: KindDrift, Cycle: n, Drift: &d, Finding: &f, RecordFile: path, Message: "policy-drift: " + f.Message})
		}
		if w.cfg.Metrics != nil {
			w.cfg.Metrics.Drift(drifts)
		}
	}
	w.base = w.base.Update(obs)
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Cycle(err == nil, time.Now())
	}
	if _, rerr := w.cfg.Dir.Rotate(); rerr != nil && w.cfg.Warn != nil {
		w.cfg.Warn(rerr.Error())
	}
	w.emit(ctx, Event{Kind: KindCycle, Cycle: n, Verdict: verdict, RecordFile: path,
		Message: fmt.Sprintf("cycle %d: %d requests, %d accepted, %d rejected%s", n, len(results), obs.Accepted, obs.Rejected, verdictText(verdict))})
	return err
}

func verdictText(v string) string {
	if v == "" {
		return ""
	}
	return "; verdict " + v
}

// inferFirst runs the first cycle's full inference, outside the budget.
func (w *watcher) inferFirst(ctx context.Context, n int) error {
	cfg := w.cfg.Session
	cfg.Out, cfg.Force = w.cfg.Dir.File(time.Now(), n), false
	cfg.Confirm = w.cfg.ConfirmInfer
	s, err := session.New(cfg)
	if err != nil {
		return err
	}
	inf, err := s.Infer(ctx, session.InferOptions{MaxWindow: w.cfg.InferMaxWindow})
	if err != nil {
		return err
	}
	w.res.Inference, w.base.Inference = inf, inf
	if run := s.Record(); run != nil {
		w.base.Observation = Observe(run.Results, w.declared, run.Header.Start, "")
	}
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Inference(inf)
	}
	if w.cfg.Policy == nil {
		rule, err := ruleOf(inf)
		if err != nil {
			return err
		}
		w.rule = rule
		if inf.RejectStatus != nil {
			w.declared = *inf.RejectStatus
		}
	}
	return nil
}

// ruleOf is the rule an inference describes, for budgeting and drift
// (infer's Inference.Rule, the one conversion); an inference that
// describes none is a usage error: declare a policy.
func ruleOf(inf *infer.Inference) (verify.Endpoint, error) {
	e, _, err := inf.Rule()
	if err != nil {
		return e, session.Errorf(session.Usage, "watch: the first cycle inferred %s (%v): no limit to watch; declare a policy", inferredName(inf), err)
	}
	return e, nil
}

// inferredName is the family an inference names, or "no family (closest
// X)" for a misfit (infer.Inference.ClosestPhrase).
func inferredName(inf *infer.Inference) string {
	if inf.Algorithm == "" {
		return "no family (" + inf.ClosestPhrase() + ")"
	}
	return string(inf.Algorithm)
}

// choose plans the budget, sends the first request of cycle n (one of the
// cycle's budgeted requests), chooses the mode from its answer and
// announces the plan. A budget that cannot fit is refused before anything
// is sent; an exhausting mode that cannot get a fresh quota each cycle,
// after that one request.
func (w *watcher) choose(ctx context.Context, n int) (*record.Run, string, error) {
	b, err := PlanBudget(w.rule, w.cfg.Share, w.cfg.Every, ModeHeaders)
	if err != nil {
		return nil, "", session.WithClass(session.Usage, err)
	}
	w.budget, w.planned = b, true
	run, path, err := w.send(ctx, n, w.samplePlan(1), false)
	if run == nil || err != nil {
		return run, path, err
	}
	w.mode = chooseMode(Observe(run.Results, w.declared, run.Header.Start, ""), w.rule)
	if w.mode == ModeExhaust {
		if b, err = PlanBudget(w.rule, w.cfg.Share, w.cfg.Every, ModeExhaust); err != nil {
			return nil, path, session.WithClass(session.Usage, err)
		}
	}
	w.budget, w.res.Budget, w.res.Mode = b, b, w.mode
	w.started, w.first = true, n
	w.emit(context.Background(), Event{Kind: KindStart, Mode: w.mode,
		Budget:  &EventBudget{Share: b.Share, PerCycle: b.PerCycle, PerPeriodMax: b.PerPeriodMax, SharePerPeriod: b.SharePerPeriod()},
		Message: fmt.Sprintf("watching %s against %s (%s): %s", strings.Join(w.targets, ", "), w.rule.String(), w.mode, b)})
	if w.mode == ModeSample && w.cfg.Warn != nil {
		w.cfg.Warn("watch: the target advertises no rate-limit headers and its limit is global: limit drift cannot be watched within the budget (headers, Retry-After and statuses still are)")
	}
	return run, path, nil
}

// chooseMode is the mode the first answer calls for: headers when the
// target sends any dialect rlprobe reads; else exhausting watch's own
// identity on a per-key limit; else sampling.
func chooseMode(first Observation, rule verify.Endpoint) Mode {
	switch {
	case len(first.Dialects) > 0 || first.Advertised != nil:
		return ModeHeaders
	case rule.PerClient():
		return ModeExhaust
	}
	return ModeSample
}

// samplePlan is a plan of count budgeted requests, spread over up to a
// second (a quarter of Every at most).
func (w *watcher) samplePlan(count int) *patterns.Plan {
	spread := min(time.Second, w.cfg.Every/4)
	if count <= 1 {
		spread = 0
	}
	return &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
		{Name: PhaseSample, Pattern: patterns.PatternBurst, Count: count, Spread: patterns.Duration(spread)}}}
}

// probe runs the rest of cycle n's traffic in a session of its own: shared
// budgeted requests, or an exhausting burst under watch's own identity.
func (w *watcher) probe(ctx context.Context, n, shared int) (*record.Run, string, error) {
	if w.mode != ModeExhaust {
		return w.send(ctx, n, w.samplePlan(shared), false)
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
		{Name: PhaseExhaust, Pattern: patterns.PatternBurst, Count: w.budget.Exhaust}}}
	if !w.lastExhaust.IsZero() {
		// A fresh quota: the previous burst's window (or log), and a
		// declared block, must be over, counted from its last answer, with
		// a margin for clock and decision.
		fresh := w.rule.Fresh()
		ready := w.lastExhaust.Add(fresh + max(100*time.Millisecond, fresh/10))
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(time.Until(ready)):
		}
	}
	return w.send(ctx, n, plan, true)
}

// send runs plan as a session of cycle n with its own record file (under
// watch's own identity when own), and notes when its last budgeted
// request went out and its last exhausting answer came.
func (w *watcher) send(ctx context.Context, n int, plan *patterns.Plan, own bool) (*record.Run, string, error) {
	cfg := w.cfg.Session
	cfg.Out, cfg.Force, cfg.Confirm = w.cfg.Dir.File(time.Now(), n), false, nil
	if w.part++; w.part > 1 {
		cfg.Probe.Agent = fmt.Sprintf("%s-%d", cmp.Or(cfg.Probe.Agent, session.DefaultAgent), w.part)
	}
	if name, ok := strings.CutPrefix(w.rule.Key, "header:"); ok && own {
		cfg.Probe.ClientHeader, cfg.Probe.ClientValues = name, []string{w.cfg.OwnValue}
	}
	total := 0
	for _, ph := range plan.Phases {
		total += ph.Count
	}
	cfg.Caps.MaxRequests = max(cfg.Caps.MaxRequests, total)
	cfg.Caps.MaxRate = max(cfg.Caps.MaxRate, float64(total))
	s, err := session.New(cfg)
	if err != nil {
		return nil, "", err
	}
	_, err = s.Run(ctx, plan)
	run := s.Record()
	if run != nil {
		for _, r := range run.Results {
			switch {
			case r.Phase == PhaseExhaust && r.Done != 0:
				w.lastExhaust = later(w.lastExhaust, run.Header.Start.Add(time.Duration(r.Done)))
			case r.Phase == PhaseSample && r.Outcome != record.OutcomeNotSent:
				w.lastShared = later(w.lastShared, run.Header.Start.Add(time.Duration(r.Sent)))
			}
		}
	}
	if run == nil && err == nil {
		err = errors.New("watch: the cycle recorded nothing")
	}
	return run, cfg.Out, err
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// appendDoc appends a verdict (or an inference) to a cycle's record file;
// a failure loses only the copy in the file (the event carries it).
func appendDoc(path string, finding any, inference any) {
	a, err := record.Append(path)
	if err != nil {
		return
	}
	defer a.Close()
	if finding != nil {
		_ = a.WriteFinding(finding)
	}
	if inference != nil {
		_ = a.WriteInference(inference)
	}
}

// emit stamps an event and hands it to the log, the webhook and the
// metrics.
func (w *watcher) emit(ctx context.Context, ev Event) {
	ev.Schema, ev.Tool, ev.Time, ev.Targets = EventSchema, w.cfg.Tool, time.Now().UTC(), w.targets
	if w.cfg.Log != nil {
		w.cfg.Log(ev)
	}
	if w.cfg.Webhook != nil {
		limit := 20 * time.Second
		if ctx.Err() != nil {
			limit = 2 * time.Second // stopping: SIGTERM must end the watch within 5 s
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		defer cancel()
		if err := w.cfg.Webhook.Post(pctx, ev); err != nil && w.cfg.Log != nil && w.cfg.Warn != nil {
			w.cfg.Warn(err.Error())
		}
	}
}
