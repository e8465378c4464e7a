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
