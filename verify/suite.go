package verify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Engine runs one schedule and returns its results: exactly one per send,
// in schedule order, with times in nanoseconds since the record file's
// start (the same zero across calls). Offset 0 of the schedule is "now".
// The command line hands the probe engine (wrapped to write the record
// file); tests may hand anything that answers.
type Engine interface {
	Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error)
}

// SpoofHeaders are the client-supplied address headers the key-spoof check
// varies, one at a time.
var SpoofHeaders = []string{"X-Forwarded-For", "X-Real-IP", "True-Client-IP"}

// SuiteOptions choose and bound the checks of a suite. The zero value runs
// every check with one client identity.
type SuiteOptions struct {
	// Only, when not empty, runs just these checks; Skip leaves checks out.
	Only, Skip []string
	// Identities is how many client indexes map to distinct quota keys:
	// 0 means as many as wanted (a header key), 1 means one (a global key,
	// or an ip key without several source addresses). With several,
	// probes that need fresh quota use a fresh client instead of waiting,
	// and run side by side.
	Identities int
	// Spoofing reports whether a Spoof engine is available; without one,
	// key-spoof is skipped.
	Spoofing bool
	// MaxRate is the engine's rate guard in requests per second (0 means
	// 1000): groups of requests meant to go out together are spread so
	// that the guard does not delay them past an edge.
	MaxRate float64
}

func (o SuiteOptions) selected(check string) bool {
	if len(o.Only) > 0 && !slices.Contains(o.Only, check) {
		return false
	}
	return !slices.Contains(o.Skip, check)
}

func (o SuiteOptions) parallel() bool { return o.Identities == 0 || o.Identities >= 4 }

// forRule returns the options as they apply to rule e: a global key has
// one identity whatever the engine can present.
func (o SuiteOptions) forRule(e *Endpoint) SuiteOptions {
	if !e.PerClient() {
		o.Identities = 1
	}
	return o
}

// ValidateChecks reports the first check name that is not the contract's,
// as a *problem.Error.
func ValidateChecks(names []string) error {
	for _, n := range names {
		if !slices.Contains(Checks, n) {
			return problem.New("verify", "", "unknown check %q (want %s)", n, strings.Join(Checks, ", "))
		}
	}
	return nil
}

// Step is one experiment of the suite's plan.
type Step struct {
	// Check is the check the step serves; Name says what it does.
	Check, Name string
	// Duration is the step's planned length, waits included: its worst
	// case for an honest target (adaptive steps stop earlier).
	Duration time.Duration
	// Requests is the most requests the step sends.
	Requests int
}

// Plan is the suite for one rule: the steps in order and what they skip.
type Plan struct {
	Rule    Endpoint
	Steps   []Step
	Skipped map[string]string // check → why it does not run
}

// Duration is the plan's total planned length.
func (p Plan) Duration() time.Duration {
	var d time.Duration
	for _, s := range p.Steps {
		d += s.Duration
	}
	return d
}

// Requests is the most requests the plan sends.
func (p Plan) Requests() int {
	n := 0
	for _, s := range p.Steps {
		n += s.Requests
	}
	return n
}

// suite parameters of a rule.
type params struct {
	q      int64         // fresh quota
	period time.Duration // time a spent quota takes to come back
	poll   time.Duration // recovery poll interval
	margin time.Duration // edge straddle margin
	spread time.Duration // burst spread
	group  time.Duration // spread of each half of the edge straddle
	extra  int64         // requests beyond the quota in a burst
}

func paramsOf(e *Endpoint, maxRate float64) params {
	if maxRate <= 0 {
		maxRate = 1000
	}
	p := params{q: max(1, e.Quota()), period: max(e.Period(), time.Millisecond)}
	p.poll = max(p.period/20, time.Millisecond)
	p.margin = min(max(p.poll, 100*time.Millisecond), p.period/8)
	p.spread = min(p.period/10, 200*time.Millisecond)
	if e.IsBucket() {
		// A burst must fit the burst bound's window (a quarter of the
		// refill interval).
		p.spread = min(p.spread, time.Duration(burstWindow(e.Rate)/2))
	}
	p.extra = max(2, (p.q+3)/4)
	// The guard sends at most maxRate per second: a group of n takes
	// n/maxRate at least.
	atRate := func(n int64) time.Duration { return time.Duration(float64(n) / maxRate * 1.1 * 1e9) }
	p.spread = max(p.spread, atRate(p.q+p.extra))
	p.group = min(max(50*time.Millisecond, atRate(p.q)), p.period/4)
	return p
}

