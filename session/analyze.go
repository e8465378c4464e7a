package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// MergedAgent is the agent name of a record file that WriteMerged made
// from several runs.
const MergedAgent = "merged"

// WriteMerged writes a new record file at path — never replacing one
// without force, never one of the inputs (Usage) — holding the runs
// merged into one and the verdict rep, whose RecordFile it sets to path.
//
// One run is copied as it is, its stored verdicts included. Several runs
// become one timeline starting at m.Start on the reference clock (each
// agent's clock offset removed, so the header's offset is zero): the
// results of m in merged order, renumbered 0…n−1 under agent MergedAgent,
// and rep's evidence refs renamed to match. The verdict itself is the one
// judged from the inputs, with each agent's clock uncertainty; analyzing
// the merged file again, where those uncertainties are gone, may judge
// some findings certain that the inputs left possible.
func WriteMerged(path string, force bool, inputs []string, runs []*record.Run, m *record.Merged, rep *verify.Report) error {
	for _, in := range inputs {
		if sameFile(in, path) {
			return Errorf(Usage, "--out %s is an input: analyze never modifies its inputs (use --append to add the verdict to it)", path)
		}
	}
	rep.RecordFile = path
	out := mergedRun(runs, m, rep)
	doc, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("session: encode the verdict: %w", err)
	}
	out.Findings = append(slices.Clone(out.Findings), doc)
	file, err := record.Create(path, force)
	if err != nil {
		return WithClass(Usage, err)
	}
	if _, err := out.WriteTo(file); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// mergedRun is the record of runs merged into one (see WriteMerged); it
// renames rep's refs to its own.
func mergedRun(runs []*record.Run, m *record.Merged, rep *verify.Report) record.Run {
	if len(runs) == 1 {
		return *runs[0]
	}
	first := runs[0].Header
	h := record.Header{Tool: first.Tool, Go: first.Go, Start: m.Start, Agent: MergedAgent, Host: first.Host,
		Plan: first.Plan, Policy: first.Policy, Seed: first.Seed}
	end := &record.End{Reason: record.ReasonCompleted}
	refs := map[string]string{}
	for _, a := range m.Agents {
		for _, t := range a.Header.Targets {
			if !slices.Contains(h.Targets, t) {
				h.Targets = append(h.Targets, t)
			}
		}
		for _, c := range a.Header.Captured {
			if !slices.Contains(h.Captured, c) {
				h.Captured = append(h.Captured, c)
			}
		}
		if a.End == nil {
			end.Reason = record.ReasonInterrupted
		} else if a.End.Reason != record.ReasonCompleted && end.Reason == record.ReasonCompleted {
			end.Reason = a.End.Reason
		}
	}
	results := make([]record.Result, len(m.Results))
	for i, r := range m.Results {
		refs[record.Ref(r)] = MergedAgent + ":" + strconv.Itoa(i)
		r.Seq, r.Agent = int64(i), MergedAgent
		results[i] = r
		end.Scheduled++
		if r.Outcome != record.OutcomeNotSent {
			end.Sent++
		}
	}
	for i := range rep.Findings {
		ev := &rep.Findings[i].Evidence
		for j, ref := range ev.Refs {
			if n, ok := refs[ref]; ok {
				ev.Refs[j] = n
			}
		}
	}
	return record.Run{Header: h, Results: results, End: end, Findings: m.Findings, Inferences: m.Inferences}
}

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	if a == "-" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// ReadRecords reads the record files of names ("-" = stdin, at most
// once) and returns them with the names of those that are files. Every
// failure is a Usage error.
func ReadRecords(stdin io.Reader, names ...string) (runs []*record.Run, named []string, err error) {
	dashes := 0
	for _, name := range names {
		run, err := readRecordFile(stdin, name)
		if err != nil {
			return nil, nil, err
		}
		if name == "-" {
			dashes++
		} else {
			named = append(named, name)
		}
		runs = append(runs, run)
	}
	if dashes > 1 {
		return nil, nil, Errorf(Usage, "\"-\" (stdin) may be given once")
	}
	return runs, named, nil
}

// readRecordFile reads one record file ("-" = stdin). Every failure is an
// input error (exit 2).
func readRecordFile(stdin io.Reader, name string) (*record.Run, error) {
	var r io.Reader
	if name == "-" {
		r = stdin
	} else {
		file, err := os.Open(name)
		if err != nil {
			return nil, Errorf(Usage, "%v", err)
		}
		defer file.Close()
		r = file
	}
	run, err := record.Read(r)
	if err != nil {
		var fe *record.FormatError
		if errors.As(err, &fe) {
			return nil, Errorf(Usage, "%s: %v (this rlprobe reads format %d)", name, err, record.FormatMajor)
		}
		return nil, Errorf(Usage, "%s: %v", name, err)
	}
	return run, nil
}

