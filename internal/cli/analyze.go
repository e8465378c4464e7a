package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/session"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdAnalyze(f, g, nil) })
}

// AnalyzeOptions are the flags of `rlprobe analyze`: the library's
// options (FILE..., the policy flags, --out, --force, --append) and the
// verdict's.
type AnalyzeOptions struct {
	f *Factory
	g *GlobalOptions
	session.AnalyzeOptions
	Verdict verdictOptions
}

// NewCmdAnalyze builds `rlprobe analyze`; runF (nil: the real one) runs it.
func NewCmdAnalyze(f *Factory, g *GlobalOptions, runF func(context.Context, *AnalyzeOptions) error) *cobra.Command {
	o := &AnalyzeOptions{f: f, g: g, AnalyzeOptions: session.AnalyzeOptions{Policy: &session.PolicySpec{}}}
	cmd := &cobra.Command{
		Use:     "analyze FILE... [policy flags]",
		Short:   "Give the check verdicts offline, from record files",
		Long:    helpLong("analyze"),
		Example: helpExample("analyze"),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files = args
			return runOr(runF, analyzeRun)(cmd.Context(), o)
		},
	}
	addPolicyFlags(cmd, o.Policy)
	addVerdictFlags(cmd, &o.Verdict)
	fl := cmd.Flags()
	fl.StringVar(&o.Out, "out", "", "write a new record `FILE`: the merged inputs with the verdict")
	fl.BoolVar(&o.Force, "force", false, "replace the --out file if it exists")
	fl.BoolVar(&o.Append, "append", false, "add the verdict to the one input file")
	return cmd
}

func analyzeRun(_ context.Context, o *AnalyzeOptions) error {
	f, g := o.f, o.g
	opts := o.AnalyzeOptions
	opts.Stdin, opts.FailOn, opts.Tool, opts.Time = f.IO.In, o.Verdict.failOn, f.tool(), f.now()
	if !g.Quiet {
		opts.Warn = func(w string) { fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", w) }
	}
	a, err := session.Analyze(opts)
	if err != nil {
		return err
	}
	rep := a.Report
	cmdErr := writeReports(f, o.Verdict, a.Merged, a.Files, rep)
	if perr := printVerdict(f, g, rep); perr != nil && cmdErr == nil {
		cmdErr = perr
	}
	if !rep.Complete && cmdErr == nil && !rep.Failed() {
		fmt.Fprintln(f.IO.ErrOut, "rlprobe: the recorded run did not complete (interrupted, aborted or budget spent)")
	}
	return session.VerdictError(rep, cmdErr)
}