// sustained returns the sustained probe's rate and length: a little over
// twice the allowed rate (2N + ½ per window, so that sends do not fall
// exactly one window after earlier ones), for two periods (buckets: at
// least 20 refills, up to 20 s).
func (p params) sustained(e *Endpoint) (rate float64, d time.Duration) {
	d = 2 * p.period
	if e.IsBucket() {
		d = max(d, min(time.Duration(20/e.Rate*1e9), 20*time.Second))
	}
	return (2*float64(p.q) + 0.5) / p.period.Seconds(), d
}

// Bounds of the paced series (seriesSize): a quota and a period small
// enough to spend twice more within the plan's bound.
const (
	maxSeriesQuota  = 20
	maxSeriesPeriod = 10 * time.Second
)

// seriesSize returns the length and spacing of each paced series
// (PhaseNewConns, PhaseOneConn): twice the quota and the burst's extra,
// so that two instances each admitting the quota already exceed it, at
// least 10 ms apart (a round trip on a new connection) and at most 50 ms
// or a quarter period over the series; gapMax is the most the suite
// widens the spacing to for a slow target (seriesGap), the series still
// within half a period; the plan counts it. ok false when the quota or
// period is beyond maxSeriesQuota or maxSeriesPeriod.
func (p params) seriesSize() (n int64, gap, gapMax time.Duration, ok bool) {
	if p.q > maxSeriesQuota || p.period > maxSeriesPeriod {
		return 0, 0, 0, false
	}
	n = 2*p.q + p.extra
	gap = min(max(10*time.Millisecond, p.period/time.Duration(4*n)), 50*time.Millisecond)
	return n, gap, max(gap, p.period/time.Duration(2*(n+1))), true
}

func (p params) raceSize() (avail, batch int64) {
	avail = min(p.q, 20)
	return avail, avail + max(2, avail/2)
}

// PlanSuite plans the check suite for rule e (normalized, valid).
func PlanSuite(e Endpoint, opt SuiteOptions) Plan {
	pl := Plan{Rule: e, Skipped: map[string]string{}}
	p := paramsOf(&e, opt.MaxRate)
	opt = opt.forRule(&e)
	sel := opt.selected
	if e.IsBucket() && sel(CheckEdge) {
		pl.Skipped[CheckEdge] = "a bucket has no window edge"
	}
	if sel(CheckKeySpoof) {
		switch {
		case e.Key != KeyIP:
			pl.Skipped[CheckKeySpoof] = "only for --key ip policies"
		case !opt.Spoofing:
			pl.Skipped[CheckKeySpoof] = "the engine cannot vary address headers"
		}
	}
	edge := sel(CheckEdge) && pl.Skipped[CheckEdge] == ""
	recovery := sel(CheckRecovery) || sel(CheckRetryAfter) || edge
	burst := sel(CheckBurst) || sel(CheckHeaders) || recovery
	race := sel(CheckRace)
	keySpoof := sel(CheckKeySpoof) && pl.Skipped[CheckKeySpoof] == ""
	par := opt.parallel()
	_, batch := p.raceSize()
	if burst {
		d := p.spread
		name := "burst of quota + extra from idle"
		if race && par {
			name += ", and the race on a fresh client beside it"
		}
		st := Step{Check: CheckBurst, Name: name, Duration: d, Requests: int(p.q + p.extra)}
		if !par && opt.Identities >= 2 { // suiteRun.secondIdentity
			st.Name += ", then one request from a second identity"
			st.Requests++
		}
		pl.Steps = append(pl.Steps, st)
	}
	if recovery {
		st := Step{Check: CheckRecovery, Name: "watch quota return; retry at the advertised moment and shortly before",
			Duration: p.period + 2*p.poll, Requests: int((p.period+2*p.poll)/p.poll) + 4}
		switch e.Penalty.Kind {
		case limiter.PenaltyBlock:
			st.Name = "wait out the declared block, then " + st.Name
			st.Duration += e.Penalty.Duration
		case limiter.PenaltyExtend, limiter.PenaltyRestart:
			st.Name = "after a quiet window (the declared " + string(e.Penalty.Kind) + "), retry until quota returns"
			st.Duration, st.Requests = 3*(e.Window+p.poll), 3
		}
		pl.Steps = append(pl.Steps, st)
	}
	if edge {
		pl.Steps = append(pl.Steps, Step{Check: CheckEdge, Name: "straddle the next window edge with quota on each side",
			Duration: e.Window + p.margin + p.group, Requests: int(2 * p.q)})
	}
	if sel(CheckSustained) {
		rate, d := p.sustained(&e)
		pl.Steps = append(pl.Steps, Step{Check: CheckSustained, Name: fmt.Sprintf("steady %s, twice the allowed rate", units.HumanRate(rate)),
			Duration: d, Requests: int(math.Ceil(rate * d.Seconds()))})
	}
	if n, _, gap, ok := p.seriesSize(); ok && (sel(CheckBurst) || race || keySpoof) {
		// Each series at fresh quota: after a period (and a declared
		// block) with one identity, and, for clock-aligned fixed windows,
		// at the start of a window.
		d := 2 * time.Duration(n) * gap
		if !par {
			d += 2 * (p.period + p.poll + e.Penalty.Duration)
		}
		if e.WindowType == Fixed && e.Align != limiter.AlignFirstRequest {
			d += 2 * e.Window
		}
		pl.Steps = append(pl.Steps, Step{Check: CheckBurst, Name: seriesStep, Duration: d, Requests: int(2 * n)})
	}
	if race {
		wait := p.period
		if e.Penalty.Kind == limiter.PenaltyBlock {
			wait += e.Penalty.Duration // the sustained probe's refusals end in a block
		}
		if par {
			wait = 0
		}
		if !(burst && par) {
			pl.Steps = append(pl.Steps, Step{Check: CheckRace, Name: fmt.Sprintf("release %d requests together at fresh quota", batch),
				Duration: wait + 100*time.Millisecond, Requests: int(max(0, p.q-20) + batch)})
		} else {
			pl.Steps[0].Requests += int(max(0, p.q-20) + batch)
		}
	}
	if keySpoof {
		pl.Steps = append(pl.Steps, Step{Check: CheckKeySpoof, Name: "exhaust one address, then vary " + strings.Join(SpoofHeaders, ", "),
			Duration: p.spread + time.Duration(len(SpoofHeaders))*100*time.Millisecond, Requests: int(p.q+1) + 3*len(SpoofHeaders)})
	}
	return pl
}

