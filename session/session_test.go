package session

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// memServer serves routes on an in-memory listener and returns the probe
// options reaching path.
func memServer(t *testing.T, routes ...testserver.Route) func(path string) probe.Options {
	t.Helper()
	srv, err := testserver.New(testserver.Config{Routes: routes, Handler: testserver.HandlerOptions{EchoArrival: true}})
	if err != nil {
		t.Fatal(err)
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return func(path string) probe.Options {
		return probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + path}, Dial: ml.Dial}
	}
}

func burstPlan(n int) *patterns.Plan {
	return &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{{Pattern: patterns.PatternBurst, Count: n}}}
}

var bucket = testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 1, Capacity: 4}, Status: 429}

// TestRunRecordFile: the record file holds the header, one result per
// send and the end line with its counts, as Record returns them; a second
// operation on the session is refused.
func TestRunRecordFile(t *testing.T) {
	opt := memServer(t, testserver.Route{Policy: bucket})("/")
	out := filepath.Join(t.TempDir(), "run.jsonl")
	var confirmed string
	s, err := New(Config{Probe: opt, Out: out, Seed: 7, Caps: Caps{MaxRequests: 100},
		Confirm: func(summary string) error { confirmed = summary; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Run(context.Background(), burstPlan(6))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Accepted != 4 || sum.Rejected != 2 {
		t.Errorf("summary %d accepted, %d rejected; want 4 and 2", sum.Accepted, sum.Rejected)
	}
	if !strings.Contains(confirmed, "plan: 6 requests") {
		t.Errorf("Confirm got %q, want the plan", confirmed)
	}
	file, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	got, err := record.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	mem := s.Record()
	if got.Header.Seed != 7 || len(got.Results) != 6 || got.End == nil || got.End.Reason != record.ReasonCompleted ||
		got.End.Scheduled != 6 || got.End.Sent != 6 || len(mem.Results) != 6 || mem.End.Scheduled != 6 {
		t.Errorf("file %+v %+v (%d results), memory end %+v", got.Header, got.End, len(got.Results), mem.End)
	}
	if c := s.Counts(); c.Done != 6 || c.Accepted != 4 || c.Rejected != 2 || c.RunTotal != 6 {
		t.Errorf("Counts %+v", c)
	}
	if _, err := s.Run(context.Background(), burstPlan(1)); err == nil {
		t.Error("a second Run on the session succeeded")
	}
}

// TestRunRefusedByCaps: a plan over a cap is a Usage error naming it, and
// nothing is recorded.
func TestRunRefusedByCaps(t *testing.T) {
	s, _ := New(Config{Probe: probe.Options{URLs: []string{"http://127.0.0.1:1/"}}, Caps: Caps{MaxRequests: 3, MaxRate: 1000}})
	_, err := s.Run(context.Background(), burstPlan(5))
	if ClassOf(err) != Usage || !strings.Contains(err.Error(), "--max-requests 3") || s.Record() != nil {
		t.Errorf("Run over the cap = %v (class %d), record %v", err, ClassOf(err), s.Record())
	}
}

// TestRunOtherGuard: answers neither accepted nor rejected abort the run
// (Aborted, with the statuses and a hint); every send is still recorded.
func TestRunOtherGuard(t *testing.T) {
	opt := memServer(t, testserver.Route{Path: "/only", Policy: bucket})("/missing")
	s, _ := New(Config{Probe: opt})
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
		{Pattern: patterns.PatternSteady, Rate: 100, Duration: patterns.Duration(time.Second)}}}
	_, err := s.Run(context.Background(), plan)
	if ClassOf(err) != Aborted || !strings.Contains(err.Error(), "404 ×") || !strings.Contains(err.Error(), "check the URL's path") {
		t.Fatalf("Run at a 404 = %v", err)
	}
	if run := s.Record(); run.End.Reason != record.ReasonAborted || len(run.Results) != 100 {
		t.Errorf("end %+v, %d results; want aborted, all 100", run.End, len(run.Results))
	}
}

// TestCheckOneSeqSpace: a check over two rules runs three probe engines
// (the preflight's and one per rule), yet the record has one Seq space:
// 0…n−1, each once, in the order the engines ran, and every ref of the
// verdict names a recorded result.
func TestCheckOneSeqSpace(t *testing.T) {
	pol := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Second},
		Status: 429, Dialects: []headers.Dialect{headers.None}, RetryAfter: testserver.RetryMissing}
	base := memServer(t, testserver.Route{Path: "/a", Policy: pol}, testserver.Route{Path: "/b", Policy: pol})("")
	base.URLs[0] = strings.TrimSuffix(base.URLs[0], "/")
	out := filepath.Join(t.TempDir(), "check.jsonl")
	s, _ := New(Config{Probe: base, Out: out, Tool: "test"})
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{
		{Path: "/a", Limit: 3, Window: time.Second, Status: 429}, {Path: "/b", Limit: 3, Window: time.Second, Status: 429}}}.Normalize()
	// Judge's findings are in the stored verdict and decide the exit class.
	judge := func(r *verify.Report, _ []Inferred) {
		r.Findings = append(r.Findings, verify.Finding{ID: verify.IDConfigNotEnforced, Severity: verify.SeverityError, Certainty: verify.Certain, Message: "judged"})
		r.Rejudge()
	}
	rep, err := s.Check(context.Background(), &p, CheckOptions{Only: []string{"burst"}, Judge: judge})
	if rep == nil {
		t.Fatalf("no verdict: %v", err)
	}
	if rep.Verdict != verify.VerdictFail || ClassOf(err) != Findings || rep.Time.IsZero() {
		t.Errorf("verdict %s, class %v, time %v; want fail, Findings, a time", rep.Verdict, ClassOf(err), rep.Time)
	}
	run := s.Record()
	seen := map[string]bool{}
	for i, r := range run.Results {
		if r.Seq != int64(i) {
			t.Fatalf("result %d has seq %d; want 0…n−1 in order", i, r.Seq)
		}
		seen[record.Ref(r)] = true
	}
	if len(run.Results) < 9 || run.Results[0].Phase != probe.PhasePreflight {
		t.Errorf("%d results, first %q; want the preflight and two bursts", len(run.Results), run.Results[0].Phase)
	}
	for _, f := range rep.Findings {
		for _, ref := range f.Evidence.Refs {
			if !seen[ref] {
				t.Errorf("finding %s names %s, not in the record", f.ID, ref)
			}
		}
	}
	// The verdict follows the end line in the file.
	data, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if n := len(lines); n < 2 || !strings.HasPrefix(lines[n-1], `{"type":"finding"`) || !strings.HasPrefix(lines[n-2], `{"type":"end"`) {
		t.Errorf("the file does not end with the end line and the verdict:\n%s", strings.Join(lines[max(0, len(lines)-2):], "\n"))
	} else if last := lines[len(lines)-1]; !strings.Contains(last, `"time":"`) || !strings.Contains(last, `"id":"config-not-enforced"`) {
		t.Errorf("the stored verdict should carry its time and the judged finding:\n%s", last)
	}
}

func TestClassOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want Class
	}{
		{nil, OK},
		{Errorf(Findings, "x"), Findings},
		{&Error{Class: Aborted}, Aborted},
		{errors.Join(errors.New("a"), Errorf(Internal, "b")), Internal},
		{context.Canceled, Aborted},
		{errors.New("plain"), Usage},
	} {
		if got := ClassOf(tt.err); got != tt.want {
			t.Errorf("ClassOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	if !Usage.Worse(Internal) || !Internal.Worse(Findings) || !Findings.Worse(Aborted) || !Aborted.Worse(OK) || OK.Worse(Aborted) {
		t.Error("precedence is not 2, 4, 1, 3, 0")
	}
}

// TestInferRecord: the preflight and every experiment of Infer share the
// record's Seq space (the preflight first), and the inference is written
// before the end line.
func TestInferRecord(t *testing.T) {
	opt := memServer(t, testserver.Route{Policy: testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 5}}})("/")
	out := filepath.Join(t.TempDir(), "infer.jsonl")
	s, _ := New(Config{Probe: opt, Out: out, Command: "infer", Caps: Caps{MaxRequests: 2000, MaxDuration: time.Minute}})
	inf, err := s.Infer(context.Background(), InferOptions{MaxWindow: 2 * time.Second})
	if inf == nil || err != nil && !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Infer = %v, %v", inf, err)
	}
	run := s.Record()
	for i, r := range run.Results {
		if r.Seq != int64(i) {
			t.Fatalf("result %d has seq %d; want 0…n−1 in order", i, r.Seq)
		}
	}
	if run.Results[0].Phase != probe.PhasePreflight || run.End.Scheduled != int64(len(run.Results)) || inf.RecordFile != out {
		t.Errorf("first phase %q, end %+v for %d results, record file %q", run.Results[0].Phase, run.End, len(run.Results), inf.RecordFile)
	}
	data, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if n := len(lines); !strings.HasPrefix(lines[n-1], `{"type":"end"`) || !strings.HasPrefix(lines[n-2], `{"type":"inference"`) {
		t.Errorf("the file does not end with the inference and the end line")
	}
	if !strings.Contains(lines[0], `"plan":{"command":"infer","max_requests":2000`) {
		t.Errorf("header %s: want the plan", lines[0])
	}
}

