package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// TestReadFindingForms: a finding line may hold a whole check document or
// a single finding; both are read, single findings gathered per file into
// one synthetic analyze document judged as with --fail-on error.
func TestReadFindingForms(t *testing.T) {
	dir := t.TempDir()
	whole := writeRun(t, dir, "whole.jsonl", fixedWindowRun())
	single := writeRun(t, dir, "single.jsonl", bucketRun())
	in, err := ReadFiles(whole, single)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Verdicts) != 2 {
		t.Fatalf("got %d check documents, want 2", len(in.Verdicts))
	}
	// Latest first: the whole document has a time, the gathered one none.
	c0, c1 := in.Verdicts[0], in.Verdicts[1]
	if c0.Synthetic || c0.Report.Schema != verify.SchemaCheck || c0.Report.Verdict != verify.VerdictFail ||
		len(c0.Report.Findings) != 2 || !c0.Time.Equal(start0.Add(5*time.Second)) || c0.File != whole {
		t.Errorf("whole document = %+v", c0)
	}
	if got := c0.Report.Policy.String(); got != "GET /api: 10 in any 1s" {
		t.Errorf("whole document's policy = %q", got)
	}
	raw, _ := c0.Raw()
	want, _ := json.Marshal(fixedWindowRun().findings[0])
	if !bytes.Equal(raw, want) {
		t.Errorf("stored document not kept verbatim without its type:\n got %.100s\nwant %.100s", raw, want)
	}
	if !c1.Synthetic || c1.Report.Schema != verify.SchemaAnalyze || c1.Report.Verdict != verify.VerdictPass ||
		len(c1.Report.Findings) != 2 || c1.Report.RecordFile != single || c1.Report.Policy.String() != "rate 2/s, capacity 4" {
		t.Errorf("gathered document = %+v", c1)
	}
	if len(in.Inferences) != 1 || in.Inferences[0].Algorithm != "fixed-window" {
		t.Errorf("inferences = %+v", in.Inferences)
	}
	if in.Verdict() != verify.VerdictFail {
		t.Errorf("Verdict() = %s, want fail", in.Verdict())
	}
}

