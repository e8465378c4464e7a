package limitconf

import (
	"encoding/json"
	"time"

	"github.com/rlprobe/rlprobe/verify"
)

// Document schemas (docs/schema/policy-lint.schema.json and
// policy-import.schema.json).
const (
	SchemaLint   = "rlprobe.policy-lint/v1"
	SchemaImport = "rlprobe.policy-import/v1"
)

// LintDocument is the `rlprobe policy lint --json` document: the rules a
// config declares and what it cannot do as written. Pass is false when a
// certain finding is at or above the fail-on severity.
type LintDocument struct {
	Schema   string    `json:"schema"`
	Tool     string    `json:"tool"`
	File     string    `json:"file"`
	Format   Format    `json:"format"`
	Pass     bool      `json:"pass"`
	Rules    []Rule    `json:"rules"`
	Findings []Finding `json:"findings"`
}

// ImportDocument is the `rlprobe policy import --json` document: the
// policy (as a policy file holds it) with the rules and findings behind it.
type ImportDocument struct {
	Schema   string        `json:"schema"`
	Tool     string        `json:"tool"`
	File     string        `json:"file"`
	Format   Format        `json:"format"`
	Policy   verify.Policy `json:"policy"`
	Rules    []Rule        `json:"rules"`
	Findings []Finding     `json:"findings"`
}

// Lint returns the lint document of an import, judged at failOn.
func (im *Import) Lint(tool string, failOn verify.Severity) LintDocument {
	return LintDocument{Schema: SchemaLint, Tool: tool, File: im.File, Format: im.Format,
		Pass: !im.Fails(failOn), Rules: nonNil(im.Rules), Findings: nonNil(im.Findings)}
}

// Document returns the import document.
func (im *Import) Document(tool string) ImportDocument {
	return ImportDocument{Schema: SchemaImport, Tool: tool, File: im.File, Format: im.Format,
		Policy: im.Policy(), Rules: nonNil(im.Rules), Findings: nonNil(im.Findings)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// MarshalJSON writes a finding as the check document's findings are
// written, without request evidence, with the file and line.
func (f Finding) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID        string           `json:"id"`
		Severity  verify.Severity  `json:"severity"`
		Certainty verify.Certainty `json:"certainty"`
		Endpoint  string           `json:"endpoint"`
		Message   string           `json:"message"`
		Hint      string           `json:"hint"`
		File      string           `json:"file"`
		Line      int              `json:"line"`
	}{f.ID, f.Severity, f.Certainty, f.Endpoint, f.Message, f.Hint, f.Source.File, f.Source.Line})
}

// MarshalJSON writes a rule with its window and refill interval in
// seconds (window_s, refill_interval_s).
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	secs := func(d time.Duration) *float64 {
		if d <= 0 {
			return nil
		}
		s := d.Seconds()
		return &s
	}
	return json.Marshal(struct {
		plain
		WindowS *float64 `json:"window_s,omitempty"`
		RefillS *float64 `json:"refill_interval_s,omitempty"`
	}{plain: plain(r), WindowS: secs(r.Window), RefillS: secs(r.RefillEvery)})
}
