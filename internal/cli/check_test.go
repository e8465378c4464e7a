package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// startServer serves one route on a loopback port.
func startServer(t *testing.T, p testserver.Policy) string {
	t.Helper()
	return startServerWith(t, testserver.HandlerOptions{}, p)
}

// startServerWith is startServer with the handler's options.
func startServerWith(t *testing.T, opt testserver.HandlerOptions, p testserver.Policy) string {
	t.Helper()
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "", Policy: p}}, Listen: "127.0.0.1:0", Handler: opt})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.URL() + "/"
}

// runCheckJSON runs the CLI and decodes its --json document.
func runCheckJSON(t *testing.T, args ...string) (int, verify.Report, string) {
	t.Helper()
	code, out, errOut := runCLI(t, nil, args...)
	var rep verify.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rlprobe %v: exit %d, stdout is not a document: %v\nstdout %q\nstderr %s", args, code, err, out, errOut)
	}
	return code, rep, errOut
}

func hasFinding(rep verify.Report, id string, c verify.Certainty) bool {
	for _, f := range rep.Findings {
		if f.ID == id && f.Certainty == c {
			return true
		}
	}
	return false
}

func errorFindings(rep verify.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Severity == verify.SeverityError {
			out = append(out, string(f.Certainty)+" "+f.ID+": "+f.Message)
		}
	}
	return out
}

// TestCheckRealSockets runs check over loopback sockets against the
// reference server: a fixed window (epoch-aligned, 5 per 2 s) breaks "5 in
// any 2 s" at its edge (about 10 through), certainly, so check exits 1; a
// sliding log keeps it (exit 0); an early Retry-After (window 4 s) is
// caught by the retries at the advertised moment. The checks are limited
// to those the verdicts need, to keep the test short (about 5 s each, in
// parallel).
func TestCheckRealSockets(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	if testing.Short() {
		t.Skip("real sockets, ~5 s")
	}
	only := "--only=burst,edge,recovery,retry-after"
	t.Run("fixed window vs sliding policy", func(t *testing.T) {
		t.Parallel()
		url := startServer(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}})
		code, rep, errOut := runCheckJSON(t, "check", url, "--limit", "5", "--window", "2s", only, "--json", "-q",
			"--out", filepath.Join(t.TempDir(), "r.jsonl"))
		if code != ExitFindings || !hasFinding(rep, verify.IDWindowLimitExceeded, verify.Certain) {
			t.Errorf("exit %d, findings %v; want 1 and a certain window-limit-exceeded\n%s", code, rep.Findings, errOut)
		}
		// About 10 get through (5 each side of the edge); on a loaded
		// machine a request of the straddle may land on the other side of
		// the edge or in the next window, so well over the limit is the
		// outcome asserted.
		for _, f := range rep.Findings {
			if f.ID == verify.IDWindowLimitExceeded && f.Certainty == verify.Certain && f.Evidence.Count < 7 {
				t.Errorf("the edge straddle got %d through, want about 10 (at least 7)", f.Evidence.Count)
			}
		}
	})
	t.Run("sliding log keeps the policy", func(t *testing.T) {
		t.Parallel()
		url := startServer(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: 2 * time.Second}})
		out := filepath.Join(t.TempDir(), "r.jsonl")
		code, rep, errOut := runCheckJSON(t, "check", url, "--limit", "5", "--window", "2s", only, "--json", "-q", "--out", out)
		if code != ExitOK || rep.Verdict != verify.VerdictPass || len(errorFindings(rep)) > 0 {
			t.Errorf("exit %d, verdict %s, errors %v; want 0 and pass\n%s", code, rep.Verdict, errorFindings(rep), errOut)
			dumpRecord(t, out)
		}
	})
	t.Run("early Retry-After", func(t *testing.T) {
		t.Parallel()
		url := startServer(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: 4 * time.Second},
			RetryAfter: testserver.RetryEarly})
		code, rep, errOut := runCheckJSON(t, "check", url, "--limit", "5", "--window", "4s", "--only", "retry-after", "--json", "-q",
			"--out", filepath.Join(t.TempDir(), "r.jsonl"))
		if code != ExitFindings || !hasFinding(rep, verify.IDRetryAfterEarly, verify.Certain) {
			t.Errorf("exit %d, findings %v; want 1 and a certain retry-after-early\n%s", code, rep.Findings, errOut)
		}
	})
}

// memCheck runs `rlprobe check` inside a synctest bubble against a
// reference server on an in-memory listener.
func memCheck(t *testing.T, p testserver.Policy, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return memCheckWith(t, testserver.HandlerOptions{}, p, args...)
}

// memCheckWith is memCheck with the server's handler options.
func memCheckWith(t *testing.T, opt testserver.HandlerOptions, p testserver.Policy, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ln := testserver.NewMemListener()
		srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "/api", Policy: p}}, Handler: opt})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.StartListener(ln); err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		hook := func(f *Factory) {
			f.ProbeOptions = func(o *probe.Options) { o.Dial, o.TimerPacing = ln.Dial, true }
		}
		code, stdout, stderr = runCLIWith(t, hook, args...)
	})
	return code, stdout, stderr
}