// TestCheckRestsAfterARefusedPreflight: a check run right after another
// meets a limiter the first one left exhausted. Its preflight is refused,
// and it rests until the quota is surely whole before its suites: the
// honest server passes again, with no under-admission from the refusals
// the earlier run caused. (Without the rest, the suites' first burst is
// refused below the quota: a certain under-admission.)
func TestCheckRestsAfterARefusedPreflight(t *testing.T) {
	pol := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Second}, Status: 429}
	opt := memServer(t, testserver.Route{Policy: pol})("/")
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Limit: 3, Window: time.Second, Status: 429}}}.Normalize()
	for run := range 2 {
		var lines []string
		s, _ := New(Config{Probe: opt, Progress: Progress{Line: func(l string) { lines = append(lines, l) }}})
		rep, err := s.Check(context.Background(), &p, CheckOptions{Only: []string{"burst"}})
		if rep == nil {
			t.Fatalf("run %d: no verdict: %v", run, err)
		}
		rested := slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "preflight was refused") })
		if pre := s.Record().Results[0]; rested != (pre.Status == 429) {
			t.Errorf("run %d: preflight answered %d, rested %v; want a rest exactly after a refusal", run, pre.Status, rested)
		}
		if run == 1 && !rested {
			t.Errorf("run 1: no rest after the first run exhausted the limiter; lines:\n%s", strings.Join(lines, "\n"))
		}
		if !rep.Pass || len(rep.Findings) > 0 {
			t.Errorf("run %d: verdict %s, findings %+v; want a pass with none", run, rep.Verdict, rep.Findings)
		}
	}
}

// TestCheckAfterOthersUsedTheQuota: others' requests just before the run
// leave the limiter partly used; the preflight is admitted and its
// headers (draft-8) show the quota spent. check takes the start as busy,
// not as rest, and an honest limiter passes with no certain finding: a
// fixed window the others opened (first-request windows) and a token
// bucket. Before, a certain ratelimit-header-inconsistent or
// window-limit-exceeded failed them (exit 1).
func TestCheckAfterOthersUsedTheQuota(t *testing.T) {
	none := []headers.Dialect{headers.None}
	for _, tc := range []struct {
		name     string
		serve    limiter.Config
		dialects []headers.Dialect
		check    verify.Endpoint
	}{
		{"fixed-window", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: 2 * time.Second}, nil,
			verify.Endpoint{Limit: 6, Window: 2 * time.Second, WindowType: verify.Fixed, Status: 429}},
		{"token-bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 3, Capacity: 6}, nil,
			verify.Endpoint{Rate: 3, Capacity: 6, Status: 429}},
		// No headers: the admitted preflight says nothing of the state.
		{"token-bucket/headerless", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 3, Capacity: 6}, none,
			verify.Endpoint{Rate: 3, Capacity: 6, Status: 429, Headers: []string{"none"}}},
		{"sliding-log/headerless", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 6, Window: 2 * time.Second}, none,
			verify.Endpoint{Limit: 6, Window: 2 * time.Second, Status: 429, Headers: []string{"none"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opt := memServer(t, testserver.Route{Policy: testserver.Policy{Limiter: tc.serve, Status: 429, Dialects: tc.dialects}})("/")
			others, _ := New(Config{Probe: opt})
			if _, err := others.Run(context.Background(), burstPlan(3)); err != nil {
				t.Fatal(err)
			}
			p := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{tc.check}}.Normalize()
			s, _ := New(Config{Probe: opt})
			rep, err := s.Check(context.Background(), &p, CheckOptions{})
			if rep == nil {
				t.Fatalf("no verdict: %v", err)
			}
			if pre := s.Record().Results[0]; pre.Status != 200 {
				t.Fatalf("preflight answered %d, want 200 (the others left quota)", pre.Status)
			}
			for _, f := range rep.Findings {
				if f.Certainty == verify.Certain && f.Severity != verify.SeverityInfo {
					t.Errorf("certain %s %s: %s", f.Severity, f.ID, f.Message)
				}
			}
			if !rep.Pass {
				t.Errorf("verdict %s, want pass", rep.Verdict)
			}
		})
	}
}

