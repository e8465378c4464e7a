package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdRun(f, g, nil) })
}

// RunOptions are the flags of `rlprobe run`.
type RunOptions struct {
	f      *Factory
	g      *GlobalOptions
	Target targetOptions
	// Plan holds --plan, --pattern and the pattern flags.
	Plan session.PlanSpec
}

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
			o.Plan.Set = changedFlags(cmd, session.PatternFlags, "--")
			return runOr(runF, runRun)(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	ph := &o.Plan.Phase
	fl.StringVar(&o.Plan.Pattern, "pattern", "", "pattern `NAME`: "+strings.Join(patterns.Patterns, ", "))
	fl.StringVar(&o.Plan.File, "plan", "", "plan `FILE` (YAML or JSON) of phases; exclusive with --pattern")
	fl.Var(&ph.Rate, "rate", "steady: requests per second (5/s, 300/m, 2r/s)")
	fl.Var(&ph.Duration, "duration", "steady, ramp: how long")
	fl.IntVar(&ph.Count, "count", 0, "burst: requests; edge: requests on each side; race: requests per client")
	fl.Var(&ph.Spread, "spread", "burst: spread the requests evenly over this long (default: all at once)")
	fl.StringVar(&ph.At, "at", "", "edge: where the window edge is: a `TIME` (RFC 3339, 12:00:05) or an offset (2s)")
	fl.Var(&ph.Period, "period", "edge: aim at the next edge of windows this long, aligned to the Unix epoch")
	fl.Var(&ph.EdgePhase, "phase", "edge: windows start this long after each multiple of --period")
	fl.Var(&ph.Gap, "gap", "edge: time between the requests before and after the edge")
	fl.Var(&ph.Every, "every", "recovery: one request this often")
	fl.Var(&ph.Span, "span", "recovery: for this long")
	fl.StringVar((*string)(&ph.RaceMode), "race-mode", "", "race: barrier (default), last-byte or single-packet (HTTP/2)")
	fl.Var(&ph.From, "from", "ramp: rate at the start")
	fl.Var(&ph.To, "to", "ramp: rate at the end")
	fl.Var(&ph.Jitter, "jitter", "delay each request by a seeded random amount below this (not for race)")
	addTargetFlags(cmd, &o.Target)
	return cmd
}

func runRun(ctx context.Context, o *RunOptions) error {
	f, g := o.f, o.g
	var sess *session.Session
	prog := sessionProgress(f, g, &sess)
	sess, err := o.Target.newSession(f, g, prog)
	if err != nil {
		return err
	}
	cfg := sess.Config()
	plan, err := o.Plan.Resolve(cfg.Clients, cfg.ClientsSet || cfg.ClientsImplied)
	if err != nil {
		return err
	}
	if o.Target.DryRun {
		sched, err := sess.Schedule(plan)
		if err != nil {
			return err
		}
		doc := sess.RunDryRun(plan, sched)
		return printDryRun(f, g, &doc)
	}
	sum, err := sess.Run(ctx, plan)
	prog.stop()
	if run := sess.Record(); run == nil || run.End == nil {
		return err
	}
	doc, perr := sess.RunDoc(plan, sum)
	if perr == nil && g.JSON {
		perr = writeJSON(f.IO.Out, doc)
	} else if perr == nil {
		perr = report.WriteRun(f.IO.Out, &doc, probe.LateThreshold)
	}
	if perr != nil && err == nil {
		err = perr
	}
	return err
}
