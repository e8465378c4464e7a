package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// SchemaReport is the schema of this package's own report document.
const SchemaReport = "rlprobe.report/v1"

// VerdictNone is the report's verdict when it holds no check or analyze
// document; otherwise it is the latest document's (verify.VerdictPass,
// VerdictFail or VerdictIncomplete).
const VerdictNone = "none"

// Verdict is one stored verdict: a check or analyze document as package
// verify wrote it, with when and where it was stored. Verdicts are never
// added up: each is shown with its own policy and time.
type Verdict struct {
	// Report is the document, decoded into verify's own type.
	Report verify.Report
	// Time is the document's "time" member: when the verdict was given.
	// Zero when the document has none (written by an older rlprobe).
	Time time.Time
	// File names the record file the document was stored in ("" for a
	// document added with AddDocument).
	File string
	// Synthetic marks a document this package assembled from finding
	// lines that each held a single finding (judged as with --fail-on
	// error); its policy is the run's header policy.
	Synthetic bool

	raw     json.RawMessage // the document as stored, without "type"; nil when synthetic
	agent   int             // the run whose file held it, -1 when none
	shiftNS int64           // added to its times to put them on the Input's timeline
	order   int             // position in reading order
}

// Fails reports whether the finding decides a failure under the default
// --fail-on error: certain, with severity error.
func Fails(f *verify.Finding) bool {
	return f.Certainty == verify.Certain && f.Severity.AtLeast(verify.SeverityError)
}

// Raw returns the document as stored in the record file (or added),
// without the record line's "type" member; for a synthetic document, its
// JSON encoding.
func (v *Verdict) Raw() (json.RawMessage, error) {
	if v.raw != nil {
		return v.raw, nil
	}
	b, err := json.Marshal(struct {
		verify.Report
		Time *time.Time `json:"time,omitempty"`
	}{v.Report, timeOrNil(v.Time)})
	if err != nil {
		return nil, fmt.Errorf("report: encode check document: %w", err)
	}
	return b, nil
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// judge sets Verdict and Pass from the findings and Complete, as package
// verify does under --fail-on error; for documents assembled here.
func judge(r *verify.Report) {
	r.Verdict = verify.VerdictPass
	if !r.Complete {
		r.Verdict = verify.VerdictIncomplete
	}
	for i := range r.Findings {
		if Fails(&r.Findings[i]) {
			r.Verdict = verify.VerdictFail
		}
	}
	r.Pass = r.Verdict == verify.VerdictPass
}

// synthesize gathers a file's single-finding lines into one analyze
// document under the run's header policy.
func (in *Input) synthesize(a *Agent, fs []verify.Finding, agent int) Verdict {
	v := Verdict{Report: verify.Report{
		Schema: verify.SchemaAnalyze, Tool: cmp.Or(a.Header.Tool, "rlprobe (devel)"), Targets: a.Header.Targets,
		Findings: fs, Complete: a.End != nil && a.End.Reason == record.ReasonCompleted, RecordFile: a.File,
	}, File: a.File, Synthetic: true, agent: agent}
	if v.Report.Targets == nil {
		v.Report.Targets = []string{}
	}
	v.Report.Policy = a.policy
	judge(&v.Report)
	return v
}

// policyOf decodes a stored policy (raw JSON, may be null) into verify's
// Policy, normalized; a policy it cannot read is noted in Warnings, named
// by what, and left empty.
func (in *Input) policyOf(raw json.RawMessage, what string) verify.Policy {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return verify.Policy{}
	}
	var peek struct {
		Endpoints json.RawMessage `json:"endpoints"`
	}
	if json.Unmarshal(raw, &peek) == nil && string(peek.Endpoints) == "null" {
		return verify.Policy{} // a zero verify.Policy, as a document without one writes it
	}
	var p verify.Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: %v; shown without it", what, err))
		return verify.Policy{}
	}
	return p.Normalize()
}

// checkWire decodes a check or analyze document: verify's Report, with the
// policy kept raw (it may be null, and a policy this rlprobe cannot read
// should not lose the verdict) and the document's time.
type checkWire struct {
	verify.Report
	Policy json.RawMessage `json:"policy"`
	Time   time.Time       `json:"time"`
}

