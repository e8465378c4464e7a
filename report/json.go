package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rlprobe/rlprobe/record"
)

// Document is the report document (schema rlprobe.report/v1, see
// docs/schema/report.schema.json): the latest stored verdict, the run
// document, and the contract's check, analyze and infer documents exactly
// as stored (without the record line's "type" member) — the checks latest
// first, each with its own policy and time.
type Document struct {
	Schema      string            `json:"schema"` // SchemaReport
	Tool        string            `json:"tool"`
	Verdict     string            `json:"verdict"` // the latest check's: pass, fail, incomplete; none without one
	Complete    bool              `json:"complete"`
	RecordFiles []string          `json:"record_files"`
	Targets     []string          `json:"targets"`
	Run         *record.RunDoc    `json:"run"` // null without runs
	Checks      []json.RawMessage `json:"checks"`
	Inferences  []json.RawMessage `json:"inferences"`
	Warnings    []string          `json:"warnings"`
}

// Document returns the report document of in.
func (in *Input) Document() (*Document, error) {
	d := &Document{
		Schema: SchemaReport, Tool: in.tool(), Verdict: in.Verdict(), Complete: in.Complete(),
		RecordFiles: append([]string{}, in.Files...), Targets: in.Targets(),
		Checks: []json.RawMessage{}, Inferences: []json.RawMessage{}, Warnings: append([]string{}, in.Warnings...),
	}
	if len(in.Agents) > 0 {
		s := in.Summary()
		d.Run = &s
	}
	for i := range in.Verdicts {
		raw, err := in.Verdicts[i].Raw()
		if err != nil {
			return nil, err
		}
		d.Checks = append(d.Checks, raw)
	}
	for i, inf := range in.Inferences {
		var raw json.RawMessage
		if i < len(in.infRaw) {
			raw = in.infRaw[i]
		}
		if raw == nil {
			b, err := json.Marshal(inf)
			if err != nil {
				return nil, fmt.Errorf("report: encode infer document: %w", err)
			}
			raw = b
		}
		d.Inferences = append(d.Inferences, raw)
	}
	return d, nil
}

// JSON writes the report document, indented, with a final newline.
func JSON(w io.Writer, in *Input) error {
	d, err := in.Document()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