func TestVerdict(t *testing.T) {
	fail := verify.Finding{ID: "window-limit-exceeded", Severity: "error", Certainty: "certain", Message: "x"}
	possible := verify.Finding{ID: "window-limit-exceeded", Severity: "error", Certainty: "possible", Message: "x"}
	warn := verify.Finding{ID: "retry-after-late", Severity: "warning", Certainty: "certain", Message: "x"}
	doc := func(verdict string, at int) map[string]any {
		return map[string]any{"schema": verify.SchemaCheck, "verdict": verdict, "complete": verdict != "incomplete",
			"time": start0.Add(time.Duration(at) * time.Second), "findings": []verify.Finding{}}
	}
	tests := []struct {
		name string
		docs []any
		want string
	}{
		{"nothing", nil, VerdictNone},
		{"a certain error", []any{fail}, verify.VerdictFail},
		{"possible and warnings pass", []any{possible, warn}, verify.VerdictPass},
		{"stored verdict wins", []any{map[string]any{"schema": verify.SchemaCheck, "verdict": "incomplete", "complete": false, "findings": []verify.Finding{}}}, verify.VerdictIncomplete},
		{"the latest added counts, not a sum", []any{map[string]any{"schema": verify.SchemaCheck, "verdict": "incomplete", "findings": []verify.Finding{}}, fail}, verify.VerdictFail},
		{"the latest in time counts", []any{doc("pass", 9), doc("fail", 3)}, verify.VerdictPass},
		{"the latest in time counts, added last", []any{doc("fail", 3), doc("pass", 9)}, verify.VerdictPass},
		{"judged when absent", []any{map[string]any{"schema": verify.SchemaAnalyze, "complete": true, "findings": []verify.Finding{possible}}}, verify.VerdictPass},
	}
	for _, tt := range tests {
		in := &Input{}
		for _, d := range tt.docs {
			if err := in.AddDocument(d); err != nil {
				t.Fatal(err)
			}
		}
		if got := in.Verdict(); got != tt.want {
			t.Errorf("%s: Verdict() = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestAddDocumentRefuses(t *testing.T) {
	in := &Input{}
	for _, doc := range []any{json.RawMessage(`[1]`), json.RawMessage(`{"schema":"rlprobe.x/v9"}`), map[string]int{"a": 1}, json.RawMessage(`{`)} {
		if err := in.AddDocument(doc); err == nil || !strings.HasPrefix(err.Error(), "report: ") {
			t.Errorf("AddDocument(%v) = %v, want a report: error", doc, err)
		}
	}
}

// TestReadTimeline compares the Input's timeline with record.Merge: runs
// with different starts and clock offsets land where Merge puts them.
func TestReadTimeline(t *testing.T) {
	dir := t.TempDir()
	a := leakyRun()
	a.header.Agent = "x"
	b := leakyRun()
	b.header.Agent = "x" // a collision: both become a1, a2
	b.header.Start = start0.Add(1500 * time.Millisecond)
	b.header.ClockOffsetNS = int64(200 * time.Millisecond)
	pa, pb := writeRun(t, dir, "a.jsonl", a), writeRun(t, dir, "b.jsonl", b)
	in, err := ReadFiles(pa, pb)
	if err != nil {
		t.Fatal(err)
	}
	var runs []*record.Run
	for _, p := range []string{pa, pb} {
		f, _ := os.Open(p)
		r, err := record.Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	m := record.Merge(runs...)
	if !in.Start.Equal(m.Start) {
		t.Errorf("Start = %v, Merge says %v", in.Start, m.Start)
	}
	if len(in.reqs) != len(m.Results) {
		t.Fatalf("%d requests, Merge has %d", len(in.reqs), len(m.Results))
	}
	for i, r := range m.Results {
		if q := in.reqs[i]; q.t != r.Sent || q.recv != r.TTFB || in.Agents[q.agent].Name != r.Agent {
			t.Errorf("request %d: t=%d recv=%d agent=%s; Merge: sent=%d ttfb=%d agent=%s", i, q.t, q.recv,
				in.Agents[q.agent].Name, r.Sent, r.TTFB, r.Agent)
		}
	}
	if got := []string{in.Agents[0].Name, in.Agents[1].Name}; !slices.Equal(got, []string{"x", "x-2"}) {
		t.Errorf("agent names = %v, want x x-2 (merge keeps names, numbering repeats)", got)
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeRun(t, dir, "good.jsonl", leakyRun())
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("hello\n"), 0o644)
	future := filepath.Join(dir, "future.jsonl")
	os.WriteFile(future, []byte(`{"type":"header","format":9}`+"\n"), 0o644)
	if _, err := ReadFiles(good, garbage); err == nil || !strings.Contains(err.Error(), "garbage.jsonl") {
		t.Errorf("garbage: error %v, want one naming the file", err)
	}
	var fe *record.FormatError
	if _, err := ReadFiles(future); !errors.As(err, &fe) || fe.Format != 9 {
		t.Errorf("future format: error %v, want a *record.FormatError", err)
	}
	if _, err := ReadFiles(filepath.Join(dir, "missing.jsonl")); err == nil || !strings.HasPrefix(err.Error(), "report: ") {
		t.Errorf("missing file: error %v", err)
	}
	// A line that is not a document is skipped with a warning.
	data, _ := os.ReadFile(good)
	data = append(data, []byte(`{"type":"finding","hello":1}`+"\n")...)
	in, err := Read(Source{Name: "odd.jsonl", R: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Warnings) != 1 || !strings.Contains(in.Warnings[0], "odd.jsonl: line") {
		t.Errorf("warnings = %q, want one naming the line", in.Warnings)
	}
}

// TestClasses: the contract's outcome classes, with the declared reject
// status, and delayed for latency well above the rest.
func TestClasses(t *testing.T) {
	s := synth{header: header("", `{"version":1,"endpoints":[{"limit":5,"window":"1s","status":418}]}`)}
	add := func(status int, lat int64) {
		s.results = append(s.results, response(int64(len(s.results)), "", int64(len(s.results)+1)*ms, lat, status, nil))
	}
	for range 8 {
		add(200, ms)
	}
	add(200, 500*ms) // delayed: ≥ max(4 × 1ms, 1ms + 100ms)
	add(200, 100*ms) // not delayed: below 101ms
	add(418, ms)     // the declared status
	add(429, ms)     // still rejected
	add(503, ms)
	add(404, ms)
	add(302, ms)
	s.results = append(s.results,
		record.Result{Seq: 100, Method: "GET", URL: "http://h/", Sched: 20 * ms, Sent: 20 * ms, Outcome: record.OutcomeError, Err: "timeout"},
		record.Result{Seq: 101, Method: "GET", URL: "http://h/", Sched: 21 * ms, Outcome: record.OutcomeNotSent, Err: "abort"})
	s.end = &record.End{Reason: record.ReasonAborted}
	in, err := ReadFiles(writeRun(t, t.TempDir(), "c.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	sum := in.Summary()
	want := []Class{Accepted, Accepted, Accepted, Accepted, Accepted, Accepted, Accepted, Accepted, Delayed, Accepted,
		Rejected, Rejected, Rejected, Other, Other, Error, NotSent}
	var got []Class
	for _, q := range in.reqs {
		got = append(got, q.class)
	}
	if !slices.Equal(got, want) {
		t.Errorf("classes = %v\nwant      %v", got, want)
	}
	if sum.Accepted != 10 || sum.Delayed != 1 || sum.Rejected != 3 || sum.Other != 2 || sum.Errors != 1 ||
		sum.NotSent != 1 || sum.Sent != 16 || sum.Scheduled != 17 || sum.Complete || sum.Reason != "aborted" {
		t.Errorf("summary = %+v", sum)
	}
	if sum.DelayedThresholdMS != 101 {
		t.Errorf("delayed threshold = %vms, want 101", sum.DelayedThresholdMS)
	}
	// The summary's latency is run's: done − sent, 80 µs more than the
	// hold (ttfb − wrote) the classes are judged by.
	if d := sum.Latency["200"]; d.Count != 10 || d.MaxUS != 500_080 || d.P50US != 1080 {
		t.Errorf("latency of 200 = %+v, want 10 values, max 500080µs, p50 1080µs", d)
	}
}

func TestDelayedThreshold(t *testing.T) {
	for _, tt := range []struct{ p10, want time.Duration }{
		{0, 100 * time.Millisecond},
		{time.Millisecond, 101 * time.Millisecond},
		{50 * time.Millisecond, 200 * time.Millisecond},
	} {
		if got := DelayedThreshold(tt.p10); got != tt.want {
			t.Errorf("DelayedThreshold(%v) = %v, want %v", tt.p10, got, tt.want)
		}
	}
}

// TestTrailingCounts checks the count drawn against the limit, exactly,
// for a sliding window, a fixed window (epoch and first request) and a
// bucket.
func TestTrailingCounts(t *testing.T) {
	sends := []int64{1, 101, 201, 901, 1001, 1051, 1951, 2101} // ms
	tests := []struct {
		name   string
		policy string
		want   []float64
		viol   int
	}{
		{"sliding 3 per 1s", policyOf(`{"limit":3,"window":"1s"}`), []float64{1, 2, 3, 4, 4, 5, 3, 2}, 3},
		{"fixed 3 per 1s, epoch", policyOf(`{"limit":3,"window":"1s","window_type":"fixed","align":"epoch"}`), []float64{1, 2, 3, 4, 1, 2, 3, 1}, 1},
		{"fixed 3 per 1s, first request at 1ms", policyOf(`{"limit":3,"window":"1s","window_type":"fixed"}`), []float64{1, 2, 3, 4, 1, 2, 3, 1}, 1},
		{"bucket 2, 1/s", policyOf(`{"capacity":2,"rate":"1/s"}`), []float64{1, 1.9, 2.8, 3.1, 4, 4.95, 5.05, 5.9}, 6},
	}
	for _, tt := range tests {
		s := synth{header: header("", tt.policy)}
		for i, ms0 := range sends {
			s.results = append(s.results, response(int64(i), "", ms0*ms, ms, 200, nil))
		}
		in, err := ReadFiles(writeRun(t, t.TempDir(), "t.jsonl", s))
		if err != nil {
			t.Fatal(err)
		}
		p := in.prepare()
		ws := in.trailingCounts(p, in.acceptedByGroup(p))
		var got []float64
		for _, pt := range ws.points {
			got = append(got, float64(int(pt.v*1000+0.5))/1000)
		}
		if !slices.Equal(got, tt.want) || ws.violations != tt.viol {
			t.Errorf("%s: counts %v (%d above), want %v (%d above)", tt.name, got, ws.violations, tt.want, tt.viol)
		}
	}
}

// TestTrailingCountsPerClient: a per-client key counts each client apart.
func TestTrailingCountsPerClient(t *testing.T) {
	s := synth{header: header("", policyOf(`{"limit":2,"window":"1s","key":"header:X-Key"}`))}
	for i := range 6 {
		s.results = append(s.results, response(int64(i), []string{"a", "b"}[i%2], int64(i+1)*100*ms, ms, 200, nil))
	}
	in, err := ReadFiles(writeRun(t, t.TempDir(), "t.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	p := in.prepare()
	ws := in.trailingCounts(p, in.acceptedByGroup(p))
	var got []float64
	for _, pt := range ws.points {
		got = append(got, pt.v)
	}
	if want := []float64{1, 1, 2, 2, 3, 3}; !slices.Equal(got, want) || ws.violations != 2 {
		t.Errorf("counts %v (%d above), want %v (2 above)", got, ws.violations, want)
	}
}

func TestRecoveriesAndClaims(t *testing.T) {
	s := synth{header: header("", policyOf(`{"limit":1,"window":"1s"}`))}
	ra := http.Header{"Retry-After": {"2"}}
	reset := http.Header{"Ratelimit": {"limit=1, remaining=0, reset=3"}}
	s.results = []record.Result{
		response(0, "", ms, ms, 200, nil),
		response(1, "", 100*ms, ms, 429, ra),
		response(2, "", 200*ms, ms, 429, reset),
		response(3, "", 1500*ms, ms, 200, nil),
		response(4, "", 1600*ms, ms, 429, nil),
	}
	in, err := ReadFiles(writeRun(t, t.TempDir(), "t.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	p := in.prepare()
	if got := in.recoveries(p); !slices.Equal(got, []int64{1500 * ms}) {
		t.Errorf("recoveries = %v, want [1.5s]", got)
	}
	// A burst: the rejection is still in flight when the next accepted
	// request goes out, so quota did not visibly come back.
	burst := synth{header: header("", "")}
	burst.results = []record.Result{
		response(0, "", ms, ms, 200, nil),
		response(1, "", 2*ms, 10*ms, 429, nil),
		response(2, "", 3*ms, 1000*ms, 200, nil),
	}
	bin, err := ReadFiles(writeRun(t, t.TempDir(), "b.jsonl", burst))
	if err != nil {
		t.Fatal(err)
	}
	if got := bin.recoveries(bin.prepare()); len(got) != 0 {
		t.Errorf("burst: recoveries = %v, want none", got)
	}
	cs := in.claims(p, in.acceptedByGroup(p))
	if len(cs) != 2 {
		t.Fatalf("claims = %+v, want 2", cs)
	}
	recv1 := 100*ms + 50_000 + ms
	if c := cs[0]; c.kind != claimRetryAfter || c.wait != 2e9 || c.sent != 100*ms || c.recv != recv1 || c.observed != 1500*ms-recv1 {
		t.Errorf("Retry-After claim = %+v", c)
	}
	if c := cs[1]; c.kind != claimReset || c.wait != 3e9 {
		t.Errorf("reset claim = %+v", c)
	}
}

// policyOf wraps one endpoint's JSON in a policy document.
func policyOf(endpoint string) string { return `{"version":1,"endpoints":[` + endpoint + `]}` }

// TestStoredPolicies: verify's policy documents are read with verify's
// own decoder; one this rlprobe cannot read keeps its verdict, with a
// warning, and a null policy is no policy.
func TestStoredPolicies(t *testing.T) {
	in := &Input{}
	for _, d := range []string{
		`{"schema":"rlprobe.analyze/v1","verdict":"pass","complete":true,"findings":[],"policy":` +
			policyOf(`{"path":"/a","method":"get","rate":"300/m","burst":3,"key":"ip"}`) + `}`,
		`{"schema":"rlprobe.analyze/v1","verdict":"fail","complete":true,"findings":[],"policy":{"version":1,"endpoints":[{"limt":3}]}}`,
		`{"schema":"rlprobe.check/v1","verdict":"pass","complete":true,"findings":[],"policy":null}`,
	} {
		if err := in.AddDocument(json.RawMessage(d)); err != nil {
			t.Fatal(err)
		}
	}
	// A verify.Report without a policy writes the zero Policy: no policy,
	// no warning.
	if err := in.AddDocument(verify.Report{Schema: verify.SchemaCheck, Tool: "rlprobe x", Verdict: "pass", Complete: true}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range in.Verdicts {
		got = append(got, in.Verdicts[i].Report.Verdict+" "+in.Verdicts[i].Report.Policy.String())
	}
	want := []string{"pass no policy", "pass no policy", "fail no policy", "pass GET /a: rate 5/s, capacity 4 per ip"}
	if !slices.Equal(got, want) {
		t.Errorf("verdicts, latest first = %q, want %q", got, want)
	}
	if len(in.Warnings) != 1 || !strings.Contains(in.Warnings[0], "limt") {
		t.Errorf("warnings = %q, want one naming the unknown key", in.Warnings)
	}
}

func TestStackHeights(t *testing.T) {
	for _, cs := range [][]int32{{1, 0, 0, 0, 0, 0}, {5, 0, 5, 0, 0, 0}, {1000, 1, 1, 1, 1, 1}, {3, 1, 7, 0, 2, 0}} {
		hs := stackHeights(cs, 16)
		sum := 0
		for c, h := range hs {
			sum += h
			if (cs[c] > 0) != (h > 0) {
				t.Errorf("stackHeights(%v) = %v: class %d has %d px for %d requests", cs, hs, c, h, cs[c])
			}
		}
		if sum != 16 {
			t.Errorf("stackHeights(%v) = %v, sum %d, want 16", cs, hs, sum)
		}
	}
	if hs := stackHeights([]int32{3, 0, 1, 0, 0, 0}, 16); hs[0] != 12 || hs[2] != 4 {
		t.Errorf("stackHeights(3:1) = %v, want 12 and 4", hs)
	}
}

// TestTableFits: every line fits the width, colour only when asked.
func TestTableFits(t *testing.T) {
	in := loadScenario(t, 3)
	for _, width := range []int{60, 80, 100, 160} {
		var b bytes.Buffer
		if err := Table(&b, in, TableOptions{Width: width}); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(b.String(), "\n") {
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line %d has %d columns: %q", width, i+1, n, line)
			}
		}
		if bytes.Contains(b.Bytes(), []byte("\x1b[")) {
			t.Errorf("width %d: colour without Color", width)
		}
		if !strings.HasPrefix(b.String(), "FAIL: ") {
			t.Errorf("width %d: the verdict is not first: %.40q", width, b.String())
		}
	}
	var b bytes.Buffer
	if err := Table(&b, in, TableOptions{Width: 100, Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), ansiBold+ansiRed+"FAIL:"+ansiReset) || !strings.Contains(b.String(), ansiRed+"error"+ansiReset) {
		t.Errorf("coloured table lacks the verdict or severity colour: %.60q", b.String())
	}
	for i, line := range strings.Split(stripANSI(b.String()), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("coloured: line %d has %d columns", i+1, n)
		}
	}
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"table": FormatTable, "JSON": FormatJSON, "md": FormatMarkdown, "xml": FormatJUnit, " html ": FormatHTML} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("pdf"); err == nil {
		t.Error("ParseFormat(pdf) succeeded")
	}
}

// TestMarkdownEscapes: cells cannot break the table or inject HTML.
func TestMarkdownEscapes(t *testing.T) {
	in := &Input{}
	if err := in.AddDocument(verify.Finding{ID: "cacheable-429", Severity: "error", Certainty: "certain", Endpoint: "GET /a|b",
		Message: "a | b\n<img src=x> *bold* `code`"}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Markdown(&b, in); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "| ❌") {
			if n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); n != 9 {
				t.Errorf("row has %d cell separators, want 9: %s", n, line)
			}
			if strings.Contains(line, "<img") || strings.Contains(line, "*bold*") {
				t.Errorf("row not escaped: %s", line)
			}
		}
	}
}
