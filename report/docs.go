package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/rlprobe/rlprobe/record"
)

// Document schemas (contract.md, "JSON documents"), and this package's own
// report document.
const (
	SchemaCheck   = "rlprobe.check/v1"
	SchemaAnalyze = "rlprobe.analyze/v1"
	SchemaInfer   = "rlprobe.infer/v1"
	SchemaRun     = "rlprobe.run/v1"
	SchemaReport  = "rlprobe.report/v1"
)

// Verdicts of check and analyze documents, and of a report ("none" when it
// holds no check or analyze document).
const (
	VerdictPass       = "pass"
	VerdictFail       = "fail"
	VerdictIncomplete = "incomplete"
	VerdictNone       = "none"
)

// Severities and certainties of findings (contract.md, "Findings").
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityInfo    = "info"
	Certain         = "certain"
	Possible        = "possible"
)

// FindingIDs lists every finding id of the contract, in its order.
var FindingIDs = []string{
	"window-limit-exceeded", "burst-limit-exceeded", "rate-limit-exceeded", "no-limiting-observed",
	"race-over-admission", "reject-status-mismatch", "retry-after-malformed", "ratelimit-header-malformed",
	"retry-after-early", "ratelimit-header-inconsistent", "ratelimit-policy-mismatch", "cacheable-429",
	"key-spoofable", "retry-after-missing", "retry-after-late", "under-admission", "ratelimit-header-missing",
}

// Checks lists the check names of the contract, in the order the suite
// runs them.
var Checks = []string{"burst", "edge", "sustained", "recovery", "retry-after", "race", "key-spoof", "headers"}

// defaultCheck is the check a finding id belongs to when its finding names
// none (as package verify assigns them).
var defaultCheck = map[string]string{
	"window-limit-exceeded": "burst", "burst-limit-exceeded": "burst", "rate-limit-exceeded": "sustained",
	"no-limiting-observed": "sustained", "race-over-admission": "race", "reject-status-mismatch": "headers",
	"retry-after-malformed": "headers", "ratelimit-header-malformed": "headers", "retry-after-early": "retry-after",
	"ratelimit-header-inconsistent": "headers", "ratelimit-policy-mismatch": "headers", "cacheable-429": "headers",
	"key-spoofable": "key-spoof", "retry-after-missing": "retry-after", "retry-after-late": "retry-after",
	"under-admission": "burst", "ratelimit-header-missing": "headers",
}

// Check is a check or analyze document of the contract, as stored.
type Check struct {
	Schema     string          `json:"schema"`
	Tool       string          `json:"tool"`
	Verdict    string          `json:"verdict"`
	Complete   bool            `json:"complete"`
	Pass       bool            `json:"pass"`
	Targets    []string        `json:"targets"`
	Policy     json.RawMessage `json:"policy"` // as stored; nil is JSON null
	Findings   []Finding       `json:"findings"`
	RecordFile string          `json:"record_file,omitempty"`
	// Synthetic marks a document this package assembled from finding lines
	// that each held a single finding (judged as with --fail-on error).
	Synthetic bool `json:"-"`

	raw     json.RawMessage // the document as stored, without "type"; nil when synthetic
	agent   int             // the run whose file held it, -1 when none
	shiftNS int64           // added to its times to put them on the Input's timeline
}

// Finding is one finding of a check or analyze document.
type Finding struct {
	ID        string   `json:"id"`
	Severity  string   `json:"severity"`
	Certainty string   `json:"certainty"`
	Check     string   `json:"check"`
	Endpoint  string   `json:"endpoint"`
	Client    string   `json:"client"`
	Message   string   `json:"message"`
	Hint      string   `json:"hint"`
	Evidence  Evidence `json:"evidence"`
}

// Evidence points at the records behind a finding. Times are nanoseconds
// since the run's start on the reference clock.
type Evidence struct {
	Refs    []string        `json:"refs"`
	StartNS int64           `json:"start_ns"`
	EndNS   int64           `json:"end_ns"`
	Count   int             `json:"count"`
	Bound   *float64        `json:"bound,omitempty"`
	Headers json.RawMessage `json:"headers,omitempty"`
}

// Fails reports whether the finding decides a failure under the default
// --fail-on error: certain, with severity error.
func (f *Finding) Fails() bool { return f.Certainty == Certain && f.Severity == SeverityError }

// Estimate is an inferred parameter: a value and the interval of values
// that explain the observations equally well.
type Estimate struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Params are an inference's parameters; nil means not applicable or not
// determined.
type Params struct {
	Limit     *Estimate `json:"limit"`
	WindowS   *Estimate `json:"window_s"`
	RatePerS  *Estimate `json:"rate_per_s"`
	Capacity  *Estimate `json:"capacity"`
	Undelayed *Estimate `json:"undelayed"`
	Queue     *Estimate `json:"queue"`
}

// Alternative is a family an inference ruled out.
type Alternative struct {
	Algorithm  string  `json:"algorithm"`
	Confidence float64 `json:"confidence"`
	RuledOutBy string  `json:"ruled_out_by"`
}

// RetryAfterJudgement says whether rejections carried Retry-After and
// whether it was honest (nil: not judged).
type RetryAfterJudgement struct {
	Sent   bool  `json:"sent"`
	Honest *bool `json:"honest"`
}