// RecordedPolicy returns the policy merged runs recorded (check writes it
// in the header), else the one their target advertised, with the
// modifiers of spec applied; Usage when there is neither.
func RecordedPolicy(m *record.Merged, spec *PolicySpec) (*verify.Policy, error) {
	for _, a := range m.Agents {
		if len(a.Header.Policy) == 0 {
			continue
		}
		var p verify.Policy
		if err := json.Unmarshal(a.Header.Policy, &p); err != nil {
			return nil, Errorf(Usage, "the policy recorded by agent %s: %v", a.Name, err)
		}
		return spec.Apply(p.Endpoints)
	}
	for _, r := range m.Results {
		if r.Outcome != record.OutcomeResponse || len(r.Headers) == 0 {
			continue
		}
		if adv := verify.Advertised(r.Headers, m.Start.Add(time.Duration(r.TTFB))); len(adv) > 0 {
			return spec.Apply(adv)
		}
	}
	return nil, NoPolicyError("the record")
}

// AnalyzeOptions say what Analyze reads, how it judges and where it keeps
// the verdict (rlprobe analyze). The zero value reads nothing: give Files.
type AnalyzeOptions struct {
	// Files are the record files to analyze; "-" reads Stdin (at most
	// once).
	Files []string
	Stdin io.Reader
	// Policy is the declared policy as the user gave it; when it declares
	// no quota (or is nil), the recorded policy is judged, with its
	// modifiers applied (RecordedPolicy).
	Policy *PolicySpec
	// FailOn is the least severity of a certain finding that fails the
	// verdict, as the user spells it: info, warning or error (any case;
	// anything else, "" too, is a Usage error).
	FailOn string
	// Tool and Time go into the verdict document.
	Tool string
	Time time.Time
	// Out, when set, is a new record file to write: the merged inputs
	// with the verdict (WriteMerged), replacing an existing file only with
	// Force.
	Out   string
	Force bool
	// Append adds the verdict to the one input file (AppendFinding).
	Append bool
	// Warn, when set, receives each warning about the inputs (how their
	// runs merge) as soon as it is known.
	Warn func(msg string)
}

// Analysis is what Analyze judged: the verdict, the merged inputs and the
// names of the inputs that are files (stdin left out), in order.
type Analysis struct {
	Report *verify.Report
	Merged *record.Merged
	Files  []string
}

// Analyze judges recorded runs offline, as check would have judged them
// live: it reads o.Files, merges them (record.Merge), judges the declared
// or recorded policy (verify.Analyze, schema verify.SchemaAnalyze) and
// writes the verdict to o.Out or appends it to the input (o.Append). The
// verdict's RecordFile is the one input file ("" for stdin or several),
// or o.Out. Options, policy and inputs are checked before anything is
// written; every error is of class Usage (ClassOf), and no verdict is
// returned with one. Analyze never modifies an input unless o.Append says
// so. A failing or incomplete verdict is no error here: its error is
// VerdictError's, for the caller to take once it has shown the verdict.
func Analyze(o AnalyzeOptions) (*Analysis, error) {
	spec := o.Policy
	if spec == nil {
		spec = &PolicySpec{}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	pol, err := spec.Resolve()
	if err != nil {
		return nil, err
	}
	failOn, err := ParseFailOn(o.FailOn)
	if err != nil {
		return nil, err
	}
	runs, named, err := ReadRecords(o.Stdin, o.Files...)
	if err != nil {
		return nil, err
	}
	m := record.Merge(runs...)
	if o.Warn != nil {
		for _, w := range m.Warnings {
			o.Warn(w)
		}
	}
	if pol == nil {
		if pol, err = RecordedPolicy(m, spec); err != nil {
			return nil, err
		}
	}
	recordFile := ""
	if len(named) == 1 && len(o.Files) == 1 {
		recordFile = named[0]
	}
	rep := verify.Analyze(m, *pol, verify.Options{
		Schema: verify.SchemaAnalyze, Tool: o.Tool, FailOn: failOn, RecordFile: recordFile, Time: o.Time,
	})
	switch {
	case o.Out != "":
		if err := WriteMerged(o.Out, o.Force, named, runs, m, &rep); err != nil {
			return nil, err
		}
	case o.Append:
		if err := AppendFinding(recordFile, rep); err != nil {
			return nil, WithClass(Usage, err)
		}
	}
	return &Analysis{Report: &rep, Merged: m, Files: named}, nil
}

// check refuses contradictory output options (Usage).
func (o *AnalyzeOptions) check() error {
	switch {
	case o.Out != "" && o.Append:
		return Errorf(Usage, "--out and --append are exclusive: write a new file or add to the input")
	case o.Append && (len(o.Files) != 1 || o.Files[0] == "-"):
		return Errorf(Usage, "--append adds the verdict to one input file: give exactly one (not stdin), or use --out FILE")
	case o.Force && o.Out == "":
		return Errorf(Usage, "--force goes with --out FILE")
	}
	return nil
}
