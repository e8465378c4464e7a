package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

var analyzeStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writeRun writes a record file with one accepted result per arrival
// (wrote ms, ttfb ms); end false leaves the file cut short.
func writeRun(t *testing.T, path, agent string, uncertainty time.Duration, policy string, end bool, arrivals ...[2]float64) {
	t.Helper()
	var buf bytes.Buffer
	h := record.Header{Tool: "rlprobe test", Start: analyzeStart, Agent: agent, Targets: []string{"http://t/api"},
		ClockUncertaintyNS: int64(uncertainty)}
	if policy != "" {
		h.Policy = json.RawMessage(policy)
	}
	w, err := record.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range arrivals {
		r := record.Result{Seq: int64(i), Agent: agent, Method: "GET", URL: "http://t/api", Sched: int64(a[0] * 1e6),
			Sent: int64(a[0] * 1e6), Wrote: int64(a[0] * 1e6), TTFB: int64(a[1] * 1e6), Done: int64(a[1] * 1e6),
			Outcome: record.OutcomeResponse, Status: 200}
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
	}
	if end {
		err = w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: int64(len(arrivals)), Sent: int64(len(arrivals))})
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

func six() [][2]float64 {
	var out [][2]float64
	for i := range 6 {
		out = append(out, [2]float64{float64(i * 100), float64(i*100) + 1})
	}
	return out
}

