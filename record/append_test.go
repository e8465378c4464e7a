package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAppend(t *testing.T) {
	complete := string(writeRun(t, 3, &End{Reason: ReasonCompleted, Scheduled: 3}))
	killed := string(writeRun(t, 3, nil))
	tests := []struct {
		name     string
		file     string
		results  int
		warnings int // from Append
		ended    bool
	}{
		{"after the end line", complete, 3, 0, true},
		{"to a file cut short", killed, 3, 0, false},
		{"removes a truncated last line", killed + `{"type":"result","seq":3,"meth`, 3, 1, false},
		{"completes a last line without newline", killed + res1, 4, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.jsonl")
			os.WriteFile(path, []byte(tt.file), 0o644)
			a, err := Append(path)
			if err != nil {
				t.Fatalf("Append = %v", err)
			}
			if w := a.Warnings(); len(w) != tt.warnings {
				t.Errorf("Append warnings = %q, want %d", w, tt.warnings)
			}
			if err := a.WriteFinding(map[string]string{"id": "window-limit-exceeded"}); err != nil {
				t.Fatal(err)
			}
			if err := a.WriteInference(map[string]string{"algorithm": "none"}); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
			if err := a.WriteFinding(map[string]string{}); !errors.Is(err, ErrClosed) {
				t.Errorf("WriteFinding after Close = %v, want ErrClosed", err)
			}
			data, _ := os.ReadFile(path)
			if !strings.HasPrefix(string(data), tt.file[:strings.LastIndex(tt.file, "\n")+1]) {
				t.Errorf("Append changed the lines before its own")
			}
			run, err := Read(strings.NewReader(string(data)))
			if err != nil {
				t.Fatalf("Read(appended) = %v", err)
			}
			if len(run.Results) != tt.results || len(run.Findings) != 1 || len(run.Inferences) != 1 || (run.End != nil) != tt.ended {
				t.Errorf("Read(appended) = %d results, %d findings, %d inferences, end %v; want %d, 1, 1, %v",
					len(run.Results), len(run.Findings), len(run.Inferences), run.End, tt.results, tt.ended)
			}
			for _, w := range run.Warnings {
				if strings.Contains(w, "truncated") {
					t.Errorf("Read(appended) warns %q: Append left a broken line", w)
				}
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.jsonl")
	os.WriteFile(newer, []byte(file(`{"type":"header","format":2}`)), 0o644)
	var fe *FormatError
	if _, err := Append(newer); !errors.As(err, &fe) {
		t.Errorf("Append(format 2) = %v, want a *FormatError", err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Append(empty); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Errorf("Append(empty) = %v, want a no-header error", err)
	}
	if _, err := Append(filepath.Join(dir, "missing.jsonl")); !errors.Is(err, os.ErrNotExist) ||
		!strings.HasPrefix(err.Error(), "record: ") {
		t.Errorf("Append(missing) = %v, want a record: error wrapping fs.ErrNotExist", err)
	}
	if b, _ := os.ReadFile(newer); string(b) != file(`{"type":"header","format":2}`) {
		t.Errorf("a refused Append changed the file to %q", b)
	}
}
