package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/units"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newRunCmd(f, g) })
}

// runOptions are the flags of `rlprobe run`.
type runOptions struct {
	target   *targetOptions
	pattern  string
	planFile string
	// phase holds the pattern flags, named like a plan's keys.
	phase patterns.Phase
	// rate etc. are the flag targets of the typed phase fields.
	rate, from, to                           float64
	duration, spread, period, edgePhase, gap time.Duration
	every, span, jitter                      time.Duration
	raceMode                                 string
	// now reads the clock (tests may fix it).
	now func() time.Time
}

// patternFlags are run's pattern flags; a plan uses the same names as keys.
var patternFlags = []string{"rate", "duration", "count", "spread", "at", "period", "phase", "gap",
	"every", "span", "race-mode", "from", "to", "jitter"}

func newRunCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &runOptions{target: newTargetOptions("run"), now: time.Now}
	cmd := &cobra.Command{
		Use:   "run URL... (--pattern NAME | --plan FILE)",
		Short: "Fire a traffic pattern or plan at a target, record every request, summarise",
		Long: `Fire a traffic pattern (or a plan of several) at the target, open loop:
requests go out on schedule whatever the target's latency. Every request is
recorded to --out (JSON Lines) as it completes; the summary gives the counts
per outcome and status, accepted per client, latency per status, pacing
error, late sends and, for races, the spread of the server's arrival times.

Patterns and their flags:
  steady    --rate R --duration D       R requests per second for D
  burst     --count N [--spread D]      N requests at once (or evenly over D)
  edge      --count N (--at TIME | --period D [--phase D]) --gap D
                                        N requests gap/2 before a window edge
                                        and N gap/2 after it
  recovery  --every D --span D          one request every D for span D
  race      --count M [--race-mode barrier|last-byte|single-packet]
                                        M requests per client released together
  ramp      --from R --to R --duration D  rate changing linearly from R to R

With --clients N every client plays the whole pattern (a steady 5/s for 3
clients offers 15/s). A plan file (YAML or JSON) sequences phases, with the
flag names as keys:

  version: 1
  phases:
    - {pattern: burst, count: 8}
    - {pause: 2s}
    - {pattern: steady, rate: 5/s, duration: 10s}

Several URLs are replicas of one service: each client goes round-robin over
them. A plan over a safety cap (--max-requests, --max-duration, --max-rate)
is refused before anything is sent. Ctrl-C stops sending, keeps what was
recorded and prints the partial summary (exit 3), as does a run where more
than 5% of the answers are neither accepted (2xx) nor rejected (429/503).`,
		Example: `  rlprobe run http://127.0.0.1:8080/ --pattern burst --count 8
  rlprobe run https://api.example.com/v1/x --pattern steady --rate 5/s --duration 30s -H "Authorization: Bearer $TOKEN"
  rlprobe run http://127.0.0.1:8080/ --pattern race --clients 20 --count 1 --race-mode last-byte
  rlprobe run http://127.0.0.1:8080/ --pattern edge --count 5 --period 1m --gap 400ms
  rlprobe run http://127.0.0.1:8080/ --plan plan.yaml --dry-run`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), f, g, args, cmd.Flags().Changed)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.pattern, "pattern", "", "pattern `NAME`: "+strings.Join(patterns.Patterns, ", "))
	fl.StringVar(&o.planFile, "plan", "", "plan `FILE` (YAML or JSON) of phases; exclusive with --pattern")
	fl.Var(RateValue(&o.rate), "rate", "steady: requests per second (5/s, 300/m, 2r/s)")
	fl.Var(DurationValue(&o.duration), "duration", "steady, ramp: how long")
	fl.IntVar(&o.phase.Count, "count", 0, "burst: requests; edge: requests on each side; race: requests per client")
	fl.Var(DurationValue(&o.spread), "spread", "burst: spread the requests evenly over this long (default: all at once)")
	fl.StringVar(&o.phase.At, "at", "", "edge: where the window edge is: a `TIME` (RFC 3339, 12:00:05) or an offset (2s)")
	fl.Var(DurationValue(&o.period), "period", "edge: aim at the next edge of windows this long, aligned to the Unix epoch")
	fl.Var(DurationValue(&o.edgePhase), "phase", "edge: windows start this long after each multiple of --period")
	fl.Var(DurationValue(&o.gap), "gap", "edge: time between the requests before and after the edge")
	fl.Var(DurationValue(&o.every), "every", "recovery: one request this often")
	fl.Var(DurationValue(&o.span), "span", "recovery: for this long")
	fl.StringVar(&o.raceMode, "race-mode", "", "race: barrier (default), last-byte or single-packet (HTTP/2)")
	fl.Var(RateValue(&o.from), "from", "ramp: rate at the start")
	fl.Var(RateValue(&o.to), "to", "ramp: rate at the end")
	fl.Var(DurationValue(&o.jitter), "jitter", "delay each request by a seeded random amount below this (not for race)")
	addTargetFlags(cmd, o.target)
	return cmd
}

