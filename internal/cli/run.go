package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdRun(f, g, nil) })
}

// RunOptions are the flags of `rlprobe run`.
type RunOptions struct {
	f        *Factory
	g        *GlobalOptions
	Target   targetOptions
	Pattern  string
	PlanFile string
	// Phase holds the pattern flags, named like a plan's keys.
	Phase patterns.Phase
	// patternSet are the pattern flags given.
	patternSet []string
}

// patternFlags are run's pattern flags; a plan uses the same names as keys.
var patternFlags = []string{"rate", "duration", "count", "spread", "at", "period", "phase", "gap",
	"every", "span", "race-mode", "from", "to", "jitter"}

// NewCmdRun builds `rlprobe run`; runF (nil: the real one) runs it.
func NewCmdRun(f *Factory, g *GlobalOptions, runF func(context.Context, *RunOptions) error) *cobra.Command {
	o := &RunOptions{f: f, g: g, Target: newTargetOptions("run")}
	cmd := &cobra.Command{
		Use:     "run URL... (--pattern NAME | --plan FILE)",
		Short:   "Fire a traffic pattern or plan at a target, record every request, summarise",
		Long:    helpLong("run"),
		Example: helpExample("run"),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Target.targetChanged(cmd, args)
			o.patternSet = changedFlags(cmd, patternFlags, "--")
			o.Phase.Pattern = o.Pattern
			return runOr(runF, runRun)(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pattern, "pattern", "", "pattern `NAME`: "+strings.Join(patterns.Patterns, ", "))
	fl.StringVar(&o.PlanFile, "plan", "", "plan `FILE` (YAML or JSON) of phases; exclusive with --pattern")
	fl.Var(&o.Phase.Rate, "rate", "steady: requests per second (5/s, 300/m, 2r/s)")
	fl.Var(&o.Phase.Duration, "duration", "steady, ramp: how long")
	fl.IntVar(&o.Phase.Count, "count", 0, "burst: requests; edge: requests on each side; race: requests per client")
	fl.Var(&o.Phase.Spread, "spread", "burst: spread the requests evenly over this long (default: all at once)")
	fl.StringVar(&o.Phase.At, "at", "", "edge: where the window edge is: a `TIME` (RFC 3339, 12:00:05) or an offset (2s)")
	fl.Var(&o.Phase.Period, "period", "edge: aim at the next edge of windows this long, aligned to the Unix epoch")
	fl.Var(&o.Phase.EdgePhase, "phase", "edge: windows start this long after each multiple of --period")
	fl.Var(&o.Phase.Gap, "gap", "edge: time between the requests before and after the edge")
	fl.Var(&o.Phase.Every, "every", "recovery: one request this often")
	fl.Var(&o.Phase.Span, "span", "recovery: for this long")
	fl.StringVar((*string)(&o.Phase.RaceMode), "race-mode", "", "race: barrier (default), last-byte or single-packet (HTTP/2)")
	fl.Var(&o.Phase.From, "from", "ramp: rate at the start")
	fl.Var(&o.Phase.To, "to", "ramp: rate at the end")
	fl.Var(&o.Phase.Jitter, "jitter", "delay each request by a seeded random amount below this (not for race)")
	addTargetFlags(cmd, &o.Target)
	return cmd
}

// buildPlan makes the plan of the run from --plan or the pattern flags;
// clients is the number of client identities and chosen whether the user
// chose it. Its problems are usage errors.
func (o *RunOptions) buildPlan(clients int, chosen bool) (*patterns.Plan, error) {
	switch {
	case o.PlanFile != "" && o.Pattern != "":
		return nil, Usagef("--plan and --pattern are exclusive: a plan names the pattern of each phase")
	case o.PlanFile != "":
		if len(o.patternSet) > 0 {
			return nil, Usagef("%s: pattern flags go with --pattern; in a plan file they are keys of its phases", strings.Join(o.patternSet, ", "))
		}
		file, err := os.Open(o.PlanFile)
		if err != nil {
			return nil, UsageErr(fmt.Errorf("--plan: %w", err))
		}
		defer file.Close()
		plan, err := patterns.LoadPlan(file, o.PlanFile)
		if err != nil {
			return nil, UsageErr(err)
		}
		for i := range plan.Phases {
			if chosen && plan.Phases[i].Pattern != "" && plan.Phases[i].Clients == 0 {
				plan.Phases[i].Clients = clients
			}
		}
		return plan, nil
	case o.Pattern == "":
		return nil, Usagef("give --pattern NAME (%s) or --plan FILE", strings.Join(patterns.Patterns, ", "))
	}
	ph := o.Phase
	if chosen || clients > 1 {
		ph.Clients = clients
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{ph}}
	if err := plan.Validate(); err != nil {
		return nil, UsageErr(flagWords(err, o.Pattern))
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

func runRun(ctx context.Context, o *RunOptions) error {
	f, g := o.f, o.g
	var sess *session.Session
	prog := runProgress(f, g, &sess)
	sess, err := o.Target.newSession(f, g, prog)
	if err != nil {
		return err
	}
	cfg := sess.Config()
	plan, err := o.buildPlan(cfg.Clients, cfg.ClientsSet || cfg.ClientsImplied)
	if err != nil {
		return err
	}
	if o.Target.DryRun {
		sched, err := sess.Schedule(plan)
		if err != nil {
			return err
		}
		return printRunDryRun(f, g, sess, plan, sched)
	}
	sum, err := sess.Run(ctx, plan)
	prog.stop()
	run := sess.Record()
	if run == nil || run.End == nil {
		return err
	}
	if perr := printRunSummary(f, g, sess, plan, sum, run.End.Reason); perr != nil && err == nil {
		err = perr
	}
	return err
}

// runProgress reports a run: a line as each phase of the schedule becomes
// due, and the status line with the counts so far and, on a terminal, the
// time left.
func runProgress(f *Factory, g *GlobalOptions, sess **session.Session) *reporter {
	var p *reporter
	p = newReporter(f, g, func(elapsed time.Duration) string {
		_, s := p.plan()
		c := (*sess).Counts()
		line := fmt.Sprintf("%d/%d done · %d accepted · %d rejected · %d other · %d errors · %d late",
			c.Done, len(s.Sends), c.Accepted, c.Rejected, c.Other, c.Errors, c.Late)
		if p.tty {
			line += fmt.Sprintf(" · %s left", units.HumanDuration(max(s.Duration-elapsed, 0).Round(time.Second)))
		}
		return line
	})
	next := 0 // the next phase to announce; only the reporter's goroutine touches it
	p.tick = func(elapsed time.Duration) {
		_, s := p.plan()
		for next < len(s.Phases) && s.Phases[next].Offset <= elapsed {
			ph := s.Phases[next]
			next++
			if ph.Pattern == patterns.PatternPause {
				p.line("phase %s: %s", ph.Name, units.HumanDuration(ph.Duration))
			} else {
				p.line("phase %s: %d requests over %s", ph.Name, ph.Requests, units.HumanDuration(ph.Duration))
			}
		}
	}
	return p
}

// printRunSummary prints the summary on stdout: a table, or the JSON
// document with --json.
func printRunSummary(f *Factory, g *GlobalOptions, sess *session.Session, plan *patterns.Plan, sum probe.Summary, reason string) error {
	path := sess.RecordFile()
	if g.JSON {
		planJSON, err := json.Marshal(plan)
		if err != nil {
			return err
		}
		seed := sess.Config().Seed
		return writeJSON(f.IO.Out, record.RunDoc{
			Schema: record.SchemaRun, Tool: f.tool(),
			Complete: reason == record.ReasonCompleted, Reason: reason,
			Targets: sess.Targets(), Seed: &seed, Plan: planJSON,
			RunSummary: sum, RecordFile: path,
		})
	}
	w := f.IO.Out
	fmt.Fprintf(w, "rlprobe run: %d of %d requests sent to %s in %s (%s)\n\n",
		sum.Sent, sum.Scheduled, strings.Join(sess.Targets(), ", "), units.HumanDuration(units.Seconds(sum.DurationS)), reason)
	if err := report.WriteRunSummary(w, sum, probe.LateThreshold); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "record file: %s\n", path)
	return err
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