const memURL = "http://" + testserver.MemListenerAddr + "/api"

func checkSchema(t *testing.T, doc string) {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile("../../docs/schema/check.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("the document does not validate against check.schema.json: %v\n%s", err, doc)
	}
}

// TestCheckInMemory: the whole suite against a fixed window under synctest:
// exit 1, the document validates against its schema, and is appended to
// the record file, whose results it cites.
func TestCheckInMemory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "check.jsonl")
	code, stdout, stderr := memCheck(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second}},
		"check", memURL, "--limit", "5", "--window", "2s", "--key", "ip", "--json", "--out", out,
		"--junit", filepath.Join(dir, "r.xml"), "--markdown", filepath.Join(dir, "r.md"), "--html", filepath.Join(dir, "r.html"))
	if code != ExitFindings {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	checkSchema(t, stdout)
	var rep verify.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != verify.SchemaCheck || !rep.Complete || rep.RecordFile != out || !hasFinding(rep, verify.IDWindowLimitExceeded, verify.Certain) {
		t.Errorf("document %+v", rep)
	}
	for _, want := range []string{"plan: burst, recovery, edge, sustained, race, key-spoof for 5 in any 2s per ip", "check: key-spoof:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for name, want := range map[string]string{"r.xml": "window-limit-exceeded", "r.md": "window-limit-exceeded", "r.html": "<svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("report %s: %v, want it to mention %q", name, err, want)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	run, err := record.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Findings) != 1 || run.End == nil || run.End.Reason != record.ReasonCompleted {
		t.Fatalf("record: %d finding lines, end %+v", len(run.Findings), run.End)
	}
	refs := map[string]bool{}
	for _, r := range run.Results {
		ref := record.Ref(r)
		if refs[ref] {
			t.Errorf("ref %s appears twice in the record", ref)
		}
		refs[ref] = true
	}
	for _, f := range rep.Findings {
		for _, ref := range f.Evidence.Refs {
			if !refs[ref] {
				t.Errorf("%s cites %s, which is not in the record", f.ID, ref)
			}
		}
	}
}

func TestCheckExitCodes(t *testing.T) {
	slog := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: 2 * time.Second}
	tests := []struct {
		name   string
		p      testserver.Policy
		args   []string
		code   int
		stderr string
	}{
		{"the target's advertised policy is checked", testserver.Policy{Limiter: slog},
			[]string{"check", memURL, "--only", "burst", "-q"}, ExitOK, ""},
		{"nothing declared, nothing advertised", testserver.Policy{Limiter: slog, Dialects: []headers.Dialect{headers.None}},
			[]string{"check", memURL}, ExitUsage, "declare a policy"},
		{"preflight answers 404", testserver.Policy{Limiter: slog},
			[]string{"check", "http://" + testserver.MemListenerAddr + "/elsewhere", "--limit", "5", "--window", "2s"}, ExitUnreachable, "404"},
		{"budget ends the suite", testserver.Policy{Limiter: slog},
			[]string{"check", memURL, "--limit", "5", "--window", "2s", "--max-duration", "3s", "-q"}, ExitUnreachable, "budget spent"},
		{"request budget", testserver.Policy{Limiter: slog},
			[]string{"check", memURL, "--limit", "5", "--window", "2s", "--max-requests", "10", "-q"}, ExitUnreachable, "max-requests"},
		{"warnings fail with --fail-on warning", testserver.Policy{Limiter: slog, RetryAfter: testserver.RetryMissing},
			[]string{"check", memURL, "--limit", "5", "--window", "2s", "--only", "burst", "--fail-on", "warning", "-q"}, ExitFindings, ""},
		{"bad --only", testserver.Policy{Limiter: slog},
			[]string{"check", memURL, "--limit", "5", "--window", "2s", "--only", "bursts"}, ExitUsage, "unknown check \"bursts\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "--out", filepath.Join(t.TempDir(), "r.jsonl"))
			code, stdout, stderr := memCheck(t, tt.p, args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, want %d; stderr %q should contain %q\nstdout %s", code, tt.code, stderr, tt.stderr, stdout)
			}
		})
	}
}

// TestCheckSummary: the text summary starts with the one-line verdict.
func TestCheckSummary(t *testing.T) {
	code, stdout, _ := memCheck(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: 2 * time.Second}, Status: 503},
		"check", memURL, "--limit", "5", "--window", "2s", "--status", "429", "--only", "burst", "-q", "--out", filepath.Join(t.TempDir(), "r.jsonl"))
	first, _, _ := strings.Cut(stdout, "\n")
	if code != ExitFindings || first != "FAIL: reject-status-mismatch" || !strings.Contains(stdout, "hint: ") {
		t.Errorf("exit %d, summary:\n%s", code, stdout)
	}
}

func TestCheckDryRun(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "check", "http://127.0.0.1:1/", "--limit", "100", "--window", "60s", "--dry-run")
	if code != ExitOK || !strings.Contains(out, "plan: 5m9.41s") || !strings.Contains(out, "sustained  2m0s") {
		t.Errorf("exit %d, out:\n%s\n%s", code, out, errOut)
	}
}

