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
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newAnalyzeCmd(f, g) })
}

// analyzeOptions are the flags of `rlprobe analyze`.
type analyzeOptions struct {
	policy  policyOptions
	verdict verdictOptions
}

func newAnalyzeCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &analyzeOptions{}
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
advertised in its responses. The document is appended to the file when
there is exactly one. Exit codes: 0 pass, 1 a certain finding at or above
--fail-on, 2 usage or unreadable file, 3 a run that did not complete.`,
		Example: `  rlprobe analyze run.jsonl --limit 100 --window 60s
  rlprobe analyze agent1.jsonl agent2.jsonl --rate 10/s --capacity 20 --json
  cat run.jsonl | rlprobe analyze - --policy '"api";q=5;w=2'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), f, g, args)
		},
	}
	addPolicyFlags(cmd, &o.policy)
	addVerdictFlags(cmd, &o.verdict)
	return cmd
}

func (o *analyzeOptions) run(_ context.Context, f *Factory, g *GlobalOptions, files []string) error {
	pol, err := o.policy.resolve(nil)
	if err != nil {
		return err
	}
	failOn, err := verify.ParseSeverity(o.verdict.failOn)
	if err != nil {
		return Usagef("--fail-on: must be info, warning or error")
	}
	runs := make([]*record.Run, 0, len(files))
	stdin := 0
	for _, name := range files {
		run, err := readRecordFile(f, name)
		if err != nil {
			return err
		}
		if name == "-" {
			stdin++
		}
		runs = append(runs, run)
	}
	if stdin > 1 {
		return Usagef("\"-\" (stdin) may be given once")
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
	if len(files) == 1 && files[0] != "-" {
		recordFile = files[0]
	}
	rep := verify.Analyze(m, *pol, verify.Options{
		Schema: verify.SchemaAnalyze, Tool: "rlprobe " + f.Version, FailOn: failOn, RecordFile: recordFile,
	})
	if recordFile != "" {
		if err := appendDocument(recordFile, rep); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %v\n", err)
		}
	}
	var named []string
	for _, n := range files {
		if n != "-" {
			named = append(named, n)
		}
	}
	cmdErr := writeReports(f, o.verdict, m, named, rep)
	if err := printVerdict(f, g, &rep, describePolicy(pol)); err != nil && cmdErr == nil {
		cmdErr = err
	}
	if !rep.Complete && cmdErr == nil && !rep.Failed() {
		fmt.Fprintln(f.IO.ErrOut, "rlprobe: the recorded run did not complete (interrupted, aborted or budget spent)")
	}
	return verdictExit(&rep, cmdErr)
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
func (o *analyzeOptions) recordedPolicy(m *record.Merged) (*verify.Policy, error) {
	for _, a := range m.Agents {
		if len(a.Header.Policy) == 0 {
			continue
		}
		var p verify.Policy
		if err := json.Unmarshal(a.Header.Policy, &p); err != nil {
			return nil, Usagef("the policy recorded by agent %s: %v", a.Name, err)
		}
		return o.policy.withModifiers(p.Endpoints)
	}
	for _, r := range m.Results {
		if r.Outcome != record.OutcomeResponse || len(r.Headers) == 0 {
			continue
		}
		if adv := verify.Advertised(r.Headers, m.Start.Add(time.Duration(r.TTFB))); len(adv) > 0 {
			return o.policy.withModifiers(adv)
		}
	}
	return nil, errNoPolicy("the record")
}
