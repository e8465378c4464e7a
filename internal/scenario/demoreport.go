package scenario

import (
	"fmt"
	"io"
	"strings"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/verify"
)

// demoRule separates the parts of the demo's text.
var demoRule = strings.Repeat("─", 72)

// WriteReport renders the whole demo for people: the burst (WriteText),
// then verdict — Judge's report against verify.DemoPolicy — and, when inf
// is not nil, the inference of InferDemo. opt says whether findings and
// families are coloured. Neither verdict nor inf is changed.
func (r *DemoResult) WriteReport(w io.Writer, verdict verify.Report, inf *infer.Inference, opt report.TextOptions) error {
	if err := r.WriteText(w); err != nil {
		return err
	}
	pol := verify.DemoPolicy()
	fmt.Fprintf(w, "\n%s\n", demoRule)
	fmt.Fprintf(w, "Checked against the policy a client would expect (%s, rejections with 429):\n", pol.String())
	verdict.RecordFile = "" // the burst is in memory: no file to name
	if err := report.WriteVerdict(w, &verdict, pol.String(), opt); err != nil || inf == nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", demoRule)
	fmt.Fprintln(w, "Inferred from the outside (rlprobe infer), against a fresh demo server:")
	shown := *inf
	shown.RecordFile = "(in memory)"
	return report.WriteInference(w, &shown, 1, opt)
}

// Input returns the demo as the input of report files (HTML, JUnit,
// Markdown …): the burst's results, with verdict and, when not nil, inf
// as documents.
func (r *DemoResult) Input(verdict verify.Report, inf *infer.Inference) (*report.Input, error) {
	in := report.FromMerged(record.Merge(r.Run), nil)
	docs := []any{verdict}
	if inf != nil {
		docs = append(docs, inf)
	}
	for _, doc := range docs {
		if err := in.AddDocument(doc); err != nil {
			return nil, err
		}
	}
	return in, nil
}
