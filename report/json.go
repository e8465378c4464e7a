package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// Document is the report document (schema rlprobe.report/v1, see
// docs/schema/report.schema.json): the verdict over every stored check, the
// run summary, and the contract's check, analyze and infer documents
// exactly as stored (without the record line's "type" member).
type Document struct {
	Schema      string            `json:"schema"` // SchemaReport
	Tool        string            `json:"tool"`
	Verdict     string            `json:"verdict"` // pass, fail, incomplete or none
	Complete    bool              `json:"complete"`
	RecordFiles []string          `json:"record_files"`
	Targets     []string          `json:"targets"`
	Run         *Summary          `json:"run"` // null without runs
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
	for i := range in.Checks {
		raw, err := in.Checks[i].Raw()
		if err != nil {
			return nil, err
		}
		d.Checks = append(d.Checks, raw)
	}
	for i := range in.Inferences {
		raw, err := in.Inferences[i].Raw()
		if err != nil {
			return nil, err
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
