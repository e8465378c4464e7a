package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/report"
)

// TestVerdictColor: analyze's verdict lines honour --color, NO_COLOR and
// FORCE_COLOR as report's table does: colour on a terminal or when forced,
// none when NO_COLOR is set or output is not a terminal.
func TestVerdictColor(t *testing.T) {
	one := filepath.Join(t.TempDir(), "one.jsonl")
	writeRun(t, one, "a1", 0, "", true, six()...)
	tests := []struct {
		name  string
		color string
		tty   bool
		env   map[string]string
		want  bool
	}{
		{"always", "always", false, nil, true},
		{"always beats NO_COLOR", "always", false, map[string]string{"NO_COLOR": "1"}, true},
		{"never", "never", true, nil, false},
		{"auto on a terminal", "auto", true, nil, true},
		{"auto on a terminal with NO_COLOR", "auto", true, map[string]string{"NO_COLOR": "1"}, false},
		{"auto on a pipe", "auto", false, nil, false},
		{"auto on a pipe with FORCE_COLOR", "auto", false, map[string]string{"FORCE_COLOR": "1"}, true},
		{"FORCE_COLOR loses to NO_COLOR", "auto", false, map[string]string{"FORCE_COLOR": "1", "NO_COLOR": "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLIWith(t, func(f *Factory) {
				f.IO.OutTTY = tt.tty
				f.Getenv = func(k string) string { return tt.env[k] }
			}, "analyze", one, "--limit", "5", "--window", "2s", "--color", tt.color)
			if code != ExitFindings {
				t.Fatalf("exit %d\n%s", code, errOut)
			}
			if got := strings.Contains(out, "\x1b["); got != tt.want {
				t.Errorf("ANSI codes: %v, want %v\n%q", got, tt.want, out)
			}
			if tt.want && (!strings.HasPrefix(out, "\x1b[1m\x1b[31mFAIL:\x1b[0m window-limit-exceeded") || !strings.Contains(out, "\x1b[31merror  \x1b[0m certain")) {
				t.Errorf("the verdict word and the severity are not coloured:\n%q", out)
			}
			if plain := stripANSI(out); !strings.HasPrefix(plain, "FAIL: window-limit-exceeded") {
				t.Errorf("without its colours the output changed:\n%s", plain)
			}
		})
	}
}

// TestInferenceColor: the inferred family is coloured only when asked.
func TestInferenceColor(t *testing.T) {
	inf := &infer.Inference{Algorithm: infer.FixedWindow, Key: infer.KeyUnknown}
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		if err := report.WriteInference(&b, inf, 1, report.TextOptions{Color: color}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "algorithm: \x1b[1m\x1b[36mfixed-window\x1b[0m"); got != color {
			t.Errorf("Color %v: coloured family %v\n%q", color, got, b.String())
		}
		if !strings.HasPrefix(stripANSI(b.String()), "algorithm: fixed-window\n") {
			t.Errorf("Color %v: %q", color, b.String())
		}
	}
}

// stripANSI removes ANSI SGR sequences.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := strings.IndexByte(s[i:], 'm')
			if j > 0 {
				i += j
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
