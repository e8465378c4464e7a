package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

var update = flag.Bool("update", false, "rewrite golden files")

// start0 is every synthetic run's start: a whole second, so epoch-aligned
// windows start at whole seconds of the run.
var start0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const ms = int64(time.Millisecond)

// synth is a synthetic run, written by writeRun.
type synth struct {
	header     record.Header
	results    []record.Result
	findings   []any // check documents or single findings, one line each
	inferences []any
	end        *record.End
}

// writeRun writes s as a record file in dir and returns its path.
func writeRun(t testing.TB, dir, name string, s synth) string {
	t.Helper()
	var b bytes.Buffer
	w, err := record.NewWriter(&b, s.header)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.results {
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range s.findings {
		if err := w.WriteFinding(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, inf := range s.inferences {
		if err := w.WriteInference(inf); err != nil {
			t.Fatal(err)
		}
	}
	if s.end != nil {
		err = w.Close(*s.end)
	} else {
		err = w.Flush()
	}
	if err != nil && s.end != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// header returns a run header with the policy (raw JSON, may be "").
func header(agent, policy string, targets ...string) record.Header {
	h := record.Header{Tool: "rlprobe v0.0.0-test", Go: "go1.26", Start: start0, Agent: agent, Host: "test",
		Targets: targets, Seed: 1, Captured: []string{"Retry-After", "RateLimit", "RateLimit-Policy"}}
	if policy != "" {
		h.Policy = json.RawMessage(policy)
	}
	return h
}

// response builds an answered result; sent must not be 0, which record
// files read as "never sent".
func response(seq int64, client string, sent, lat int64, status int, hdr http.Header) record.Result {
	return record.Result{Seq: seq, Client: client, Method: "GET", URL: "http://127.0.0.1:8080/api", Phase: "edge",
		Sched: sent, Sent: sent, Wrote: sent + 50_000, TTFB: sent + 50_000 + lat, Done: sent + 80_000 + lat,
		Outcome: record.OutcomeResponse, Status: status, Headers: hdr}
}

const fixedPolicy = `{"version":1,"endpoints":[{"path":"/api","method":"GET","limit":10,"window":"1s","key":"global"}]}`

// fixedWindowRun is a fixed window of 10 per second (epoch-aligned)
// judged against a sliding policy of 10 per second: two clients send 15/s
// each for 4 s; the check document fails on the window edge, with a
// warning; an infer document identifies the fixed window.
func fixedWindowRun() synth {
	s := synth{header: header("", fixedPolicy, "http://127.0.0.1:8080/api")}
	seq := int64(0)
	inWindow := map[int64]int{}
	for i := 0; i < 60; i++ {
		for c, client := range []string{"k1", "k2"} {
			sent := int64(i)*66*ms + int64(c)*33*ms + 7*ms
			w := sent / (1000 * ms)
			var r record.Result
			if inWindow[w] < 10 {
				inWindow[w]++
				r = response(seq, client, sent, 2*ms+int64(seq%5)*100_000, 200, http.Header{"Ratelimit": {fmt.Sprintf("limit=10, remaining=%d, reset=1", 10-inWindow[w])}})
			} else {
				wait := (w+1)*1000*ms - sent
				r = response(seq, client, sent, 400_000, 429, http.Header{"Retry-After": {fmt.Sprint((wait + 999*ms) / (1000 * ms))}})
			}
			s.results = append(s.results, r)
			seq++
		}
	}
	// One error, one 404, one never sent.
	e := record.Result{Seq: seq, Client: "k1", Method: "GET", URL: "http://127.0.0.1:8080/api", Sched: 4000 * ms,
		Sent: 4000 * ms, Done: 4002 * ms, Outcome: record.OutcomeError, Err: record.ErrReset, ErrMsg: "connection reset"}
	o := response(seq+1, "k2", 4010*ms, ms, 404, nil)
	o.URL = "http://127.0.0.1:8080/missing"
	n := record.Result{Seq: seq + 2, Client: "k2", Method: "GET", URL: "http://127.0.0.1:8080/api", Sched: 4020 * ms,
		Outcome: record.OutcomeNotSent, Err: "cap"}
	s.results = append(s.results, e, o, n)
	s.end = &record.End{Reason: record.ReasonCompleted, Scheduled: seq + 3, Sent: seq + 2}
	bound := int64(10)
	s.findings = []any{map[string]any{
		"schema": "rlprobe.check/v1", "tool": "rlprobe v0.0.0-test", "time": start0.Add(5 * time.Second),
		"verdict": "fail", "complete": true, "pass": false,
		"targets": []string{"http://127.0.0.1:8080/api"}, "policy": json.RawMessage(fixedPolicy),
		"findings": []verify.Finding{{
			ID: "window-limit-exceeded", Severity: "error", Certainty: "certain", Check: "edge", Endpoint: "GET /api",
			Message: "20 accepted requests certainly arrived within 1s; the policy allows 10",
			Hint:    "A fixed window lets up to 2N through around its edge: use a sliding log or declare --window-type fixed.",
			Evidence: verify.Evidence{Refs: []string{"a1:26", "a1:27", "a1:30"}, StartNS: 858 * ms, EndNS: 1440 * ms, Count: 20,
				Bound: &bound, Headers: http.Header{"Ratelimit": {"limit=10, remaining=0, reset=1"}}},
		}, {
			ID: "retry-after-late", Severity: "warning", Certainty: "possible", Check: "retry-after", Endpoint: "GET /api",
			Client: "k2", Message: "a request was accepted 0.6s before the advertised Retry-After", Hint: "Advertise the real wait.",
			Evidence: verify.Evidence{Refs: []string{"a1:41"}, StartNS: 1353 * ms, EndNS: 2007 * ms, Count: 1},
		}},
		"record_file": "fixed.jsonl",
	}}
	limit, window := infer.Param{Value: 10, Low: 10, High: 10}, infer.Param{Value: 1, Low: 0.95, High: 1.02}
	epoch, st := "epoch", 429
	honest, grade, wait := true, "rounded-up", 0.42
	s.inferences = []any{infer.Inference{
		Schema: infer.Schema, Tool: "rlprobe v0.0.0-test", Algorithm: infer.FixedWindow, Fit: infer.FitExact, Closest: infer.FixedWindow, Misses: []infer.Miss{},
		Params: infer.Params{Limit: &limit, WindowS: &window}, Alignment: &epoch, Key: "global", RejectStatus: &st,
		Headers: []string{"draft-7"}, RetryAfter: infer.RetryAfter{Sent: true, Honest: &honest, Grade: &grade, TrueWaitS: &wait}, Reproduced: 0.985,
		Alternatives: []infer.Alternative{{Algorithm: infer.SlidingWindowCounter, Reproduced: 0.91, RuledOutBy: "20 accepted across the edge at 1s"},
			{Algorithm: infer.None, Reproduced: 0.5, RuledOutBy: "40 requests were rejected"}},
		Requests: 123, DurationS: 4.03, Complete: true, RecordFile: "fixed.jsonl",
	}}
	return s
}

const bucketPolicy = `{"version":1,"endpoints":[{"rate":"2/s","capacity":4,"headers":["draft-8"]}]}`

// bucketRun is a token bucket (rate 2/s, capacity 4) that keeps its policy; the
// findings are stored one per line, as single findings.
func bucketRun() synth {
	s := synth{header: header("agent-1", bucketPolicy, "http://127.0.0.1:9090/")}
	tokens, last := 4.0, int64(0)
	for i := int64(0); i < 30; i++ {
		sent := ms + i*333*ms
		if i > 0 {
			tokens = min(4, tokens+2*float64(sent-last)/1e9)
		}
		last = sent
		r := response(i, "", sent, 3*ms, 200, nil)
		r.URL = "http://127.0.0.1:9090/"
		r.Phase = "sustained"
		if tokens >= 1 {
			tokens--
		} else {
			r.Status = 429
			r.Headers = http.Header{"Retry-After": {"1"}}
		}
		s.results = append(s.results, r)
	}
	s.end = &record.End{Reason: record.ReasonCompleted, Scheduled: 30, Sent: 30}
	s.findings = []any{
		verify.Finding{ID: "ratelimit-header-missing", Severity: "info", Certainty: "certain", Check: "headers", Endpoint: "/",
			Message: "no response carried a rate-limit header", Hint: "Send RateLimit and RateLimit-Policy.",
			Evidence: verify.Evidence{Refs: []string{"agent-1:0"}, Count: 30}},
		verify.Finding{ID: "under-admission", Severity: "warning", Certainty: "possible", Check: "sustained", Endpoint: "/",
			Message:  "a rejection at 7.992s while the pessimistic count was 2 of 4",
			Evidence: verify.Evidence{Refs: []string{"agent-1:24"}, StartNS: 7992 * ms, EndNS: 7992 * ms, Count: 2}},
	}
	return s
}

// leakyRun is the nginx demo (rate=1r/s burst=3, delaying): a burst of 8
// gives one immediate answer, three delayed by 1, 2 and 3 s, four 503s.
// No check document; an infer document names the leaky bucket.
func leakyRun() synth {
	s := synth{header: header("", "", "http://127.0.0.1:8081/")}
	for i := int64(0); i < 8; i++ {
		sent := ms + i*100_000
		var r record.Result
		switch {
		case i == 0:
			r = response(i, "", sent, ms, 200, nil)
		case i <= 3:
			r = response(i, "", sent, i*1000*ms, 200, nil)
		default:
			r = response(i, "", sent, 300_000, 503, nil)
		}
		r.URL = "http://127.0.0.1:8081/"
		r.Phase = "burst"
		s.results = append(s.results, r)
	}
	s.end = &record.End{Reason: record.ReasonCompleted, Scheduled: 8, Sent: 8}
	capacity, rate := infer.Param{Value: 4, Low: 4, High: 4}, infer.Param{Value: 1, Low: 0.98, High: 1.02}
	undelayed, queue := infer.Param{Value: 1, Low: 1, High: 1}, infer.Param{Value: 3, Low: 3, High: 3}
	st := 503
	no := false
	s.inferences = []any{infer.Inference{
		Schema: infer.Schema, Tool: "rlprobe v0.0.0-test", Algorithm: infer.LeakyBucketQueue, Fit: infer.FitExact, Closest: infer.LeakyBucketQueue, Misses: []infer.Miss{},
		Params:         infer.Params{Capacity: &capacity, RatePerS: &rate, Undelayed: &undelayed, Queue: &queue},
		CountsRejected: &no, Key: "global", RejectStatus: &st, Headers: []string{"none"},
		Reproduced: 1, Alternatives: []infer.Alternative{},
		Requests: 8, DurationS: 3.01, Complete: true, RecordFile: "leaky.jsonl",
	}}
	return s
}

// scenarios are the golden inputs: name → record files.
var scenarios = []struct {
	name  string
	files []func() synth
}{
	{"fixed-window-fail", []func() synth{fixedWindowRun}},
	{"bucket-pass", []func() synth{bucketRun}},
	{"leaky-no-verdict", []func() synth{leakyRun}},
	{"merged", []func() synth{fixedWindowRun, bucketRun}},
}

// loadScenario writes a scenario's files to a temporary directory and
// reads them back, with fixed file names in the report.
func loadScenario(t testing.TB, i int) *Input {
	t.Helper()
	dir := t.TempDir()
	var srcs []Source
	for j, mk := range scenarios[i].files {
		name := fmt.Sprintf("run%d.jsonl", j+1)
		data, err := os.ReadFile(writeRun(t, dir, name, mk()))
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, Source{Name: name, R: bytes.NewReader(data)})
	}
	in, err := Read(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	in.Tool = "rlprobe v0.0.0-test"
	return in
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}
