package scenario

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/report"
)

// TestDemoReport: the demo's text shows the burst, the verdict against the
// demo policy (without the record file the verdict names) and, when given,
// the inference (its record "(in memory)", the caller's copy unchanged);
// Input carries the burst with the verdict and inference as documents.
func TestDemoReport(t *testing.T) {
	res, err := Demo(context.Background(), DemoOptions{Spread: -1})
	if err != nil {
		t.Fatal(err)
	}
	verdict := res.Judge("rlprobe test", time.Now())
	verdict.RecordFile = "burst.jsonl"
	inf := &infer.Inference{Schema: infer.Schema, Algorithm: infer.TokenBucket, Key: infer.KeyGlobal, RecordFile: "kept.jsonl"}
	tests := []struct {
		name      string
		inf       *infer.Inference
		want, not []string
		wantInfs  int
	}{
		{"verdict only", nil,
			[]string{"a burst of 8 requests", "Checked against the policy a client would expect (", "reject-status-mismatch"},
			[]string{"burst.jsonl", "Inferred from the outside"}, 0},
		{"with inference", inf,
			[]string{"reject-status-mismatch", "Inferred from the outside (rlprobe infer), against a fresh demo server:", "token-bucket", "record: (in memory)"},
			[]string{"burst.jsonl", "kept.jsonl"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := res.WriteReport(&b, verdict, tc.inf, report.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("text has %q:\n%s", w, b.String())
				}
			}
			if verdict.RecordFile != "burst.jsonl" || inf.RecordFile != "kept.jsonl" {
				t.Errorf("WriteReport changed the caller's documents: %q, %q", verdict.RecordFile, inf.RecordFile)
			}
			in, err := res.Input(verdict, tc.inf)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Verdicts) != 1 || len(in.Inferences) != tc.wantInfs || len(in.Agents) != 1 {
				t.Errorf("input: %d verdicts, %d inferences, %d agents; want 1, %d, 1", len(in.Verdicts), len(in.Inferences), len(in.Agents), tc.wantInfs)
			}
		})
	}
}