// addRaw decodes a finding or inference line (or an added document) and
// adds it to in. A line holding a single finding is returned for the
// caller to gather instead. lineType is the record type, "" when unknown;
// where names the document in warnings.
func (in *Input) addRaw(raw json.RawMessage, agent int, lineType, where string) (*verify.Finding, error) {
	var peek struct {
		Schema    string          `json:"schema"`
		ID        string          `json:"id"`
		Findings  json.RawMessage `json:"findings"`
		Algorithm json.RawMessage `json:"algorithm"`
	}
	if err := json.Unmarshal(raw, &peek); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	body, err := stripType(raw)
	if err != nil {
		return nil, err
	}
	isCheck := peek.Schema == verify.SchemaCheck || peek.Schema == verify.SchemaAnalyze
	switch {
	case peek.Schema == infer.Schema ||
		(!isCheck && peek.Schema == "" && peek.Algorithm != nil && (lineType == record.TypeInference || lineType == "")):
		// An infer document without "complete" predates budgets: it finished.
		inf := &infer.Inference{Complete: true}
		if err := json.Unmarshal(body, inf); err != nil {
			return nil, fmt.Errorf("infer document: %w", err)
		}
		// Latest first: a later line was appended later.
		in.Inferences = slices.Insert(in.Inferences, 0, inf)
		in.infRaw = slices.Insert(in.infRaw, 0, body)
		in.prep = nil
		return nil, nil
	case isCheck || (peek.Schema == "" && peek.Findings != nil):
		var w checkWire
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, fmt.Errorf("%s document: %w", cmp.Or(peek.Schema, "check"), err)
		}
		v := Verdict{Report: w.Report, Time: w.Time, raw: body, agent: agent, File: where}
		v.Report.Policy = in.policyOf(w.Policy, cmp.Or(where, "an added document")+": the verdict's policy")
		if v.Report.Findings == nil {
			v.Report.Findings = []verify.Finding{}
		}
		if v.Report.Verdict == "" {
			judge(&v.Report)
		}
		in.addVerdict(v)
		return nil, nil
	case peek.ID != "" && peek.Schema == "":
		var f verify.Finding
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, fmt.Errorf("finding: %w", err)
		}
		return &f, nil
	case peek.Schema != "":
		return nil, fmt.Errorf("a document of schema %q, which this rlprobe does not know", peek.Schema)
	}
	return nil, errors.New("neither a check, analyze or infer document nor a finding")
}

// addVerdict adds v and keeps the verdicts latest first.
func (in *Input) addVerdict(v Verdict) {
	v.order = in.nextOrder
	in.nextOrder++
	in.Verdicts = append(in.Verdicts, v)
	in.sortVerdicts()
	in.prep = nil
}

// sortVerdicts orders the verdicts latest first: by time, those without
// one after those with, and in reverse reading order among equals (a
// later line was appended later).
func (in *Input) sortVerdicts() {
	slices.SortStableFunc(in.Verdicts, func(a, b Verdict) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return b.order - a.order
	})
}

// stripType returns the object raw without its "type" member, keeping the
// order of the others when "type" comes first (as record writes it).
func stripType(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	for _, t := range []string{record.TypeFinding, record.TypeInference} {
		prefix := `{"type":"` + t + `"`
		if bytes.HasPrefix(raw, []byte(prefix)) {
			rest := bytes.TrimSpace(raw[len(prefix):])
			switch {
			case bytes.HasPrefix(rest, []byte(",")):
				return slices.Concat([]byte("{"), rest[1:]), nil
			case bytes.HasPrefix(rest, []byte("}")):
				return json.RawMessage("{}"), nil
			}
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, ok := m["type"]; !ok {
		return slices.Clone(raw), nil
	}
	delete(m, "type")
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("re-encode: %w", err)
	}
	return b, nil
}

// Latest returns the latest stored verdict, nil when there is none.
func (in *Input) Latest() *Verdict {
	if len(in.Verdicts) == 0 {
		return nil
	}
	return &in.Verdicts[0]
}

// Verdict returns the report's verdict: the latest stored verdict's (pass,
// fail or incomplete), or none without a check or analyze document.
// Earlier verdicts — under another policy, or of another run — are shown
// beside it, never added to it.
func (in *Input) Verdict() string {
	if v := in.Latest(); v != nil {
		return v.Report.Verdict
	}
	return VerdictNone
}

// Findings returns every finding of every verdict, latest verdict first.
func (in *Input) Findings() []verify.Finding {
	var out []verify.Finding
	for _, v := range in.Verdicts {
		out = append(out, v.Report.Findings...)
	}
	return out
}
