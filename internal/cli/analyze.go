package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
	Policy  policyOptions
	Verdict verdictOptions
	Out     string // --out: a new record file with the verdict
	Force   bool
	Append  bool // --append: add the verdict to the single input
}

// NewCmdAnalyze builds `rlprobe analyze`; runF (nil: the real one) runs it.
func NewCmdAnalyze(f *Factory, g *GlobalOptions, runF func(context.Context, *AnalyzeOptions) error) *cobra.Command {
	o := &AnalyzeOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:   "analyze FILE... [policy flags]",
		Short: "Give the check verdicts offline, from record files",
		Long: `Judge recorded runs against a policy, offline: the verdicts of check, from
the record files of run, check or infer ("-" reads one from stdin).
Several files (one per agent) are merged on one timeline: each agent's clock
offset is removed and its clock uncertainty widens the arrival bounds, so a
window verdict inside that uncertainty is "possible", not "certain".

The policy is the declared one (the same flags as check); without one, the
policy recorded in the file (check records it), else the one the target
advertised in its responses.

analyze never modifies its inputs: it writes its verdict only where told.
--out FILE writes a new record file, the merged inputs with the verdict
(never replacing a file without --force); --append adds the verdict to the
one input, on purpose. Exit codes: 0 pass, 1 a certain finding at or above
--fail-on, 2 usage or unreadable file, 3 a run that did not complete.`,
		Example: `  rlprobe analyze run.jsonl --limit 100 --window 60s
  rlprobe analyze agent1.jsonl agent2.jsonl --rate 10/s --capacity 20 --json
  rlprobe analyze agent1.jsonl agent2.jsonl --limit 10 --window 1s --out merged.jsonl
  rlprobe analyze run.jsonl --limit 100 --window 60s --append
  cat run.jsonl | rlprobe analyze - --policy '"api";q=5;w=2'`,
		Args: cobra.MinimumNArgs(1),
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
	pol, err := o.Policy.resolve(nil)
	if err != nil {
		return err
	}
	failOn, err := verify.ParseSeverity(o.Verdict.failOn)
	if err != nil {
		return Usagef("--fail-on: must be info, warning or error")
	}
	runs, named, err := readRecordFiles(f, o.Files)
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
		if pol, err = o.recordedPolicy(m); err != nil {
			return err
		}
	}
	recordFile := ""
	if len(named) == 1 && len(o.Files) == 1 {
		recordFile = named[0]
	}
	rep := verify.Analyze(m, *pol, verify.Options{
		Schema: verify.SchemaAnalyze, Tool: f.tool(), FailOn: failOn, RecordFile: recordFile,
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

// readRecordFiles reads the record files ("-" = stdin, at most once) and
// returns them with the names of those that are files. Every failure is
// an input error (exit 2).
func readRecordFiles(f *Factory, files []string) (runs []*record.Run, named []string, err error) {
	stdin := 0
	for _, name := range files {
		run, err := readRecordFile(f, name)
		if err != nil {
			return nil, nil, err
		}
		if name == "-" {
			stdin++
		} else {
			named = append(named, name)
		}
		runs = append(runs, run)
	}
	if stdin > 1 {
		return nil, nil, Usagef("\"-\" (stdin) may be given once")
	}
	return runs, named, nil
}

// readRecordFile reads one record file ("-" = stdin). Every failure is an
// input error (exit 2).
func readRecordFile(f *Factory, name string) (*record.Run, error) {
	var r io.Reader
	if name == "-" {
		r = f.IO.In
	} else {
		file, err := os.Open(name)
		if err != nil {
			return nil, Usagef("%v", err)
		}
		defer file.Close()
		r = file
	}
	run, err := record.Read(r)
	if err != nil {
		var fe *record.FormatError
		if errors.As(err, &fe) {
			return nil, Usagef("%s: %v (this rlprobe reads format %d)", name, err, record.FormatMajor)
		}
		return nil, Usagef("%s: %v", name, err)
	}
	return run, nil
}

// recordedPolicy returns the policy a run recorded (check writes it in
// the header), else the one its target advertised, with the modifier
// flags applied; exit 2 when there is neither.
func (o *AnalyzeOptions) recordedPolicy(m *record.Merged) (*verify.Policy, error) {
	for _, a := range m.Agents {
		if len(a.Header.Policy) == 0 {
			continue
		}
		var p verify.Policy
		if err := json.Unmarshal(a.Header.Policy, &p); err != nil {
			return nil, Usagef("the policy recorded by agent %s: %v", a.Name, err)
		}
		return o.Policy.withModifiers(p.Endpoints)
	}
	for _, r := range m.Results {
		if r.Outcome != record.OutcomeResponse || len(r.Headers) == 0 {
			continue
		}
		if adv := verify.Advertised(r.Headers, m.Start.Add(time.Duration(r.TTFB))); len(adv) > 0 {
			return o.Policy.withModifiers(adv)
		}
	}
	return nil, session.NoPolicyError("the record")
}
