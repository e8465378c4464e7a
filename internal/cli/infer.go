package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdInfer(f, g, nil) })
}

// inferLead is how far ahead of the clock infer plans each experiment:
// time for the engine to ready its connections.
const inferLead = 30 * time.Millisecond

// InferOptions are the flags of `rlprobe infer`.
type InferOptions struct {
	f      *Factory
	g      *GlobalOptions
	Target targetOptions
	Expect string
}

// NewCmdInfer builds `rlprobe infer`; runF (nil: the real one) runs it.
func NewCmdInfer(f *Factory, g *GlobalOptions, runF func(context.Context, *InferOptions) error) *cobra.Command {
	o := &InferOptions{f: f, g: g, Target: newTargetOptions("infer")}
	cmd := &cobra.Command{
		Use:     "infer URL... [--expect FAMILY]",
		Short:   "Identify the target's rate-limiting algorithm and its parameters",
		Long:    helpLong("infer"),
		Example: helpExample("infer"),
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Target.targetChanged(cmd, args)
			return runOr(runF, inferRun)(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Expect, "expect", "", "exit 1 unless the inferred family is `FAMILY`: "+familyList())
	addTargetFlags(cmd, &o.Target)
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

func inferRun(ctx context.Context, o *InferOptions) error {
	f, g := o.f, o.g
	var expect infer.Family
	if o.Expect != "" {
		fam, err := infer.ParseFamily(o.Expect)
		if err != nil {
			return Usagef("--expect: %s", strings.TrimPrefix(err.Error(), "infer: "))
		}
		expect = fam
	}
	var sess *session.Session
	prog := suiteProgress(f, g, "infer", &sess)
	sess, err := o.Target.newSession(f, g, prog)
	if err != nil {
		return err
	}
	if o.Target.DryRun {
		return printInferDryRun(f, g, sess, o.Expect)
	}
	inf, err := sess.Infer(ctx, session.InferOptions{Expect: expect, Lead: inferLead})
	prog.stop()
	if inf == nil {
		return err
	}
	var perr error
	if g.JSON {
		perr = writeJSON(f.IO.Out, inf)
	} else {
		perr = report.WriteInference(f.IO.Out, inf, sess.Config().Clients, textOptions(f, g))
	}
	if c := ExitCode(err); perr != nil && c != ExitUsage && c != ExitInternal {
		return perr
	}
	return err
}

// printInferDryRun prints what infer would do; nothing is sent.
func printInferDryRun(f *Factory, g *GlobalOptions, sess *session.Session, expect string) error {
	cfg := sess.Config()
	c := cfg.Caps
	if g.JSON {
		return writeJSON(f.IO.Out, map[string]any{
			"schema": infer.Schema, "tool": f.tool(), "dry_run": true, "targets": sess.Targets(),
			"plan": sess.InferPlan(infer.Family(expect)),
		})
	}
	_, err := fmt.Fprintf(f.IO.Out, "targets: %s\ncaps: %d requests, %v, %s\nplan: adaptive experiments (bursts, recovery scans, designed probes) within 6·W + 30 s\nnothing sent (--dry-run)\n",
		strings.Join(sess.Targets(), ", "), c.MaxRequests, c.MaxDuration, units.FormatRate(c.MaxRate))
	return err
}