// TestCheckOnTheServersClock: an epoch-aligned fixed window counts on the
// server's clock, which the answers' Date headers place; a server whose
// clock is 700 ms off this machine's puts its window edges 700 ms from
// this machine's. Checked against its own policy it passes (on this
// machine's clock its two windows' quotas fall in one window: 10 of 5,
// certainly, were the edges placed there); against a quota of 4 it still
// fails, certainly, within one of its own windows.
func TestCheckOnTheServersClock(t *testing.T) {
	server := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}}
	policy := func(n int) []string {
		return []string{"--limit", fmt.Sprint(n), "--window", "2s", "--window-type", "fixed", "--align", "epoch", "--headers", "draft-8"}
	}
	// A sliding-window counter on the epoch keeps the fixed-window
	// promise too (TestCheckFalsePositives).
	counter := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}}
	tests := []struct {
		name     string
		server   testserver.Policy
		skew     time.Duration
		limit    int
		wantCode int
	}{
		{"700 ms ahead, its own policy", server, 700 * time.Millisecond, 5, ExitOK},
		{"700 ms behind, its own policy", server, -700 * time.Millisecond, 5, ExitOK},
		{"1.3 s ahead, its own policy", server, 1300 * time.Millisecond, 5, ExitOK},
		{"700 ms ahead, a quota of 4", server, 700 * time.Millisecond, 4, ExitFindings},
		{"a sliding-window counter 700 ms ahead", counter, 700 * time.Millisecond, 5, ExitOK},
		{"a sliding-window counter 1.3 s behind", counter, -1300 * time.Millisecond, 5, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"check", memURL, "--json", "-q", "--out", filepath.Join(t.TempDir(), "r.jsonl")}, policy(tt.limit)...)
			code, stdout, stderr := memCheckWith(t, testserver.HandlerOptions{ClockSkew: tt.skew}, tt.server, args...)
			var rep verify.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("exit %d, stdout is not a document: %v\n%s\n%s", code, err, stdout, stderr)
			}
			exceeded := rep.Count(verify.IDWindowLimitExceeded, verify.Certain)
			if code != tt.wantCode || (tt.wantCode == ExitOK) != (exceeded == 0) {
				t.Errorf("exit %d, verdict %s, certain %s %d, errors %v; want exit %d\n%s", code, rep.Verdict, verify.IDWindowLimitExceeded, exceeded, errorFindings(rep), tt.wantCode, stderr)
			}
		})
	}
}

// TestCheckOnTheServersClockSockets: TestCheckOnTheServersClock's honest
// server 700 ms ahead, over loopback sockets, placed by its Date headers
// alone (no arrival echo): no certain finding at error, nor a certain
// under-admission (rlprobe before it said 9 accepted in one window and
// 13 under-admitted, both certain).
func TestCheckOnTheServersClockSockets(t *testing.T) {
	p := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}}
	url := startServerWith(t, testserver.HandlerOptions{ClockSkew: 700 * time.Millisecond}, p)
	code, rep, stderr := runCheckJSON(t, "check", url, "--json", "-q", "--out", filepath.Join(t.TempDir(), "r.jsonl"),
		"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch")
	// Possible findings are allowed: Date alone places the server's
	// edges to tens of milliseconds, and a request that close to one
	// counts on either side.
	certain := 0
	for _, f := range rep.Findings {
		if f.Certainty == verify.Certain && (f.Severity == verify.SeverityError || f.ID == verify.IDUnderAdmission) {
			certain++
		}
	}
	if code != ExitOK || certain > 0 {
		t.Errorf("exit %d, verdict %s, %d certain errors or under-admission; findings %v; want exit 0 and none\n%s", code, rep.Verdict, certain, errorFindings(rep), stderr)
	}
}

// TestCheckFalsePositives: honest reference servers checked through the
// whole `rlprobe check` suite against their own policy, with their default
// rate-limit headers, raise no error-level finding and exit 0. A
// sliding-window counter keeps the fixed-window promise but advertises
// less remaining while the previous window's share lasts; warnings (such
// as under-admission, which it honestly shows against a fixed policy) are
// allowed.
func TestCheckFalsePositives(t *testing.T) {
	tests := []struct {
		name string
		p    testserver.Policy
		args []string
	}{
		{"sliding-window counter (draft-8) vs fixed epoch",
			testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}},
			[]string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch", "--headers", "draft-8"}},
		{"fixed window (draft-8) vs fixed epoch",
			testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}},
			[]string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch", "--headers", "draft-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"check", memURL, "--json", "-q", "--out", filepath.Join(t.TempDir(), "r.jsonl")}, tt.args...)
			code, stdout, stderr := memCheck(t, tt.p, args...)
			var rep verify.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("exit %d, stdout is not a document: %v\n%s\n%s", code, err, stdout, stderr)
			}
			if code != ExitOK || rep.Verdict != verify.VerdictPass || len(errorFindings(rep)) > 0 {
				t.Errorf("exit %d, verdict %s, errors %v; want 0 and pass\n%s", code, rep.Verdict, errorFindings(rep), stderr)
			}
		})
	}
}
