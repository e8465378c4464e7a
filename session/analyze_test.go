package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// writeRecord writes a record file of n accepted answers 100 ms apart,
// with the recorded policy (JSON, "" for none); end false leaves out the
// end line (a warning when read).
func writeRecord(t *testing.T, path, policy string, n int, end bool) {
	t.Helper()
	var buf bytes.Buffer
	h := record.Header{Tool: "rlprobe test", Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Agent: "a1",
		Targets: []string{"http://t/api"}}
	if policy != "" {
		h.Policy = json.RawMessage(policy)
	}
	w, err := record.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		at := int64(i) * 100e6
		r := record.Result{Seq: int64(i), Agent: "a1", Method: "GET", URL: "http://t/api", Sched: at, Sent: at, Wrote: at,
			TTFB: at + 1e6, Done: at + 1e6, Outcome: record.OutcomeResponse, Status: 200}
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
	}
	if end {
		err = w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: int64(n), Sent: int64(n)})
	} else {
		err = w.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// limit5 declares 5 requests per 2 s, as the policy flags would.
func limit5() *PolicySpec {
	set := map[string]bool{"limit": true, "window": true}
	return &PolicySpec{Limit: 5, Window: 2 * time.Second, Changed: func(n string) bool { return set[n] }}
}

// TestAnalyze: Analyze judges the declared policy, else the recorded one;
// it refuses contradictory options and bad inputs as Usage errors before
// writing anything; --out writes a new file and --append adds to the
// input, each with the verdict naming its file.
func TestAnalyze(t *testing.T) {
	dir := t.TempDir()
	six := filepath.Join(dir, "six.jsonl")   // six accepted within 0.5 s: over 5 per 2 s
	four := filepath.Join(dir, "four.jsonl") // four: within 5 per 2 s
	cut := filepath.Join(dir, "cut.jsonl")
	writeRecord(t, six, "", 6, true)
	writeRecord(t, four, `{"version":1,"endpoints":[{"limit":3,"window":"2s"}]}`, 4, true)
	writeRecord(t, cut, "", 2, false)
	tests := []struct {
		name    string
		o       AnalyzeOptions
		wantErr string // "" for none; else a Usage error containing it
		verdict string
		limit   int64 // of the judged policy
	}{
		{name: "declared policy, over it", o: AnalyzeOptions{Files: []string{six}, Policy: limit5()}, verdict: verify.VerdictFail, limit: 5},
		{name: "declared policy, within it", o: AnalyzeOptions{Files: []string{four}, Policy: limit5()}, verdict: verify.VerdictPass, limit: 5},
		{name: "recorded policy", o: AnalyzeOptions{Files: []string{four}}, verdict: verify.VerdictFail, limit: 3},
		{name: "no policy anywhere", o: AnalyzeOptions{Files: []string{six}}, wantErr: "declare a policy"},
		{name: "bad policy", o: AnalyzeOptions{Files: []string{six}, Policy: &PolicySpec{Limit: 5, Changed: func(n string) bool { return n == "limit" }}}, wantErr: "--window"},
		{name: "bad fail-on", o: AnalyzeOptions{Files: []string{six}, Policy: limit5(), FailOn: "fatal"}, wantErr: "--fail-on: must be info, warning or error"},
		{name: "missing file", o: AnalyzeOptions{Files: []string{filepath.Join(dir, "nope.jsonl")}, Policy: limit5()}, wantErr: "no such file"},
		{name: "empty stdin", o: AnalyzeOptions{Files: []string{"-"}, Stdin: strings.NewReader(""), Policy: limit5()}, wantErr: "-: record: empty file"},
		{name: "out and append", o: AnalyzeOptions{Files: []string{six}, Out: "x", Append: true}, wantErr: "exclusive"},
		{name: "append to two", o: AnalyzeOptions{Files: []string{six, four}, Append: true}, wantErr: "give exactly one"},
		{name: "append to stdin", o: AnalyzeOptions{Files: []string{"-"}, Append: true}, wantErr: "give exactly one"},
		{name: "force without out", o: AnalyzeOptions{Files: []string{six}, Force: true}, wantErr: "--force goes with --out"},
		{name: "out over an input", o: AnalyzeOptions{Files: []string{six}, Policy: limit5(), Out: six, Force: true}, wantErr: "is an input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.o.FailOn == "" {
				tt.o.FailOn = "error"
			}
			before, _ := os.ReadFile(six)
			a, err := Analyze(tt.o)
			if after, _ := os.ReadFile(six); !bytes.Equal(before, after) {
				t.Error("Analyze modified an input")
			}
			if tt.wantErr != "" {
				if a != nil || ClassOf(err) != Usage || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Analyze = %v, %v (class %d); want a Usage error with %q", a, err, ClassOf(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rep := a.Report
			if rep.Verdict != tt.verdict || rep.Policy.Endpoints[0].Limit != tt.limit || rep.Schema != verify.SchemaAnalyze ||
				rep.RecordFile != tt.o.Files[0] || len(a.Files) != 1 || a.Files[0] != tt.o.Files[0] || a.Merged == nil {
				t.Errorf("verdict %s, limit %d, schema %s, record file %q, files %v; want %s, %d",
					rep.Verdict, rep.Policy.Endpoints[0].Limit, rep.Schema, rep.RecordFile, a.Files, tt.verdict, tt.limit)
			}
		})
	}
}

// TestAnalyzeWrites: Warn hears of a file without its end line; Out
// writes a new record holding the verdict (and refuses to replace it
// without Force); Append adds the verdict to the one input.
func TestAnalyzeWrites(t *testing.T) {
	dir := t.TempDir()
	cut, out := filepath.Join(dir, "cut.jsonl"), filepath.Join(dir, "out.jsonl")
	writeRecord(t, cut, "", 2, false)
	var warned []string
	o := AnalyzeOptions{Files: []string{cut}, Policy: limit5(), FailOn: "warning", Tool: "rlprobe 9", Out: out,
		Warn: func(w string) { warned = append(warned, w) }}
	a, err := Analyze(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "end") || a.Report.Complete || a.Report.RecordFile != out || a.Report.Tool != "rlprobe 9" {
		t.Errorf("warnings %q, complete %v, record file %q, tool %q", warned, a.Report.Complete, a.Report.RecordFile, a.Report.Tool)
	}
	if n := findingsIn(t, out); n != 1 {
		t.Errorf("--out file holds %d verdicts, want 1", n)
	}
	if _, err := Analyze(o); ClassOf(err) != Usage {
		t.Errorf("--out over an existing file without force = %v", err)
	}
	o.Force = true
	if _, err := Analyze(o); err != nil {
		t.Errorf("--out --force: %v", err)
	}

	data, _ := os.ReadFile(cut)
	a, err = Analyze(AnalyzeOptions{Files: []string{"-"}, Stdin: bytes.NewReader(data), Policy: limit5(), FailOn: "info"})
	if err != nil || a.Report.RecordFile != "" || len(a.Files) != 0 {
		t.Errorf("from stdin: %v, record file %q, files %q; want none", err, a.Report.RecordFile, a.Files)
	}

	o = AnalyzeOptions{Files: []string{cut}, Policy: limit5(), FailOn: "error", Append: true}
	for want := 1; want <= 2; want++ {
		if _, err := Analyze(o); err != nil {
			t.Fatal(err)
		}
		if n := findingsIn(t, cut); n != want {
			t.Errorf("after append %d, the input holds %d verdicts", want, n)
		}
	}
}

// findingsIn returns how many verdict documents the record file at path
// holds.
func findingsIn(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := record.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return len(run.Findings)
}
