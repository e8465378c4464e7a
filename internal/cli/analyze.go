package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdAnalyze(f, g, nil) })
}

// AnalyzeOptions are the flags of `rlprobe analyze`.
type AnalyzeOptions struct {
	f       *Factory
	g       *GlobalOptions
	Files   []string
	Policy  session.PolicySpec
	Verdict verdictOptions
	Out     string // --out: a new record file with the verdict
	Force   bool
	Append  bool // --append: add the verdict to the single input
}

// NewCmdAnalyze builds `rlprobe analyze`; runF (nil: the real one) runs it.
func NewCmdAnalyze(f *Factory, g *GlobalOptions, runF func(context.Context, *AnalyzeOptions) error) *cobra.Command {
	o := &AnalyzeOptions{f: f, g: g}
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
	addPolicyFlags(cmd, &o.Policy)
	addVerdictFlags(cmd, &o.Verdict)
	fl := cmd.Flags()
	fl.StringVar(&o.Out, "out", "", "write a new record `FILE`: the merged inputs with the verdict")
	fl.BoolVar(&o.Force, "force", false, "replace the --out file if it exists")
	fl.BoolVar(&o.Append, "append", false, "add the verdict to the one input file")
	return cmd
}

// check refuses contradictory output flags.
func (o *AnalyzeOptions) check() error {
	switch {
	case o.Out != "" && o.Append:
		return Usagef("--out and --append are exclusive: write a new file or add to the input")
	case o.Append && (len(o.Files) != 1 || o.Files[0] == "-"):
		return Usagef("--append adds the verdict to one input file: give exactly one (not stdin), or use --out FILE")
	case o.Force && o.Out == "":
		return Usagef("--force goes with --out FILE")
	}
	return nil
}

func analyzeRun(_ context.Context, o *AnalyzeOptions) error {
	f, g := o.f, o.g
	if err := o.check(); err != nil {
		return err
	}
	pol, err := o.Policy.Resolve()
	if err != nil {
		return err
	}
	failOn, err := verify.ParseSeverity(o.Verdict.failOn)
	if err != nil {
		return Usagef("--fail-on: must be info, warning or error")
	}
	runs, named, err := session.ReadRecords(f.IO.In, o.Files...)
	if err != nil {
		return err
	}
	m := record.Merge(runs...)
	for _, w := range m.Warnings {
		if !g.Quiet {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", w)
		}
	}
	if pol == nil {
		if pol, err = session.RecordedPolicy(m, &o.Policy); err != nil {
			return err
		}
	}
	recordFile := ""
	if len(named) == 1 && len(o.Files) == 1 {
		recordFile = named[0]
	}
	rep := verify.Analyze(m, *pol, verify.Options{
		Schema: verify.SchemaAnalyze, Tool: f.tool(), FailOn: failOn, RecordFile: recordFile, Time: f.now(),
	})
	switch {
	case o.Out != "":
		if err := session.WriteMerged(o.Out, o.Force, named, runs, m, &rep); err != nil {
			return err
		}
	case o.Append:
		if err := session.AppendFinding(recordFile, rep); err != nil {
			return UsageErr(err)
		}
	}
	cmdErr := writeReports(f, o.Verdict, m, named, &rep)
	if perr := printVerdict(f, g, &rep); perr != nil && cmdErr == nil {
		cmdErr = perr
	}
	if !rep.Complete && cmdErr == nil && !rep.Failed() {
		fmt.Fprintln(f.IO.ErrOut, "rlprobe: the recorded run did not complete (interrupted, aborted or budget spent)")
	}
	return session.VerdictError(&rep, cmdErr)
}