// buildPlan makes the plan of the run from --plan or the pattern flags.
// Its problems are usage errors.
func (o *runOptions) buildPlan(changed func(string) bool, t *target) (*patterns.Plan, error) {
	var set []string
	for _, name := range patternFlags {
		if changed(name) {
			set = append(set, "--"+name)
		}
	}
	switch {
	case o.planFile != "" && o.pattern != "":
		return nil, Usagef("--plan and --pattern are exclusive: a plan names the pattern of each phase")
	case o.planFile != "":
		if len(set) > 0 {
			return nil, Usagef("%s: pattern flags go with --pattern; in a plan file they are keys of its phases", strings.Join(set, ", "))
		}
		file, err := os.Open(o.planFile)
		if err != nil {
			return nil, UsageErr(fmt.Errorf("--plan: %w", err))
		}
		defer file.Close()
		plan, err := patterns.LoadPlan(file, o.planFile)
		if err != nil {
			return nil, UsageErr(err)
		}
		if t.clientsSet {
			for i := range plan.Phases {
				if plan.Phases[i].Pattern != "" && plan.Phases[i].Clients == 0 {
					plan.Phases[i].Clients = t.clients
				}
			}
		}
		return plan, nil
	case o.pattern == "":
		return nil, Usagef("give --pattern NAME (%s) or --plan FILE", strings.Join(patterns.Patterns, ", "))
	}
	ph := o.phase
	ph.Pattern = o.pattern
	ph.Rate, ph.From, ph.To = patterns.Rate(o.rate), patterns.Rate(o.from), patterns.Rate(o.to)
	ph.Duration, ph.Spread, ph.Gap = patterns.Duration(o.duration), patterns.Duration(o.spread), patterns.Duration(o.gap)
	ph.Period, ph.EdgePhase = patterns.Duration(o.period), patterns.Duration(o.edgePhase)
	ph.Every, ph.Span, ph.Jitter = patterns.Duration(o.every), patterns.Duration(o.span), patterns.Duration(o.jitter)
	ph.RaceMode = patterns.RaceMode(o.raceMode)
	if t.clientsSet || t.clients > 1 {
		ph.Clients = t.clients
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{ph}}
	if err := plan.Validate(); err != nil {
		return nil, UsageErr(flagWords(err, o.pattern))
	}
	return plan, nil
}

// flagWords rewrites the problems of a plan built from flags in the words
// of the flags: "phase 1 (steady): rate is required" becomes
// "--pattern steady: --rate is required".
func flagWords(err error, pattern string) error {
	var pe *patterns.PlanError
	if !errors.As(err, &pe) {
		return err
	}
	var msgs []string
	for _, p := range pe.Problems {
		m := p.Msg
		m = strings.TrimPrefix(m, "phase 1 ("+pattern+"): ")
		m = strings.TrimPrefix(m, "phase 1: ")
		for _, k := range append(slices.Clone(patternFlags), "clients") {
			if strings.HasPrefix(m, k+" ") {
				m = "--" + m
				break
			}
		}
		m = strings.ReplaceAll(m, "pattern \"", "--pattern \"")
		msgs = append(msgs, "--pattern "+pattern+": "+m)
	}
	if len(msgs) == 1 {
		return errors.New(msgs[0])
	}
	return fmt.Errorf("%d problems:\n  %s", len(msgs), strings.Join(msgs, "\n  "))
}