// PlanDuration is the planned duration of the suite over every rule of p
// with one client identity (the longest case), as printed before a check:
// at most 6 W + 30 s per rule, W being the rule's window (a bucket's
// capacity/rate), and twice a declared block more (the recovery and the
// race wait it out).
func PlanDuration(p Policy, only, skip []string) time.Duration {
	var d time.Duration
	for _, e := range p.Endpoints {
		d += PlanSuite(e, SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true}).Duration()
	}
	return d
}

// Suite runs the check suite against one rule through an Engine. Fill the
// fields and call Run once; a Suite is not safe for concurrent use.
type Suite struct {
	// Rule is the normalized, valid rule to test.
	Rule Endpoint
	// Engine runs the schedules.
	Engine Engine
	// Spoof returns an engine whose client i sends header with a distinct
	// address value per i, from the same source address as Engine's client
	// 0; nil disables key-spoof.
	Spoof func(header string) (Engine, error)
	// Options choose the checks and tell how many identities Engine has.
	Options SuiteOptions
	// Zero is the record file's start: result times count from it.
	Zero time.Time
	// Elapsed returns the time since Zero; nil means time.Since(Zero).
	Elapsed func() time.Duration
	// MaxRequests bounds the requests sent (0 = no bound): a step that
	// would pass it is not started and the suite ends incomplete.
	MaxRequests int
	// Progress, when not nil, receives one line per step.
	Progress func(string)
	// Prior are results recorded before the suite (the preflight).
	Prior []record.Result
}

// SuiteResult is what a suite did.
type SuiteResult struct {
	// Results are every result of the suite, in the order received.
	Results []record.Result
	// Complete is false when the budget (requests or the context's
	// deadline) ended the suite early.
	Complete bool
	// Plan is the plan the suite followed.
	Plan Plan
}

// sendLead is the least time between planning a step and its first send.
const sendLead = 20 * time.Millisecond

// ErrBudget is returned (wrapped) when the suite's request budget ran out.
var ErrBudget = errors.New("verify: budget spent before the suite finished")

type suiteRun struct {
	*Suite
	e       *Endpoint
	p       params
	plan    Plan
	results []record.Result
	sent    int
	next    int // next fresh client index
	par     bool
}

// Run runs the suite. It returns the results even on error; the error is
// the engine's (wrapped), ErrBudget when MaxRequests stopped it, or the
// context's.
func (s *Suite) Run(ctx context.Context) (SuiteResult, error) {
	r := &suiteRun{Suite: s, e: &s.Rule, p: paramsOf(&s.Rule, s.Options.MaxRate), next: 1}
	r.plan = PlanSuite(s.Rule, s.Options)
	r.par = s.Options.forRule(&s.Rule).parallel()
	err := r.run(ctx)
	res := SuiteResult{Results: r.results, Complete: err == nil, Plan: r.plan}
	return res, err
}

