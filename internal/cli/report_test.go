package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// writeReportRun writes a small record file: a fixed window of 3 per second
// hit by 8 requests in 1.6 s by two clients, a check document that fails
// on the window, and an infer document. It returns the file's path.
func writeReportRun(t *testing.T, dir, name string, withDocs bool) string {
	t.Helper()
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	w, err := record.NewWriter(&b, record.Header{Tool: "rlprobe v0.0.0-test", Start: start, Agent: "a1",
		Targets: []string{"http://127.0.0.1:8080/api"},
		Policy:  json.RawMessage(`{"version":1,"endpoints":[{"path":"/api","limit":3,"window":"1s"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	for i := int64(0); i < 8; i++ {
		sent := (i + 1) * 200 * ms
		status, hdr := 200, http.Header(nil)
		if (i+1)%5 > 3 || (i+1)%5 == 0 {
			status, hdr = 429, http.Header{"Retry-After": {"1"}}
		}
		w.WriteResult(record.Result{Seq: i, Client: []string{"k1", "k2"}[i%2], Method: "GET",
			URL: "http://127.0.0.1:8080/api", Sched: sent, Sent: sent, Wrote: sent + ms, TTFB: sent + 3*ms,
			Done: sent + 4*ms, Outcome: record.OutcomeResponse, Status: status, Headers: hdr})
	}
	if withDocs {
		w.WriteFinding(json.RawMessage(`{"schema":"rlprobe.analyze/v1","tool":"rlprobe v0.0.0-test","verdict":"fail",
			"complete":true,"pass":false,"targets":["http://127.0.0.1:8080/api"],
			"policy":{"version":1,"endpoints":[{"path":"/api","limit":3,"window":"1s"}]},
			"findings":[{"id":"window-limit-exceeded","severity":"error","certainty":"certain","check":"burst",
			"endpoint":"/api","client":"","message":"4 accepted requests certainly arrived within 1s; the policy allows 3",
			"hint":"Use a sliding window.","evidence":{"refs":["a1:5","a1:6","a1:7","a1:8"],"start_ns":1200000000,
			"end_ns":1803000000,"count":4,"bound":3}}],"record_file":"run.jsonl"}`))
		w.WriteInference(json.RawMessage(`{"schema":"rlprobe.infer/v1","tool":"rlprobe v0.0.0-test","algorithm":"fixed-window",
			"params":{"limit":{"value":3,"low":3,"high":3},"window_s":{"value":1,"low":0.9,"high":1.1},"rate_per_s":null,
			"capacity":null,"undelayed":null,"queue":null},"alignment":"epoch","counts_rejected":null,"key":"global",
			"reject_status":429,"headers":["none"],"retry_after":{"sent":true,"honest":true},"max_rate_per_s":null,
			"confidence":1,"alternatives":[],"complete":true,"requests":8,"duration_s":1.6,"record_file":"run.jsonl"}`))
	}
	if err := w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: 8, Sent: 8}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runIn runs the CLI in-process in dir (so that file names in the output
// are relative and stable).
func runIn(t *testing.T, dir string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	t.Chdir(dir)
	return runCLI(t, env, args...)
}

// TestReportGolden pins `rlprobe report FILE` on a terminal-less stdout:
// the table, 100 columns, no colour.
func TestReportGolden(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	var code int
	var out, errOut string
	t.Run("in its directory", func(t *testing.T) { // the working directory comes back after it
		code, out, errOut = runIn(t, dir, nil, "report", "run.jsonl")
	})
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	golden(t, "report/table.golden", out)
	if !strings.HasPrefix(out, "FAIL: 1 certain error (window-limit-exceeded)") {
		t.Errorf("the verdict is not the first line: %.60q", out)
	}
}

func TestReportFormats(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	tests := []struct {
		args   []string
		prefix string
	}{
		{[]string{"--format", "json"}, "{\n  \"schema\": \"rlprobe.report/v1\""},
		{[]string{"--json"}, "{\n  \"schema\": \"rlprobe.report/v1\""},
		{[]string{"--format", "junit"}, "<?xml"},
		{[]string{"--format", "markdown"}, "### ❌ rlprobe: FAIL"},
		{[]string{"--format", "html"}, "<!DOCTYPE html>"},
		{[]string{"--format", "JSON", "--json"}, "{"},
	}
	for _, tt := range tests {
		args := append([]string{"report", "run.jsonl"}, tt.args...)
		code, out, errOut := runIn(t, dir, nil, args...)
		if code != 0 || !strings.HasPrefix(out, tt.prefix) {
			t.Errorf("rlprobe %v: exit %d, stdout %.50q, stderr %q; want 0 and %q…", args, code, out, errOut, tt.prefix)
		}
	}
	var doc struct {
		Verdict    string            `json:"verdict"`
		Checks     []json.RawMessage `json:"checks"`
		Inferences []json.RawMessage `json:"inferences"`
		Run        struct{ Accepted, Rejected int }
	}
	_, out, _ := runIn(t, dir, nil, "report", "run.jsonl", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Verdict != "fail" || len(doc.Checks) != 1 || len(doc.Inferences) != 1 || doc.Run.Accepted != 6 || doc.Run.Rejected != 2 {
		t.Errorf("report document: verdict %s, %d checks, %d inferences, run %+v; want fail, 1, 1, 6 accepted and 2 rejected",
			doc.Verdict, len(doc.Checks), len(doc.Inferences), doc.Run)
	}
}

// TestReportOutputFile: -o writes the file and nothing on stdout; the
// shared flags write their own files in the same run.
func TestReportOutputFile(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	code, out, errOut := runIn(t, dir, nil, "report", "run.jsonl", "--format", "html", "-o", "r.html",
		"--junit", "r.xml", "--markdown", "r.md")
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and nothing on stdout", code, out, errOut)
	}
	for name, prefix := range map[string]string{"r.html": "<!DOCTYPE html>", "r.xml": "<?xml", "r.md": "### ❌"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.HasPrefix(string(data), prefix) {
			t.Errorf("%s: %v, %.40q; want it to start with %q", name, err, data, prefix)
		}
	}
}

// TestReportMerge: several files are put on one timeline, and - reads
// stdin.
func TestReportMerge(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "a.jsonl", true)
	other := writeReportRun(t, dir, "b.jsonl", false)
	data, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	f, out, errOut := testFactory(nil)
	f.IO.In = bytes.NewReader(data)
	if code := Run(t.Context(), f, []string{"report", "a.jsonl", "-", "--json"}); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var doc struct {
		RecordFiles []string `json:"record_files"`
		Run         struct{ Scheduled int }
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Join(doc.RecordFiles, ",") != "a.jsonl,-" || doc.Run.Scheduled != 16 {
		t.Errorf("merged document: files %v, %d requests; want a.jsonl,- and 16", doc.RecordFiles, doc.Run.Scheduled)
	}
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("not json\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "future.jsonl"), []byte(`{"type":"header","format":7}`+"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"report"}, "requires at least 1 arg"},
		{"missing file", []string{"report", "nope.jsonl"}, "nope.jsonl"},
		{"not a record file", []string{"report", "bad.jsonl"}, "bad.jsonl"},
		{"future format", []string{"report", "future.jsonl"}, "upgrade rlprobe"},
		{"bad format", []string{"report", "run.jsonl", "--format", "pdf"}, "format must be"},
		{"json and table", []string{"report", "run.jsonl", "--json", "--format", "table"}, "disagree"},
		{"stdin twice", []string{"report", "-", "-"}, "only once"},
		{"unwritable -o", []string{"report", "run.jsonl", "-o", filepath.Join(dir, "no", "such", "dir", "r.txt")}, "-o:"},
		{"unwritable --html", []string{"report", "run.jsonl", "--html", filepath.Join(dir, "no", "r.html")}, "--html:"},
	}
	for _, tt := range tests {
		code, _, errOut := runIn(t, dir, nil, tt.args...)
		if code != ExitUsage || !strings.Contains(errOut, tt.want) || !strings.HasPrefix(errOut, "rlprobe") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tt.name, code, errOut, tt.want)
		}
	}
}

// TestReportColor: colour only on a terminal or when forced; NO_COLOR and
// --color never win over the terminal.
func TestReportColor(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	t.Chdir(dir)
	tests := []struct {
		name string
		tty  bool
		env  map[string]string
		args []string
		want bool
	}{
		{"pipe", false, nil, nil, false},
		{"terminal", true, nil, nil, true},
		{"NO_COLOR", true, map[string]string{"NO_COLOR": "1"}, nil, false},
		{"--color never", true, nil, []string{"--color", "never"}, false},
		{"--color always", false, nil, []string{"--color", "always"}, true},
		{"FORCE_COLOR", false, map[string]string{"FORCE_COLOR": "1"}, nil, true},
		{"terminal, -o file", true, nil, []string{"-o", "out.txt"}, false},
	}
	for _, tt := range tests {
		f, out, errOut := testFactory(tt.env)
		f.IO.OutTTY = tt.tty
		if code := Run(t.Context(), f, append([]string{"report", "run.jsonl"}, tt.args...)); code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", tt.name, code, errOut)
		}
		text := out.String()
		if len(tt.args) > 0 && tt.args[0] == "-o" {
			data, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
			text = string(data)
		}
		if got := strings.Contains(text, "\x1b["); got != tt.want {
			t.Errorf("%s: colour %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestReportWidth: the table fits the terminal width.
func TestReportWidth(t *testing.T) {
	dir := t.TempDir()
	writeReportRun(t, dir, "run.jsonl", true)
	t.Chdir(dir)
	f, out, _ := testFactory(nil)
	f.IO.Width = 64
	if code := Run(t.Context(), f, []string{"report", "run.jsonl"}); code != 0 {
		t.Fatal(code)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if n := len([]rune(line)); n > 64 {
			t.Errorf("line of %d columns on a 64-column terminal: %q", n, line)
		}
	}
}