func (o *runOptions) run(ctx context.Context, f *Factory, g *GlobalOptions, urls []string, changed func(string) bool) error {
	now := o.now()
	t, err := o.target.resolve(f, urls, now)
	if err != nil {
		return err
	}
	plan, err := o.buildPlan(changed, t)
	if err != nil {
		return err
	}
	start := t.startAt
	if start.IsZero() && plan.NeedsStart() {
		start = now.Add(startLead)
	}
	sched, err := plan.Schedule(t.seed, start)
	if err != nil {
		return UsageErr(err)
	}
	if sched.Start.IsZero() {
		sched.Start = t.startAt
	}
	if err := t.checkCaps(sched, plan.MaxRate()); err != nil {
		return err
	}
	if o.target.dryRun {
		return printDryRun(f, g, t, plan, sched)
	}
	eng, rec, zero, err := t.begin(ctx, f, g, planSummary(t, sched), sched.RaceMode, plan)
	if err != nil {
		return err
	}
	defer eng.Close()
	sink := newRunSink(rec, 0)
	prog := newRunProgress(f, g, sink, sched)
	runner, err := scenario.NewEngine(scenario.EngineConfig{
		Probe: eng, Sink: sink, Zero: zero, RaceMode: sched.RaceMode,
		OnBegin: func(begin time.Time, _ patterns.Schedule) { prog.start(begin) },
	})
	if err != nil {
		return err
	}
	results, runErr := runner.Run(ctx, sched)
	prog.stop()
	// Results the engine could not pass to the sink (after it aborted the
	// run on too many "other" answers) still go to the file.
	werr := sink.writeMissing(results)

	sent := 0
	for _, r := range results {
		if r.Outcome != record.OutcomeNotSent {
			sent++
		}
	}
	reason, cmdErr := runError(runErr, rec, sent, len(sched.Sends))
	if runErr != nil && len(results) == 0 && !errors.Is(runErr, probe.ErrUsage) {
		// Refused before sending (a start already past): nothing recorded.
		cmdErr = Unreachablef("%v", runErr)
	}
	if sink.tooManyOther.Load() {
		reason = record.ReasonAborted
		cmdErr = Unreachablef("aborted: %s; the results so far are in %s\nhint: %s", sink.otherReport(), rec.path, sink.otherHint())
	}
	if cerr := rec.close(reason, int64(len(results)), int64(sent)); cerr != nil && cmdErr == nil {
		cmdErr = cerr
	}
	if werr != nil && cmdErr == nil {
		cmdErr = fmt.Errorf("write %s: %w", rec.path, werr)
	}
	sum := probe.Summarize(results)
	if err := printRunSummary(f, g, t, plan, sched, sum, reason, rec.path); err != nil && cmdErr == nil {
		cmdErr = err
	}
	if cmdErr == nil && sum.Other*otherShareDen > sum.Responses && sum.Other > 0 {
		cmdErr = Unreachablef("%s\nhint: %s", sink.otherReport(), sink.otherHint())
	}
	return cmdErr
}

// planSummary describes what is about to happen (printed on a terminal
// before the first request, and by the confirmation question).
func planSummary(t *target, s patterns.Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets: %s\n", strings.Join(redactedTargets(t), ", "))
	fmt.Fprintf(&b, "caps: %d requests, %v, %s\n", t.o.maxRequests, t.o.maxDuration, units.FormatRate(t.o.maxRate))
	fmt.Fprintf(&b, "plan: %d requests over %v", len(s.Sends), s.Duration)
	for _, ph := range s.Phases {
		if ph.Pattern == patterns.PatternPause {
			fmt.Fprintf(&b, "; pause %v", ph.Duration)
			continue
		}
		fmt.Fprintf(&b, "; %s: %d requests", ph.Name, ph.Requests)
	}
	if !s.Start.IsZero() {
		fmt.Fprintf(&b, "; starting at %s", s.Start.Format(time.RFC3339Nano))
	}
	return b.String()
}