// Inference is an infer document of the contract, as stored.
type Inference struct {
	Schema         string               `json:"schema"`
	Tool           string               `json:"tool"`
	Algorithm      string               `json:"algorithm"`
	Params         Params               `json:"params"`
	Alignment      *string              `json:"alignment"`
	CountsRejected *bool                `json:"counts_rejected"`
	Key            *string              `json:"key"`
	RejectStatus   *int                 `json:"reject_status"`
	Headers        []string             `json:"headers"`
	RetryAfter     *RetryAfterJudgement `json:"retry_after"`
	MaxRatePerS    *float64             `json:"max_rate_per_s"`
	Confidence     float64              `json:"confidence"`
	Alternatives   []Alternative        `json:"alternatives"`
	Complete       *bool                `json:"complete,omitempty"`
	Requests       int                  `json:"requests"`
	DurationS      float64              `json:"duration_s"`
	RecordFile     string               `json:"record_file,omitempty"`

	raw json.RawMessage
}

// Raw returns the document as stored in the record file (or added),
// without the record line's "type" member; for a synthetic document, its
// JSON encoding.
func (c *Check) Raw() (json.RawMessage, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("report: encode check document: %w", err)
	}
	return b, nil
}

// Raw returns the document as stored, without the line's "type" member.
func (inf *Inference) Raw() (json.RawMessage, error) {
	if inf.raw != nil {
		return inf.raw, nil
	}
	b, err := json.Marshal(inf)
	if err != nil {
		return nil, fmt.Errorf("report: encode infer document: %w", err)
	}
	return b, nil
}

// judge sets Verdict and Pass from the findings and Complete, as package
// verify does under --fail-on error.
func (c *Check) judge() {
	c.Verdict = VerdictPass
	if !c.Complete {
		c.Verdict = VerdictIncomplete
	}
	for i := range c.Findings {
		if c.Findings[i].Fails() {
			c.Verdict = VerdictFail
		}
	}
	c.Pass = c.Verdict == VerdictPass
}

// synthesize gathers a file's single-finding lines into one analyze
// document.
func synthesize(a *Agent, fs []Finding, agent int) Check {
	c := Check{
		Schema: SchemaAnalyze, Tool: a.Header.Tool, Targets: a.Header.Targets, Policy: a.Header.Policy,
		Findings: fs, Complete: a.End != nil && a.End.Reason == record.ReasonCompleted,
		RecordFile: a.File, Synthetic: true, agent: agent,
	}
	if c.Tool == "" {
		c.Tool = "rlprobe (devel)"
	}
	if c.Targets == nil {
		c.Targets = []string{}
	}
	c.judge()
	return c
}

// addRaw decodes a finding or inference line (or an added document) and
// adds it to in. A line holding a single finding is returned for the
// caller to gather instead. lineType is the record type, "" when unknown.
func (in *Input) addRaw(raw json.RawMessage, agent int, lineType string) (*Finding, error) {
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
	isCheck := peek.Schema == SchemaCheck || peek.Schema == SchemaAnalyze
	isInfer := peek.Schema == SchemaInfer
	switch {
	case isInfer || (!isCheck && peek.Schema == "" && peek.Algorithm != nil && (lineType == record.TypeInference || lineType == "")):
		var inf Inference
		if err := json.Unmarshal(body, &inf); err != nil {
			return nil, fmt.Errorf("infer document: %w", err)
		}
		inf.raw = body
		in.Inferences = append(in.Inferences, inf)
		in.prep = nil
		return nil, nil
	case isCheck || (peek.Schema == "" && peek.Findings != nil):
		c := Check{agent: agent}
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, fmt.Errorf("%s document: %w", cmpOr(peek.Schema, "check"), err)
		}
		c.raw = body
		if c.Verdict == "" {
			c.judge()
		}
		if c.Findings == nil {
			c.Findings = []Finding{}
		}
		in.Checks = append(in.Checks, c)
		in.prep = nil
		return nil, nil
	case peek.ID != "" && peek.Schema == "":
		var f Finding
		if err := json.Unmarshal(body, &f); err != nil {
			return nil, fmt.Errorf("finding: %w", err)
		}
		return &f, nil
	case peek.Schema != "":
		return nil, fmt.Errorf("a document of schema %q, which this rlprobe does not know", peek.Schema)
	}
	return nil, errors.New("neither a check, analyze or infer document nor a finding")
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

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Verdict returns the report's verdict: fail when a check or analyze
// document fails, else incomplete when one is incomplete, else pass when
// there is one, else none.
func (in *Input) Verdict() string {
	if len(in.Checks) == 0 {
		return VerdictNone
	}
	v := VerdictPass
	for _, c := range in.Checks {
		switch c.Verdict {
		case VerdictFail:
			return VerdictFail
		case VerdictIncomplete:
			v = VerdictIncomplete
		}
	}
	return v
}

// Findings returns every finding of every check and analyze document, in
// document order.
func (in *Input) Findings() []Finding {
	var out []Finding
	for _, c := range in.Checks {
		out = append(out, c.Findings...)
	}
	return out
}
