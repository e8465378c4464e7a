package report

import (
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/infer"
)

// TestWriteInferenceDeployment: what a deployment or a racy counter does
// is printed for people as the document says it — instances with the
// balancing mode and, when the outcomes leave it open, the range;
// over-admission with its counts and evidence; the note — and nothing of
// the kind when the document has none.
func TestWriteInferenceDeployment(t *testing.T) {
	for _, tt := range []struct {
		name string
		inf  infer.Inference
		want []string
	}{
		{"three instances by connection", infer.Inference{Algorithm: infer.FixedWindow, Key: infer.KeyGlobal,
			Instances: &infer.Instances{Value: 3, Low: 3, High: 3, By: infer.BalanceConnection}, Note: "3 instances by connection"},
			[]string{"instances: 3 by connection (the parameters above are one instance's)\n", "note: 3 instances by connection\n"}},
		{"a count the outcomes leave open", infer.Inference{Algorithm: infer.TokenBucket, Key: infer.KeyGlobal,
			Instances: &infer.Instances{Value: 3, Low: 2, High: 4, By: infer.BalanceConnection}},
			[]string{"instances: 3 (2–4) by connection"}},
		{"a racy counter", infer.Inference{Algorithm: infer.FixedWindow, Key: infer.KeyGlobal,
			OverAdmission: &infer.OverAdmission{SequentialMax: 5, ConcurrentMax: 9, Evidence: "remaining 4 repeated"}},
			[]string{"over-admission: 9 at once, 5 paced (a counter not updated atomically): remaining 4 repeated\n"}},
		{"one limiter", infer.Inference{Algorithm: infer.FixedWindow, Key: infer.KeyGlobal}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteInference(&b, &tt.inf, 1, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.want == nil && (strings.Contains(out, "instances:") || strings.Contains(out, "over-admission:") || strings.Contains(out, "note:")) {
				t.Errorf("one limiter, yet:\n%s", out)
			}
		})
	}
}
