package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestInferOnTheServersClock: a fixed window on the epoch of a server
// clock 700 ms off this machine's shows here as a timer at phase 1.3 s
// (or 0.7 s) of every 2; the answers' Date headers place the server's
// clock, and infer names the window epoch-aligned, on the server's clock,
// and says how far off it runs. A server in step is epoch-aligned with no
// such note.
func TestInferOnTheServersClock(t *testing.T) {
	server := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}}
	tests := []struct {
		name string
		skew time.Duration
		note string
	}{
		{"700 ms ahead", 700 * time.Millisecond, "ahead of this machine's"},
		{"700 ms behind", -700 * time.Millisecond, "behind this machine's"},
		{"in step", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := memCheckWith(t, testserver.HandlerOptions{ClockSkew: tt.skew}, server,
				"infer", memURL, "--json", "-q", "--out", filepath.Join(t.TempDir(), "i.jsonl"))
			var inf infer.Inference
			if err := json.Unmarshal([]byte(stdout), &inf); err != nil {
				t.Fatalf("exit %d: %v\n%s", code, err, stderr)
			}
			al := "<none>"
			if inf.Alignment != nil {
				al = *inf.Alignment
			}
			if inf.Algorithm != infer.FixedWindow || al != infer.AlignEpoch || inf.Params.PhaseS != nil {
				t.Errorf("%s, aligned to %s, phase %v; want fixed-window on the epoch, no phase (fit %s, note %q)", inf.Algorithm, al, inf.Params.PhaseS, inf.Fit, inf.Note)
			}
			if hasNote := strings.Contains(inf.Note, "on its clock"); hasNote != (tt.note != "") || !strings.Contains(inf.Note, tt.note) {
				t.Errorf("note %q, want one with %q", inf.Note, tt.note)
			}
		})
	}
}