func TestAnalyze(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one.jsonl")
	writeRun(t, one, "a1", 0, "", true, six()...)

	code, out, errOut := runCLI(t, nil, "analyze", one, "--limit", "5", "--window", "2s", "--json")
	if code != ExitFindings {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	checkSchema(t, out)
	var rep verify.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != verify.SchemaAnalyze || rep.RecordFile != one || !hasFinding(rep, verify.IDWindowLimitExceeded, verify.Certain) {
		t.Errorf("document %s", out)
	}
	// Nothing was appended to the file; --append does it, on purpose.
	data, _ := os.ReadFile(one)
	if run, err := record.Read(bytes.NewReader(data)); err != nil || len(run.Findings) != 0 {
		t.Errorf("after analyze: %v, %d finding lines, want none", err, len(run.Findings))
	}
	if code, _, errOut := runCLI(t, nil, "analyze", one, "--limit", "5", "--window", "2s", "--append"); code != ExitFindings {
		t.Fatalf("--append: exit %d\n%s", code, errOut)
	}
	data, _ = os.ReadFile(one)
	if run, err := record.Read(bytes.NewReader(data)); err != nil || len(run.Findings) != 1 {
		t.Errorf("after analyze --append: %v, %d finding lines, want 1", err, len(run.Findings))
	}

	// The same from stdin, in text: the verdict comes first; nothing is
	// appended anywhere.
	f, stdout, stderr := testFactory(nil)
	f.IO.In = bytes.NewReader(data)
	code = Run(context.Background(), f, []string{"analyze", "-", "--policy", `"api";q=5;w=2`})
	if first, _, _ := strings.Cut(stdout.String(), "\n"); code != ExitFindings || first != "FAIL: window-limit-exceeded; also 1 below --fail-on error" {
		t.Errorf("analyze -: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A looser policy passes.
	if code, out, _ := runCLI(t, nil, "analyze", one, "--limit", "6", "--window", "2s"); code != ExitOK || !strings.HasPrefix(out, "PASS") {
		t.Errorf("--limit 6: exit %d\n%s", code, out)
	}
}

// TestAnalyzeMerge: two agents, three requests each, 1985 ms apart: six
// within 2 s. With agent b's clock known to ±20 ms the finding is only
// possible (exit 0).
func TestAnalyzeMerge(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		u    time.Duration
		code int
		want verify.Certainty
	}{{0, ExitFindings, verify.Certain}, {20 * time.Millisecond, ExitOK, verify.Possible}} {
		a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
		writeRun(t, a, "a", 0, "", true, [2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1})
		writeRun(t, b, "b", tt.u, "", true, [2]float64{1985, 1986}, [2]float64{1985, 1986}, [2]float64{1985, 1986})
		code, out, errOut := runCLI(t, nil, "analyze", a, b, "--limit", "5", "--window", "2s", "--json")
		var rep verify.Report
		_ = json.Unmarshal([]byte(out), &rep)
		if code != tt.code || !hasFinding(rep, verify.IDWindowLimitExceeded, tt.want) {
			t.Errorf("uncertainty %v: exit %d, want %d and a %s finding\n%s\n%s", tt.u, code, tt.code, tt.want, out, errOut)
		}
	}
}

func TestAnalyzeErrors(t *testing.T) {
	dir := t.TempDir()
	recorded := filepath.Join(dir, "recorded.jsonl")
	writeRun(t, recorded, "a1", 0, `{"version":1,"endpoints":[{"limit":5,"window":"2s"}]}`, true, six()...)
	bare := filepath.Join(dir, "bare.jsonl")
	writeRun(t, bare, "a1", 0, "", true, six()...)
	cut := filepath.Join(dir, "cut.jsonl")
	writeRun(t, cut, "a1", 0, "", false, [2]float64{0, 1})
	future := filepath.Join(dir, "future.jsonl")
	if err := os.WriteFile(future, []byte(`{"type":"header","format":99,"start":"2026-01-01T00:00:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"the recorded policy is used", []string{"analyze", recorded}, ExitFindings, ""},
		{"no policy anywhere", []string{"analyze", bare}, ExitUsage, "declare a policy"},
		{"a run cut short", []string{"analyze", cut, "--limit", "5", "--window", "2s"}, ExitUnreachable, "did not complete"},
		{"unknown format", []string{"analyze", future, "--limit", "5", "--window", "2s"}, ExitUsage, "format"},
		{"missing file", []string{"analyze", filepath.Join(dir, "nope.jsonl"), "--limit", "5", "--window", "2s"}, ExitUsage, "no such file"},
		{"bad policy", []string{"analyze", bare, "--limit", "5"}, ExitUsage, "--window: must be a positive duration"},
		{"bad --fail-on", []string{"analyze", bare, "--limit", "5", "--window", "2s", "--fail-on", "fatal"}, ExitUsage, "--fail-on"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.msg) {
			t.Errorf("%s: exit %d (want %d), stderr %q should contain %q\n%s", tt.name, code, tt.code, errOut, tt.msg, out)
		}
	}
}

// TestAnalyzeNeverModifiesInputs: analyze writes its verdict only where
// told. Inputs stay byte-identical over several runs (text, JSON, report
// files, --out); --out writes a new record file with the merged inputs and
// the verdict, never over an existing file without --force, never over an
// input; --append takes exactly one input file.
func TestAnalyzeNeverModifiesInputs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeRun(t, a, "a", 0, "", true, [2]float64{0, 1}, [2]float64{0, 1}, [2]float64{0, 1})
	writeRun(t, b, "b", 0, "", true, [2]float64{1985, 1986}, [2]float64{1985, 1986}, [2]float64{1985, 1986})
	before := map[string][]byte{}
	for _, p := range []string{a, b} {
		before[p], _ = os.ReadFile(p)
	}
	pol := []string{"--limit", "5", "--window", "2s"}
	out := filepath.Join(dir, "merged.jsonl")
	runs := []struct {
		args []string
		code int
	}{
		{[]string{"analyze", a}, ExitOK},
		{[]string{"analyze", a, b, "--json"}, ExitFindings},
		{[]string{"analyze", a, "--markdown", filepath.Join(dir, "s.md")}, ExitOK},
		{[]string{"analyze", a, b, "--out", out}, ExitFindings},
		{[]string{"analyze", a, b, "--out", out}, ExitUsage}, // exists
		{[]string{"analyze", a, b, "--out", out, "--force"}, ExitFindings},
		{[]string{"analyze", a, b, "--out", a, "--force"}, ExitUsage}, // an input
		{[]string{"analyze", a, b, "--append"}, ExitUsage},
		{[]string{"analyze", a, "--out", out, "--append"}, ExitUsage},
	}
	for _, r := range runs {
		code, stdout, stderr := runCLI(t, nil, append(r.args, pol...)...)
		if code != r.code {
			t.Errorf("%v: exit %d, want %d\n%s\n%s", r.args, code, r.code, stdout, stderr)
		}
	}
	for p, want := range before {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s changed", p)
		}
	}
	// The new file: both agents' results on one timeline, the verdict
	// naming results it holds.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	run, err := record.Read(bytes.NewReader(data))
	if err != nil || len(run.Results) != 6 || len(run.Findings) != 1 || run.End == nil || run.End.Scheduled != 6 {
		t.Fatalf("merged file: %v, %d results, %d findings, end %+v", err, len(run.Results), len(run.Findings), run.End)
	}
	var rep verify.Report
	if err := json.Unmarshal(run.Findings[0], &rep); err != nil || rep.RecordFile != out || !hasFinding(rep, verify.IDWindowLimitExceeded, verify.Certain) {
		t.Fatalf("stored verdict %s (%v)", run.Findings[0], err)
	}
	refs := map[string]bool{}
	for _, r := range record.Merge(run).Results {
		refs[record.Ref(r)] = true
	}
	for _, f := range rep.Findings {
		for _, ref := range f.Evidence.Refs {
			if !refs[ref] {
				t.Errorf("the stored verdict names %s, which the merged file does not hold", ref)
			}
		}
	}
}