func redactedTargets(t *target) []string {
	out := make([]string, len(t.urls))
	for i, u := range t.urls {
		out[i] = t.redactor.URL(u)
	}
	return out
}

// runSink counts results as the engine writes them to the record file,
// for the progress line and the "other" guard. The engine calls
// WriteResult from one goroutine at a time; the counters are read
// concurrently by the progress reporter.
type runSink struct {
	w        probe.Sink
	declared int

	done, sent, accepted, rejected, other, errs, late atomic.Int64
	tooManyOther                                      atomic.Bool

	mu          sync.Mutex
	written     map[int64]bool // seqs written
	otherStatus map[int]int
}

var errTooManyOther = errors.New("more than 5% of the answers were neither accepted nor rejected")

func newRunSink(w probe.Sink, declared int) *runSink {
	return &runSink{w: w, declared: declared, written: map[int64]bool{}, otherStatus: map[int]int{}}
}

// WriteResult writes r to the record file and counts it. Once more than 5%
// of at least otherMin answers are "other", it returns errTooManyOther,
// which makes the engine abort the run.
func (s *runSink) WriteResult(r record.Result) error {
	if err := s.w.WriteResult(r); err != nil {
		return err
	}
	s.mu.Lock()
	s.written[r.Seq] = true
	s.mu.Unlock()
	s.done.Add(1)
	switch r.Outcome {
	case record.OutcomeResponse:
		s.sent.Add(1)
		switch outcomeClass(r.Status, s.declared) {
		case "accepted":
			s.accepted.Add(1)
		case "rejected":
			s.rejected.Add(1)
		default:
			s.other.Add(1)
			s.mu.Lock()
			s.otherStatus[r.Status]++
			s.mu.Unlock()
		}
	case record.OutcomeError:
		s.sent.Add(1)
		s.errs.Add(1)
	}
	if r.Sent != 0 && time.Duration(r.Sent-r.Sched) > probe.LateThreshold {
		s.late.Add(1)
	}
	answers := s.accepted.Load() + s.rejected.Load() + s.other.Load()
	if o := s.other.Load(); o >= otherMin && o*otherShareDen > answers && !s.tooManyOther.Swap(true) {
		return errTooManyOther
	}
	return nil
}

// writeMissing writes the results the sink never saw (the engine stops
// writing to a sink that failed).
func (s *runSink) writeMissing(results []record.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		if !s.written[r.Seq] {
			if err := s.w.WriteResult(r); err != nil {
				return err
			}
			s.written[r.Seq] = true
		}
	}
	return nil
}

// otherReport says how many answers were "other", by status.
func (s *runSink) otherReport() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	codes := make([]int, 0, len(s.otherStatus))
	for c := range s.otherStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d ×%d", c, s.otherStatus[c]))
	}
	answers := s.accepted.Load() + s.rejected.Load() + s.other.Load()
	return fmt.Sprintf("%d of %d answers were neither accepted (2xx) nor rejected (429, 503): %s",
		s.other.Load(), answers, strings.Join(parts, ", "))
}

// otherHint suggests a fix for the most frequent "other" status.
func (s *runSink) otherHint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	top, n := 0, 0
	for c, k := range s.otherStatus {
		if k > n || (k == n && c < top) {
			top, n = c, k
		}
	}
	return statusHint(top)
}

