package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
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
	cmd.Flags().StringVar(&o.Expect, "expect", "", "exit 1 unless the inferred family is `FAMILY`: "+strings.Join(infer.FamilyNames(), ", "))
	addTargetFlags(cmd, &o.Target)
	cmd.Flags().Lookup("start-at").Usage = startAtSuiteUsage
	return cmd
}

func inferRun(ctx context.Context, o *InferOptions) error {
	f, g := o.f, o.g
	var expect infer.Family
	if o.Expect != "" {
		fam, err := infer.ParseFamily(o.Expect)
		if err != nil {
			return Usagef("--expect: %v", err)
		}
		expect = fam
	}
	var sess *session.Session
	prog := sessionProgress(f, g, &sess)
	sess, err := o.Target.newSession(f, g, prog)
	if err != nil {
		return err
	}
	if o.Target.DryRun {
		doc := sess.InferDryRun(expect)
		return printDryRun(f, g, &doc)
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
