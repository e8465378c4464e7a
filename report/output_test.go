package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteOutput: "" and "-" write stdout, a path writes the file; a file
// that cannot be written is an *OutputError naming it, with the bare
// cause as its text; a report that does not render writes nothing.
func TestWriteOutput(t *testing.T) {
	in := loadScenario(t, 0)
	var want bytes.Buffer
	if err := Render(&want, FormatJSON, in, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name       string
		path       string
		format     Format
		wantStdout bool
		wantFile   bool
		wantOutErr bool
		wantErr    bool
	}{
		{"empty path", "", FormatJSON, true, false, false, false},
		{"dash", "-", FormatJSON, true, false, false, false},
		{"file", filepath.Join(dir, "r.json"), FormatJSON, false, true, false, false},
		{"unwritable", filepath.Join(dir, "no", "such", "r.json"), FormatJSON, false, false, true, true},
		{"unrenderable", filepath.Join(dir, "bad.out"), Format("pdf"), false, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout bytes.Buffer
			err := WriteOutput(tc.path, &stdout, tc.format, in, TableOptions{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tc.wantErr)
			}
			var oerr *OutputError
			if errors.As(err, &oerr) != tc.wantOutErr {
				t.Errorf("err %T %v: an *OutputError is %v", err, err, tc.wantOutErr)
			}
			if oerr != nil && (oerr.Path != tc.path || err.Error() != oerr.Err.Error() || !errors.Is(err, os.ErrNotExist)) {
				t.Errorf("OutputError %+v: want path %s, the cause's text, unwrapping to it", oerr, tc.path)
			}
			if got := stdout.Len() > 0; got != tc.wantStdout || (got && !bytes.Equal(stdout.Bytes(), want.Bytes())) {
				t.Errorf("stdout %d bytes, want the report: %v", stdout.Len(), tc.wantStdout)
			}
			data, ferr := os.ReadFile(tc.path)
			if (ferr == nil) != tc.wantFile || (ferr == nil && !bytes.Equal(data, want.Bytes())) {
				t.Errorf("file: %v (%d bytes), want the report: %v", ferr, len(data), tc.wantFile)
			}
		})
	}
}