// newRunProgress reports a run through the shared reporter: a line as each
// phase of s becomes due, and the status line with the counts so far and,
// on a terminal, the time left.
func newRunProgress(f *Factory, g *GlobalOptions, sink *runSink, s patterns.Schedule) *reporter {
	total := len(s.Sends)
	var p *reporter
	p = newReporter(f, g, func(elapsed time.Duration) string {
		line := fmt.Sprintf("%d/%d done · %d accepted · %d rejected · %d other · %d errors · %d late",
			sink.done.Load(), total, sink.accepted.Load(), sink.rejected.Load(), sink.other.Load(),
			sink.errs.Load(), sink.late.Load())
		if p.tty {
			line += fmt.Sprintf(" · %v left", max(s.Duration-elapsed, 0).Round(time.Second))
		}
		return line
	})
	next := 0 // the next phase to announce; only the reporter's goroutine touches it
	p.tick = func(elapsed time.Duration, final bool) {
		for next < len(s.Phases) && s.Phases[next].Offset <= elapsed {
			ph := s.Phases[next]
			next++
			if ph.Pattern == patterns.PatternPause {
				p.line("phase %s: %v", ph.Name, ph.Duration)
			} else {
				p.line("phase %s: %d requests over %v", ph.Name, ph.Requests, ph.Duration)
			}
		}
	}
	return p
}

// printRunSummary prints the summary on stdout: a table, or the JSON
// document with --json.
func printRunSummary(f *Factory, g *GlobalOptions, t *target, plan *patterns.Plan, s patterns.Schedule,
	sum probe.Summary, reason, path string) error {
	if g.JSON {
		planJSON, err := json.Marshal(plan)
		if err != nil {
			return err
		}
		seed := t.seed
		return writeJSON(f.IO.Out, record.RunDoc{
			Schema: record.SchemaRun, Tool: "rlprobe " + f.Version,
			Complete: reason == record.ReasonCompleted, Reason: reason,
			Targets: redactedTargets(t), Seed: &seed, Plan: planJSON,
			RunSummary: sum, RecordFile: path,
		})
	}
	w := f.IO.Out
	fmt.Fprintf(w, "rlprobe run: %d of %d requests sent to %s in %s (%s)\n\n",
		sum.Sent, sum.Scheduled, strings.Join(redactedTargets(t), ", "), fmtSeconds(sum.DurationS), reason)
	writeSummaryTables(w, sum, s.Batches() > 0)
	fmt.Fprintf(w, "record file: %s\n", path)
	return nil
}

