package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newInferCmd(f, g) })
}

// inferLead is how far ahead of the clock infer plans each experiment:
// time for the engine to ready its connections.
const inferLead = 30 * time.Millisecond

// inferOptions are the flags of `rlprobe infer`.
type inferOptions struct {
	target *targetOptions
	expect string
	// now reads the clock (tests may fix it).
	now func() time.Time
}

func newInferCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &inferOptions{target: newTargetOptions("infer"), now: time.Now}
	cmd := &cobra.Command{
		Use:   "infer URL... [--expect FAMILY]",
		Short: "Identify the target's rate-limiting algorithm and its parameters",
		Long: `Identify which algorithm limits the target, with its parameters, by
experiments designed to tell the candidates apart: a burst from idle (the
first count; for a queueing limiter, the latency staircase), a recovery scan
(when quota comes back, and how: at a window edge, mirrored, or one request
at a time), an exhausting burst with a second client identity (is the limit
per client?), then experiments chosen to split the models that still fit —
edge straddles, spread-then-burst, sustained load (do rejected requests
count?). Every model is replayed against every observed arrival; the winner
is the model that reproduces the most outcomes.

Families: fixed-window, sliding-log, sliding-window-counter, token-bucket
(also GCRA and nginx limit_req nodelay, which decide identically),
leaky-bucket-queue (accepted requests are delayed: nginx without nodelay),
none (no limiting observed, with the highest rate reached).

The time budget, printed as soon as the time scale W is known, is 6·W + 30 s
for windows up to 60 s, within --max-duration and --max-requests; when it
ends first the result says "complete": false (exit 3). With several
identities (--clients 2 with --client-header or --source-ips) the key is
tested. --expect FAMILY makes it a gate: exit 1 when another family is
inferred.`,
		Example: `  rlprobe infer http://127.0.0.1:8080/
  rlprobe infer https://api.example.com/v1/x -H "Authorization: Bearer $TOKEN" --expect token-bucket
  rlprobe infer http://127.0.0.1:8080/ --clients 2 --client-header X-Api-Key --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), f, g, args)
		},
	}
	cmd.Flags().StringVar(&o.expect, "expect", "", "exit 1 unless the inferred family is `FAMILY`: "+familyList())
	addTargetFlags(cmd, o.target)
	cmd.Flags().Lookup("start-at").Usage = startAtSuiteUsage
	return cmd
}

func familyList() string {
	names := make([]string, len(infer.Families))
	for i, fam := range infer.Families {
		names[i] = string(fam)
	}
	return strings.Join(names, ", ")
}

// inferPlan is the plan recorded in the header of an infer record file.
type inferPlan struct {
	Command      string  `json:"command"`
	MaxRequests  int     `json:"max_requests"`
	MaxDurationS float64 `json:"max_duration_s"`
	Clients      int     `json:"clients"`
	Expect       string  `json:"expect,omitempty"`
}

func (o *inferOptions) run(ctx context.Context, f *Factory, g *GlobalOptions, urls []string) error {
	var expect infer.Family
	if o.expect != "" {
		fam, err := infer.ParseFamily(o.expect)
		if err != nil {
			return Usagef("--expect: %s", strings.TrimPrefix(err.Error(), "infer: "))
		}
		expect = fam
	}
	t, err := o.target.resolve(f, urls, o.now())
	if err != nil {
		return err
	}
	if testProbeOptions != nil {
		testProbeOptions(&t.probe)
	}
	plan := inferPlan{Command: "infer", MaxRequests: t.o.maxRequests, MaxDurationS: t.o.maxDuration.Seconds(),
		Clients: t.clients, Expect: o.expect}
	summary := fmt.Sprintf("targets: %s\ncaps: %d requests, %v, %s\nplan: adaptive experiments (bursts, recovery scans, designed probes) within 6·W + 30 s",
		strings.Join(redactedTargets(t), ", "), t.o.maxRequests, t.o.maxDuration, units.FormatRate(t.o.maxRate))
	if o.target.dryRun {
		if g.JSON {
			return writeJSON(f.IO.Out, map[string]any{
				"schema": infer.Schema, "tool": "rlprobe " + f.Version, "dry_run": true,
				"targets": redactedTargets(t), "plan": plan,
			})
		}
		_, err := fmt.Fprintf(f.IO.Out, "%s\nnothing sent (--dry-run)\n", summary)
		return err
	}
	eng, rec, zero, err := t.begin(ctx, f, g, summary, "", plan)
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := waitStart(ctx, f, g, t); err != nil {
		return errors.Join(err, rec.close(record.ReasonInterrupted, 0, 0))
	}
	pre, err := preflight(ctx, eng, zero, 0, rec)
	if err != nil {
		if cerr := rec.close(record.ReasonAborted, 1, 1); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	prog := newInferProgress(f, g, t.o.maxDuration)
	runner, err := scenario.NewEngine(scenario.EngineConfig{Probe: eng, Sink: rec, Zero: zero, OnResult: prog.traffic.onResult})
	if err != nil {
		return err
	}
	prog.start(time.Now())
	runner.AddCounts(1, 1)
	keyName := infer.KeyUnknown
	switch {
	case t.probe.ClientHeader != "":
		keyName = "header:" + t.probe.ClientHeader
	case len(t.probe.SourceIPs) > 0:
		keyName = "ip"
	}
	inf, inferErr := infer.Infer(ctx, runner, infer.Options{
		Origin:      zero,
		Clients:     t.clients,
		KeyName:     keyName,
		MaxRequests: max(t.o.maxRequests-1, 1),
		MaxDuration: t.o.maxDuration,
		Prior:       []record.Result{pre},
		Lead:        inferLead,
		OnBudget:    prog.onBudget,
		OnPhase:     prog.onPhase,
		Tool:        "rlprobe " + f.Version,
	})
	prog.stop()
	scheduled, sent := runner.Counts()
	reason, cmdErr := runError(inferErr, rec, int(sent), int(scheduled))
	if inf != nil {
		inf.RecordFile = rec.path
		if werr := rec.w.WriteInference(inf); werr != nil && cmdErr == nil {
			cmdErr = fmt.Errorf("write %s: %w", rec.path, werr)
		}
		if !inf.Complete && reason == record.ReasonCompleted {
			reason = record.ReasonBudget
		}
	}
	if cerr := rec.close(reason, scheduled, sent); cerr != nil && cmdErr == nil {
		cmdErr = cerr
	}
	if inf == nil {
		return cmdErr
	}
	if g.JSON {
		err = writeJSON(f.IO.Out, inf)
	} else {
		err = writeInference(f.IO.Out, inf, t.clients)
	}
	if err != nil && cmdErr == nil {
		cmdErr = err
	}
	// Precedence: usage (2) and internal (4) errors are already cmdErr;
	// a mismatch (1) comes before an incomplete run (3).
	if expect != "" && inf.Algorithm != expect && ExitCode(cmdErr) != ExitUsage && ExitCode(cmdErr) != ExitInternal {
		return WithCode(ExitFindings, fmt.Errorf("expected %s, inferred %s (confidence %.1f%%)", expect, inf.Algorithm, inf.Confidence*100))
	}
	if cmdErr == nil && !inf.Complete {
		cmdErr = Unreachablef("the budget ended before the candidates were told apart: the result is incomplete (see %s)", rec.path)
	}
	return cmdErr
}

// inferProgress reports infer through the shared reporter: a line as each
// experiment starts (a repeat of the same experiment is left to the status
// line), one when the budget is known, and the status line with the
// requests done and the time against the budget.
type inferProgress struct {
	*reporter
	traffic traffic

	mu     sync.Mutex
	last   string
	budget time.Duration // the time budget: --max-duration until W is known
}

func newInferProgress(f *Factory, g *GlobalOptions, maxDuration time.Duration) *inferProgress {
	p := &inferProgress{budget: maxDuration}
	p.reporter = newReporter(f, g, func(elapsed time.Duration) string {
		p.mu.Lock()
		budget := p.budget
		p.mu.Unlock()
		return fmt.Sprintf("infer: %s · %s of at most %s", p.traffic.status(), fmtElapsed(elapsed), fmtElapsed(budget))
	})
	return p
}

// onBudget is infer.Options.OnBudget.
func (p *inferProgress) onBudget(window, budget time.Duration) {
	p.mu.Lock()
	p.budget = budget
	p.mu.Unlock()
	p.line("time scale W ≈ %v: budget at most %v (6·W + 30 s)", roundDur(window), roundDur(budget))
}

// onPhase is infer.Options.OnPhase.
func (p *inferProgress) onPhase(name string, sent int) {
	p.mu.Lock()
	repeat := name == p.last
	p.last = name
	p.mu.Unlock()
	if !repeat {
		p.line("infer: %s (%d requests sent)", name, sent)
	}
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// writeInference renders an inference for people; identities is how many
// client identities infer had (an unknown key is explained by it).
func writeInference(w io.Writer, inf *infer.Inference, identities int) error {
	var b strings.Builder
	name := string(inf.Algorithm)
	switch inf.Algorithm {
	case infer.TokenBucket:
		name += " (or GCRA, or nginx limit_req nodelay: they decide alike)"
	case infer.LeakyBucketQueue:
		name += " (accepted requests are queued, as nginx limit_req without nodelay)"
	}
	fmt.Fprintf(&b, "algorithm: %s\n", name)
	var tied []string
	for _, a := range inf.Alternatives {
		if a.Confidence >= inf.Confidence {
			tied = append(tied, string(a.Algorithm))
		}
	}
	if inf.Algorithm == infer.None {
		tied = nil // none is decided by what was never refused, not by a fit
	}
	if len(tied) > 0 {
		fmt.Fprintf(&b, "  undecided: %s fit as well\n", strings.Join(tied, ", "))
	}
	fmt.Fprintf(&b, "confidence: %.1f%% of the outcomes reproduced\n", inf.Confidence*100)
	param := func(label string, p *infer.Param, unit string) {
		if p == nil {
			return
		}
		if p.Low == p.High {
			fmt.Fprintf(&b, "%s: %s%s\n", label, fmtNum(p.Value), unit)
			return
		}
		fmt.Fprintf(&b, "%s: %s%s (fits from %s to %s)\n", label, fmtNum(p.Value), unit, fmtNum(p.Low), fmtNum(p.High))
	}
	param("limit", inf.Params.Limit, " requests")
	param("window", inf.Params.WindowS, " s")
	param("rate", inf.Params.RatePerS, "/s")
	param("capacity", inf.Params.Capacity, "")
	if c := inf.Params.Capacity; c != nil && (inf.Algorithm == infer.TokenBucket || inf.Algorithm == infer.LeakyBucketQueue) {
		fmt.Fprintf(&b, "  (nginx burst=%s)\n", fmtNum(c.Value-1))
	}
	param("served at once", inf.Params.Undelayed, "")
	if u := inf.Params.Undelayed; u != nil {
		fmt.Fprintf(&b, "  (nginx delay=%s)\n", fmtNum(u.Value-1))
	}
	param("queued", inf.Params.Queue, "")
	if inf.MaxRatePerS != nil {
		fmt.Fprintf(&b, "no limiting observed: up to %s accepted requests per second\n", fmtNum(*inf.MaxRatePerS))
	}
	if inf.Alignment != nil {
		fmt.Fprintf(&b, "windows aligned to: %s\n", *inf.Alignment)
	}
	if inf.CountsRejected != nil {
		fmt.Fprintf(&b, "rejected requests count: %v\n", *inf.CountsRejected)
	}
	fmt.Fprintf(&b, "key: %s\n", inf.Key)
	if inf.Key == infer.KeyUnknown {
		if identities < 2 {
			b.WriteString("  (one client identity: --clients 2 with --client-header NAME or --source-ips tests it)\n")
		} else {
			b.WriteString("  (the second identity's requests could not tell a shared quota from one per client)\n")
		}
	}
	if inf.RejectStatus != nil {
		fmt.Fprintf(&b, "reject status: %d\n", *inf.RejectStatus)
	}
	fmt.Fprintf(&b, "headers: %s\n", strings.Join(inf.Headers, ", "))
	switch {
	case !inf.RetryAfter.Sent:
		b.WriteString("Retry-After: not sent\n")
	case inf.RetryAfter.Honest == nil:
		b.WriteString("Retry-After: sent\n")
	case *inf.RetryAfter.Honest:
		b.WriteString("Retry-After: sent, honest\n")
	default:
		b.WriteString("Retry-After: sent, dishonest (a retry at the advertised time fails, or would have passed well before it)\n")
	}
	if len(inf.Alternatives) > 0 {
		b.WriteString("alternatives:\n")
		for _, a := range inf.Alternatives {
			fmt.Fprintf(&b, "  %s (%.1f%%): %s\n", a.Algorithm, a.Confidence*100, a.RuledOutBy)
		}
	}
	fmt.Fprintf(&b, "%d requests in %s", inf.Requests, fmtSeconds(inf.DurationS))
	if !inf.Complete {
		b.WriteString(" — incomplete: the budget ended first")
	}
	fmt.Fprintf(&b, "\nrecord: %s\n", inf.RecordFile)
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtNum formats a number without needless digits: 4, 1.5, 0.3333.
func fmtNum(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
}