func (r *suiteRun) now() int64 {
	if r.Elapsed != nil {
		return int64(r.Elapsed())
	}
	return int64(time.Since(r.Zero))
}

func (r *suiteRun) progress(format string, a ...any) {
	if r.Progress != nil {
		r.Progress(fmt.Sprintf(format, a...))
	}
}

// fresh returns a client index with untouched quota, or 0 when there is
// only one identity.
func (r *suiteRun) fresh() int {
	if !r.par {
		return 0
	}
	c := r.next
	r.next++
	return c
}

// send runs sends whose At are times since Zero; sends in the past go at
// once. It enforces the request budget.
func (r *suiteRun) send(ctx context.Context, eng Engine, sends []patterns.Send) ([]record.Result, error) {
	if len(sends) == 0 {
		return nil, nil
	}
	if r.MaxRequests > 0 && r.sent+len(sends) > r.MaxRequests {
		return nil, fmt.Errorf("%w: %d requests sent, %d more needed, --max-requests %d", ErrBudget, r.sent, len(sends), r.MaxRequests)
	}
	// Anchor offset 0 to the first send, so that sends go out at the times
	// planned; a schedule whose first send is already due moves as a whole
	// to a moment from now, leaving the engine time to prepare.
	first := sends[0].At
	for _, x := range sends {
		first = min(first, x.At)
	}
	begin := max(first, time.Duration(r.now())+sendLead)
	shift := begin - first
	s := patterns.Schedule{Start: r.Zero.Add(begin)}
	for _, x := range sends {
		x.At = x.At + shift - begin
		s.Sends = append(s.Sends, x)
		s.Clients = max(s.Clients, x.Client+1)
		s.Duration = max(s.Duration, x.At)
	}
	slices.SortStableFunc(s.Sends, func(a, b patterns.Send) int { return cmpInt64(int64(a.At), int64(b.At)) })
	res, err := eng.Run(ctx, s)
	r.sent += len(sends)
	r.results = append(r.results, res...)
	if err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// classOf classifies a result under the rule (record.Classify).
func (r *suiteRun) classOf(x *record.Result) record.Class {
	c, _ := record.Classify(*x, r.e.Status)
	return c
}

// lastRejected returns the last rejection among res.
func (r *suiteRun) lastRejected(res []record.Result) (*record.Result, bool) {
	for i := len(res) - 1; i >= 0; i-- {
		if r.classOf(&res[i]) == record.ClassRejected {
			return &res[i], true
		}
	}
	return nil, false
}

func recvOf(x *record.Result) int64 {
	if x.TTFB != 0 {
		return x.TTFB
	}
	return x.Done
}

func loOf(x *record.Result) int64 { return arrival(x, 0).Lo }
func hiOf(x *record.Result) int64 { return arrival(x, 0).Hi }

// hint returns when rejection x says quota returns: Retry-After (ra true),
// else a remaining-0 state's t or reset; ok false when x says nothing. A
// hint of implausibleFactor × (the policy's Fresh time + 1 s) or more is
// not one.
func (r *suiteRun) hint(x *record.Result) (moment, delay int64, ra, ok bool) {
	recv := recvOf(x)
	ph, _ := parseAnswer(x.Headers, r.Zero.Add(time.Duration(recv)))
	// A hint far beyond the declared policy's recovery (milliseconds or a
	// Unix time where seconds belong: retry-after-implausible, or a Unix
	// reset) is not followed: the probes poll instead, which also gives
	// the acceptance that shows it wrong.
	plausible := func(d int64) bool { return d < implausibleFactor*(int64(r.e.Fresh())+int64(time.Second)) }
	if ph.RetryAfter != nil && plausible(int64(*ph.RetryAfter)) {
		d := int64(*ph.RetryAfter)
		return recv + d, d, true, true
	}
	for _, l := range limitsFor(&ph, r.e) {
		if l.HasReset && l.Remaining == 0 && plausible(int64(l.Reset)) {
			return recv + int64(l.Reset), int64(l.Reset), false, true
		}
	}
	return 0, 0, false, false
}

func (r *suiteRun) run(ctx context.Context) error {
	sel := r.Options.selected
	has := func(check string) bool {
		return slices.ContainsFunc(r.plan.Steps, func(s Step) bool { return s.Check == check })
	}
	for c, why := range r.plan.Skipped {
		r.progress("%s: skipped (%s)", c, why)
	}
	// 1. Burst from idle, with the race beside it on a fresh client.
	burstClient := 0
	var burst []record.Result
	raceDone := false
	if has(CheckBurst) {
		burstClient = r.fresh()
		sends := r.burstSends(burstClient, time.Duration(r.now()), CheckBurst)
		if sel(CheckRace) && r.par {
			sends = append(sends, r.raceSends(r.fresh(), time.Duration(r.now())+r.p.spread+150*time.Millisecond)...)
			raceDone = true
		}
		r.progress("burst: %d requests from idle within %s", r.p.q+r.p.extra, units.HumanDuration(r.p.spread))
		res, err := r.send(ctx, r.Engine, sends)
		if err != nil {
			return err
		}
		burst = filterPhase(res, CheckBurst)
		if err := r.secondIdentity(ctx); err != nil {
			return err
		}
	}
	// 2. Recovery, with the Retry-After probes.
	var edgeLo, edgeHi int64
	edgeFound := false
	if has(CheckRecovery) {
		x, ok := r.lastRejected(burst)
		if !ok {
			r.progress("recovery: skipped (the burst had no rejection)")
		} else {
			var err error
			edgeLo, edgeHi, edgeFound, err = r.recovery(ctx, burstClient, burst, x)
			if err != nil {
				return err
			}
		}
	}
	// 3. The edge straddle.
	if has(CheckEdge) {
		if !edgeFound {
			r.progress("edge: skipped (quota return not observed)")
		} else if err := r.edge(ctx, burstClient, edgeLo, edgeHi); err != nil {
			return err
		}
	}
	// 4. Sustained load at twice the allowed rate.
	if has(CheckSustained) {
		rate, d := r.p.sustained(r.e)
		r.progress("sustained: %s for %s", units.HumanRate(rate), units.HumanDuration(d))
		st, err := patterns.Steady(rate, d)
		if err != nil {
			return fmt.Errorf("verify: sustained schedule: %w", err)
		}
		c := r.fresh()
		start := time.Duration(r.now()) + 10*time.Millisecond
		var sends []patterns.Send
		for _, x := range st.Sends {
			sends = append(sends, patterns.Send{At: start + x.At, Client: c, Phase: CheckSustained})
		}
		if _, err := r.send(ctx, r.Engine, sends); err != nil {
			return err
		}
	}
	// 5. The paced series: on one kept-alive connection, then each on a
	// new connection.
	if slices.ContainsFunc(r.plan.Steps, func(s Step) bool { return s.Name == seriesStep }) {
		if err := r.series(ctx); err != nil {
			return err
		}
	}
	// 6. The race at fresh quota.
	if has(CheckRace) && !raceDone {
		c := r.fresh()
		at := time.Duration(r.now()) + 150*time.Millisecond
		if !r.par {
			at = max(at, time.Duration(r.freshAt()))
		}
		_, batch := r.p.raceSize()
		r.progress("race: %d requests released together at %s", batch, units.HumanDuration(time.Duration(at)))
		if _, err := r.send(ctx, r.Engine, r.raceSends(c, at)); err != nil {
			return err
		}
	}
	// 7. Key spoofing.
	if has(CheckKeySpoof) && r.Spoof != nil {
		if err := r.keySpoof(ctx); err != nil {
			return err
		}
	}
	return nil
}

func filterPhase(res []record.Result, phase string) []record.Result {
	var out []record.Result
	for _, x := range res {
		if x.Phase == phase {
			out = append(out, x)
		}
	}
	return out
}

// burstSends sends quota + extra requests spread evenly over the burst
// spread, from at.
func (r *suiteRun) burstSends(c int, at time.Duration, phase string) []patterns.Send {
	n := r.p.q + r.p.extra
	out := make([]patterns.Send, n)
	for i := range out {
		out[i] = patterns.Send{At: at + time.Duration(int64(r.p.spread)*int64(i)/n), Client: c, Phase: phase}
	}
	return out
}

// raceSends consumes all but the available part of the quota (when it is
// large) and releases the batch at at.
func (r *suiteRun) raceSends(c int, at time.Duration) []patterns.Send {
	avail, batch := r.p.raceSize()
	var out []patterns.Send
	pre := r.p.q - avail
	for i := range pre {
		out = append(out, patterns.Send{At: at + time.Duration(i)*time.Millisecond, Client: c, Phase: CheckRace})
	}
	rel := at + time.Duration(pre)*time.Millisecond + 100*time.Millisecond
	for range batch {
		out = append(out, patterns.Send{At: rel, Client: c, Phase: CheckRace, Batch: 1})
	}
	return out
}