// writeSummaryTables prints the outcome, client, pacing and race parts of
// a summary.
func writeSummaryTables(w io.Writer, sum probe.Summary, races bool) {
	us := report.FormatMicros
	rows := [][]string{}
	codes := make([]string, 0, len(sum.Statuses))
	for c := range sum.Statuses {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		code, _ := strconv.Atoi(c)
		d := sum.Latency[c]
		rows = append(rows, []string{outcomeClass(code, 0), c, strconv.Itoa(sum.Statuses[c]),
			us(d.P50US), us(d.P90US), us(d.P99US), us(d.MaxUS)})
	}
	for _, k := range sortedKeys(sum.ErrorClasses) {
		rows = append(rows, []string{"error", k, strconv.Itoa(sum.ErrorClasses[k]), "", "", "", ""})
	}
	for _, k := range sortedKeys(sum.NotSentReasons) {
		rows = append(rows, []string{"not-sent", k, strconv.Itoa(sum.NotSentReasons[k]), "", "", "", ""})
	}
	renderTable(w, []string{"outcome", "status", "count", "p50", "p90", "p99", "max"}, rows, 2)
	fmt.Fprintln(w)
	if len(sum.Clients) > 1 {
		rows = rows[:0]
		for _, c := range sum.Clients {
			rows = append(rows, []string{c.Client, strconv.Itoa(c.Sent), strconv.Itoa(c.Accepted), strconv.Itoa(c.Rejected),
				strconv.Itoa(c.Other), strconv.Itoa(c.Errors), strconv.Itoa(c.NotSent)})
		}
		renderTable(w, []string{"client", "sent", "accepted", "rejected", "other", "errors", "not-sent"}, rows, 1)
		fmt.Fprintln(w)
	}
	p := sum.Pacing
	fmt.Fprintf(w, "pacing error (sent − scheduled): p50 %s, p99 %s, max %s; late (> %v): %d of %d\n",
		us(p.P50US), us(p.P99US), us(p.MaxUS), probe.LateThreshold, sum.Late, sum.Sent)
	if races && sum.Races > 0 {
		fmt.Fprintf(w, "races: %s; client spread p50 %s, max %s", plural(sum.Races, "release"),
			us(sum.RaceWroteSpread.P50US), us(sum.RaceWroteSpread.MaxUS))
		if a := sum.RaceArrivalSpread; a.Count > 0 {
			fmt.Fprintf(w, "; server arrival spread p50 %s, max %s", us(a.P50US), us(a.MaxUS))
		} else {
			fmt.Fprint(w, "; no server arrival echo (serve --echo-arrival gives one)")
		}
		fmt.Fprintln(w)
	}
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// renderTable prints a borderless table (report.WriteTable); columns from
// numFrom on are right-aligned.
func renderTable(w io.Writer, header []string, rows [][]string, numFrom int) {
	align := []byte(strings.Repeat("l", len(header)))
	for i := numFrom; i < len(align); i++ {
		align[i] = 'r'
	}
	report.WriteTable(w, header, rows, string(align))
}

func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// writeJSON writes v as an indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dryRunDoc is the --json document of `rlprobe run --dry-run`.
type dryRunDoc struct {
	Schema    string            `json:"schema"`
	Tool      string            `json:"tool"`
	DryRun    bool              `json:"dry_run"`
	Targets   []string          `json:"targets"`
	Seed      uint64            `json:"seed"`
	Plan      *patterns.Plan    `json:"plan"`
	Requests  int               `json:"requests"`
	Clients   int               `json:"clients"`
	DurationS float64           `json:"duration_s"`
	Start     *time.Time        `json:"start,omitempty"`
	Phases    []dryRunPhase     `json:"phases"`
	RaceMode  patterns.RaceMode `json:"race_mode,omitempty"`
	Caps      map[string]any    `json:"caps"`
}

type dryRunPhase struct {
	Name      string  `json:"name"`
	Pattern   string  `json:"pattern"`
	OffsetS   float64 `json:"offset_s"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// printDryRun prints the plan and its duration; nothing is sent.
func printDryRun(f *Factory, g *GlobalOptions, t *target, plan *patterns.Plan, s patterns.Schedule) error {
	if g.JSON {
		doc := dryRunDoc{
			Schema: "rlprobe.run/v1", Tool: "rlprobe " + f.Version, DryRun: true,
			Targets: redactedTargets(t), Seed: t.seed, Plan: plan,
			Requests: len(s.Sends), Clients: s.Clients, DurationS: s.Duration.Seconds(), RaceMode: s.RaceMode,
			Caps: t.capsDoc(),
		}
		if !s.Start.IsZero() {
			st := s.Start.UTC()
			doc.Start = &st
		}
		for _, ph := range s.Phases {
			doc.Phases = append(doc.Phases, dryRunPhase{ph.Name, ph.Pattern, ph.Offset.Seconds(), ph.Duration.Seconds(), ph.Requests})
		}
		return writeJSON(f.IO.Out, doc)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "dry run: nothing sent\ntargets: %s\n", strings.Join(redactedTargets(t), ", "))
	var rows [][]string
	for _, ph := range s.Phases {
		rows = append(rows, []string{ph.Name, ph.Pattern, ph.Offset.String(), ph.Duration.String(), strconv.Itoa(ph.Requests)})
	}
	fmt.Fprintln(w)
	renderTable(w, []string{"phase", "pattern", "starts", "lasts", "requests"}, rows, 2)
	fmt.Fprintf(w, "\n%d requests from %d client(s) over %v", len(s.Sends), s.Clients, s.Duration)
	if s.RaceMode != "" {
		fmt.Fprintf(w, ", races in %s mode", s.RaceMode)
	}
	if !s.Start.IsZero() {
		fmt.Fprintf(w, ", starting at %s", s.Start.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "\nseed %d; caps %d requests, %v, %s\n", t.seed, t.o.maxRequests, t.o.maxDuration, units.FormatRate(t.o.maxRate))
	return nil
}