// TestInferRestsAfterOthersUsedTheQuota: others exhaust the limiter just
// before infer; its preflight is refused, it rests and sends another, and
// the inference starts from rest: the family and its quota, not a misfit
// of a busy start. With draft-8 headers the rest is the time they
// advertise until the quota is whole; without headers (a Retry-After
// alone, the time until one request) it is the longest window infer looks
// for — a bucket given one token's rest starts nearly empty, and was a
// misfit.
func TestInferRestsAfterOthersUsedTheQuota(t *testing.T) {
	for _, tc := range []struct {
		name     string
		serve    limiter.Config
		dialects []headers.Dialect
		family   infer.Family
		rest     string
	}{
		{"fixed-window/draft-8", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: 2 * time.Second}, nil,
			infer.FixedWindow, "the time it advertises until its quota is whole"},
		{"token-bucket/headerless", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 3, Capacity: 6}, []headers.Dialect{headers.None},
			infer.TokenBucket, "the longest window infer looks for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pol := testserver.Policy{Limiter: tc.serve, Status: 429, Dialects: tc.dialects}
			opt := memServer(t, testserver.Route{Policy: pol})("/")
			others, _ := New(Config{Probe: opt})
			if _, err := others.Run(context.Background(), burstPlan(8)); err != nil {
				t.Fatal(err)
			}
			var lines []string
			s, _ := New(Config{Probe: opt, Command: "infer", Caps: Caps{MaxRequests: 2000, MaxDuration: 2 * time.Minute},
				Progress: Progress{Line: func(l string) { lines = append(lines, l) }}})
			inf, err := s.Infer(context.Background(), InferOptions{MaxWindow: 4 * time.Second})
			if inf == nil {
				t.Fatalf("no inference: %v", err)
			}
			if !slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "busy") && strings.Contains(l, "resting") && strings.Contains(l, tc.rest)
			}) {
				t.Errorf("no rest of %s announced; lines:\n%s", tc.rest, strings.Join(lines, "\n"))
			}
			if pre := s.Record().Results[0]; pre.Status != 429 {
				t.Errorf("first preflight answered %d, want 429 (the others exhausted the limiter)", pre.Status)
			}
			quota := inf.Params.Limit
			if tc.family == infer.TokenBucket {
				quota = inf.Params.Capacity
			}
			if inf.Algorithm != tc.family || quota == nil || quota.Value != 6 || inf.Fit == infer.FitMisfit {
				t.Errorf("%s fit %s (closest %s), quota %+v; want %s of 6: %s", inf.Algorithm, inf.Fit, inf.Closest, quota, tc.family, inf.Note)
			}
		})
	}
}

// TestDefaultRecordNameTaken: a default record name already taken (two
// runs started in the same millisecond in one directory) goes to the next
// free name, which RecordFile reports, leaving the other file alone; a
// name the user chose (--out) is still refused (Usage, --force to
// replace).
func TestDefaultRecordNameTaken(t *testing.T) {
	opt := memServer(t, testserver.Route{Policy: bucket})("/")
	dir := t.TempDir()
	taken := filepath.Join(dir, "rlprobe-run-20261205T120000.000Z.jsonl")
	if err := os.WriteFile(taken, []byte("another run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := New(Config{Probe: opt, Out: taken, OutDefault: true})
	if _, err := s.Run(context.Background(), burstPlan(2)); err != nil {
		t.Fatalf("default name taken: %v", err)
	}
	want := filepath.Join(dir, "rlprobe-run-20261205T120000.000Z-2.jsonl")
	if s.RecordFile() != want {
		t.Errorf("RecordFile = %s, want %s", s.RecordFile(), want)
	}
	f, err := os.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if run, err := record.Read(f); err != nil || len(run.Results) != 2 {
		t.Errorf("the record at %s: %v", want, err)
	}
	if b, _ := os.ReadFile(taken); string(b) != "another run\n" {
		t.Errorf("the other run's file now holds %q", b)
	}
	s, _ = New(Config{Probe: opt, Out: taken})
	if _, err := s.Run(context.Background(), burstPlan(2)); ClassOf(err) != Usage {
		t.Errorf("--out taken: %v, want a Usage error", err)
	}
}

// TestInferBusyRestIsBounded: a target that refuses everything with a
// Retry-After of an hour makes infer rest no longer than --max-duration
// in all, then go on (two preflights, the second after the rest).
func TestInferBusyRestIsBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	var lines []string
	var mu sync.Mutex
	s, _ := New(Config{Probe: probe.Options{URLs: []string{srv.URL + "/"}}, Command: "infer",
		Caps:     Caps{MaxRequests: 200, MaxDuration: time.Second},
		Progress: Progress{Line: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }}})
	start := time.Now()
	_, _ = s.Infer(context.Background(), InferOptions{MaxWindow: time.Second})
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	rests := 0
	for _, l := range lines {
		if strings.Contains(l, "resting") {
			rests++
			if !strings.Contains(l, "resting 1s") {
				t.Errorf("rest line %q, want a rest of 1s (--max-duration)", l)
			}
		}
	}
	if rests != 1 {
		t.Errorf("%d rests announced, want 1 (the second would exceed --max-duration); lines:\n%s", rests, strings.Join(lines, "\n"))
	}
	pre := 0
	for _, r := range s.Record().Results {
		if r.Phase == probe.PhasePreflight {
			pre++
		}
	}
	if pre != 2 {
		t.Errorf("%d preflights, want 2", pre)
	}
	// The rest (1 s) and a run capped at 1 s, with room for a loaded machine.
	if took > 30*time.Second {
		t.Errorf("infer took %v against an hour's Retry-After with --max-duration 1s", took)
	}
}
