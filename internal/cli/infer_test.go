package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/testserver"
)

// nginxInferConf serves four locations, each limited by its own zone (so
// they never share state), and each serving content — a static file —
// because `return` runs in the rewrite phase, before limit_req (preaccess),
// and so is never limited: /return shows exactly that.
const nginxInferConf = `events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    limit_req_zone $binary_remote_addr zone=tb:1m rate=1r/s;
    limit_req_zone $binary_remote_addr zone=queue:1m rate=5r/s;
    limit_req_zone $binary_remote_addr zone=delay:1m rate=5r/s;
    limit_req_zone $binary_remote_addr zone=ret:1m rate=1r/s;
    server {
        listen 127.0.0.1:{{PORT}};
        location = /tb { alias {{PREFIX}}/nginx.conf; limit_req zone=tb burst=3 nodelay; }
        location = /queue { alias {{PREFIX}}/nginx.conf; limit_req zone=queue burst=5; }
        location = /delay { alias {{PREFIX}}/nginx.conf; limit_req zone=delay burst=6 delay=2; limit_req_status 429; }
        location = /return { limit_req zone=ret burst=3 nodelay; return 200 "ok\n"; }
    }
}
`

// inferJSON runs `rlprobe infer --json` and decodes the document.
func inferJSON(t *testing.T, args ...string) (int, *infer.Inference, string, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, nil, append([]string{"infer", "--json"}, args...)...)
	return code, inferenceOf(t, args, code, stdout, stderr), stdout, stderr
}

// inferBuiltJSON is inferJSON through the built binary (runBuilt).
func inferBuiltJSON(t *testing.T, args ...string) (int, *infer.Inference, string, string) {
	t.Helper()
	code, stdout, stderr := runBuilt(t, append([]string{"infer", "--json"}, args...)...)
	return code, inferenceOf(t, args, code, stdout, stderr), stdout, stderr
}

// inferenceOf decodes the document `rlprobe infer args --json` wrote.
func inferenceOf(t *testing.T, args []string, code int, stdout, stderr string) *infer.Inference {
	t.Helper()
	var inf infer.Inference
	if err := json.Unmarshal([]byte(stdout), &inf); err != nil {
		t.Fatalf("rlprobe infer %v: exit %d, output is not a document: %v\nstdout %s\nstderr %s", args, code, err, stdout, stderr)
	}
	return &inf
}

// TestInferNginx infers real nginx limit_req (the Debian package): nodelay
// is a token bucket of capacity burst+1; without nodelay a queue, with
// delay=2 three requests served at once; a location that answers with
// `return` is not limited at all.
func TestInferNginx(t *testing.T) {
	// Not in parallel with the other long tests: a queue is told from the
	// delays of its answers, which a loaded machine blurs (CI saw /delay
	// a misfit beside them).
	base := testenv.StartNginx(t, nginxInferConf)
	tests := []struct {
		path   string
		status int
		want   scenario.SelftestWant
	}{
		{"/tb", 503, scenario.SelftestWant{Family: infer.TokenBucket, Params: map[string]float64{"rate_per_s": 1, "capacity": 4}}},
		{"/queue", 503, scenario.SelftestWant{Family: infer.LeakyBucketQueue,
			Params: map[string]float64{"rate_per_s": 5, "capacity": 6, "undelayed": 1, "queue": 5}}},
		{"/delay", 429, scenario.SelftestWant{Family: infer.LeakyBucketQueue,
			Params: map[string]float64{"rate_per_s": 5, "capacity": 7, "undelayed": 3, "queue": 4}}},
		{"/return", 0, scenario.SelftestWant{Family: infer.None}},
	}
	// One location at a time: each inference reads timing, and four at
	// once on two cores blur it.
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "infer.jsonl")
			code, inf, raw, stderr := inferBuiltJSON(t, base+tt.path, "--out", out, "--expect", string(tt.want.Family))
			if code != 0 {
				t.Errorf("exit %d, stderr %s", code, stderr)
			}
			if probs, _ := scenario.JudgeInference(tt.want, inf); len(probs) > 0 {
				t.Errorf("nginx %s: %v\n%s", tt.path, probs, raw)
			}
			if tt.status != 0 && (inf.RejectStatus == nil || *inf.RejectStatus != tt.status) {
				t.Errorf("nginx %s: reject status %v, want %d", tt.path, inf.RejectStatus, tt.status)
			}
			if inf.RetryAfter.Sent || len(inf.Headers) != 1 || inf.Headers[0] != "none" {
				t.Errorf("nginx %s: retry-after %+v, headers %v; nginx sends neither", tt.path, inf.RetryAfter, inf.Headers)
			}
			t.Logf("nginx %s: %s in %.1fs, %d requests", tt.path, inf.Algorithm, inf.DurationS, inf.Requests)
		})
	}
}

// TestInferDocumentAndRecord: the document validates against the
// contract's schema, names the record file, and is appended to it as an
// inference line; the record holds the preflight and every experiment.
func TestInferDocumentAndRecord(t *testing.T) {
	lc := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 7, Delay: 2}
	srv := refServer(t, "", lc, func(_ *testserver.Config, p *testserver.Policy) {
		p.Dialects = []headers.Dialect{headers.Draft8}
	})
	out := filepath.Join(t.TempDir(), "infer.jsonl")
	code, inf, raw, stderr := inferJSON(t, srv.URL()+"/", "--out", out, "--clients", "2", "--client-header", "X-Who")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	sch, err := jsonschema.NewCompiler().Compile("../../docs/schema/infer.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err := sch.Validate(doc); err != nil {
		t.Errorf("infer document does not validate: %v", err)
	}
	want := scenario.SelftestWant{Family: infer.LeakyBucketQueue, Key: infer.KeyGlobal,
		Params: map[string]float64{"rate_per_s": 5, "capacity": 7, "undelayed": 3, "queue": 4}}
	if probs, _ := scenario.JudgeInference(want, inf); len(probs) > 0 {
		t.Errorf("inference: %v", probs)
		dumpRecord(t, out)
	}
	if inf.RecordFile != out || inf.Tool != "rlprobe v0.0.0-test" || !inf.Complete || len(inf.Headers) != 1 || inf.Headers[0] != "draft-8" {
		t.Errorf("record_file %q tool %q complete %v headers %v", inf.RecordFile, inf.Tool, inf.Complete, inf.Headers)
	}
	if !inf.RetryAfter.Sent || inf.RetryAfter.Honest == nil || !*inf.RetryAfter.Honest {
		t.Errorf("retry_after %+v: the reference server's is accurate", inf.RetryAfter)
	}
	run := readRecord(t, out)
	if len(run.Inferences) != 1 {
		t.Fatalf("%d inference lines, want 1", len(run.Inferences))
	}
	var fromFile infer.Inference
	if err := json.Unmarshal(run.Inferences[0], &fromFile); err != nil {
		t.Fatal(err)
	}
	if fromFile.Algorithm != inf.Algorithm || fromFile.Reproduced != inf.Reproduced || fromFile.RecordFile != out {
		t.Errorf("inference line %+v differs from the document", fromFile)
	}
	if run.End.Reason != record.ReasonCompleted || int(run.End.Sent) != inf.Requests || run.Results[0].Phase != "preflight" {
		t.Errorf("end %+v (document says %d requests); first result phase %q, want the preflight",
			run.End, inf.Requests, run.Results[0].Phase)
	}
	if !strings.Contains(string(run.Header.Plan), `"command":"infer"`) {
		t.Errorf("header plan %s", run.Header.Plan)
	}
	for _, w := range []string{"infer: burst", "budget at most"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("progress lacks %q:\n%s", w, stderr)
		}
	}
}

// unlimited answers 200 to everything.
func unlimited(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestInferText: the text output names the family, the highest rate for
// none, and --expect turns a mismatch into exit 1.
func TestInferText(t *testing.T) {
	url := unlimited(t)
	out := filepath.Join(t.TempDir(), "none.jsonl")
	code, stdout, stderr := runCLI(t, nil, "infer", url+"/", "--out", out, "--expect", "token-bucket")
	if code != ExitFindings || !strings.Contains(stderr, "expected token-bucket, inferred none") {
		t.Errorf("exit %d, stderr %q; want 1 and the mismatch", code, stderr)
	}
	for _, w := range []string{"algorithm: none", "no limiting observed: up to", "record: " + out, "1561 requests"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
}

// TestInferIncomplete: a request cap too small to tell the candidates apart
// gives an incomplete document, a record ended by the budget, and exit 3.
func TestInferIncomplete(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 4, Window: 1e9}, nil)
	out := filepath.Join(t.TempDir(), "short.jsonl")
	code, inf, _, stderr := inferJSON(t, srv.URL()+"/", "--out", out, "--max-requests", "40")
	if code != ExitUnreachable || inf.Complete || !strings.Contains(stderr, "incomplete") {
		t.Errorf("exit %d, complete %v, stderr %q; want 3, false and a word about the budget", code, inf.Complete, stderr)
	}
	run := readRecord(t, out)
	if run.End.Reason != record.ReasonBudget || len(run.Results) > 40 {
		t.Errorf("end %+v with %d results; want reason budget and at most 40", run.End, len(run.Results))
	}
}

func TestInferUsageAndPreflight(t *testing.T) {
	url := unlimited(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown family", []string{"infer", url + "/", "--expect", "gcra"}, ExitUsage, "token-bucket, leaky-bucket-queue, none"},
		{"no target", []string{"infer"}, ExitUsage, "at least one target URL"},
		{"zero cap", []string{"infer", url + "/", "--max-requests", "0"}, ExitUsage, "--max-requests"},
		{"not found", []string{"infer", url + "/missing", "--out", filepath.Join(dir, "404.jsonl")}, ExitUnreachable, "answered 404"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tt.name, code, stderr, tt.code, tt.want)
		}
	}
	// --dry-run sends nothing and writes nothing.
	out := filepath.Join(dir, "dry.jsonl")
	code, stdout, _ := runCLI(t, nil, "infer", url+"/", "--dry-run", "--out", out)
	if _, err := os.Stat(out); code != 0 || err == nil || !strings.Contains(stdout, "nothing sent") {
		t.Errorf("--dry-run: exit %d, file exists %v, output %q", code, err == nil, stdout)
	}
}

// dumpRecord logs a record file's results, for a failing test.
func dumpRecord(t *testing.T, path string) {
	t.Helper()
	run := readRecord(t, path)
	for _, r := range run.Results {
		t.Logf("seq %3d %-9s %-3s %d wrote %9.3fms ttfb %9.3fms", r.Seq, r.Phase, r.Client, r.Status, float64(r.Wrote)/1e6, float64(r.TTFB)/1e6)
	}
}

// TestWriteInferenceUnknownKey: an unknown key says why — one identity
// cannot test it, two could not tell — and a known key needs no words.
func TestWriteInferenceUnknownKey(t *testing.T) {
	tests := []struct {
		key        string
		identities int
		want       string // "" means no explanation line
	}{
		{infer.KeyUnknown, 1, "one client identity: --clients 2"},
		{infer.KeyUnknown, 2, "could not tell a shared quota"},
		{infer.KeyGlobal, 2, ""},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := report.WriteInference(&b, &infer.Inference{Algorithm: infer.TokenBucket, Key: tt.key}, tt.identities, report.TextOptions{}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.Contains(out, "key: "+tt.key+"\n") {
			t.Errorf("key %s: output lacks the key line:\n%s", tt.key, out)
		}
		explained := strings.Contains(out, "key: "+tt.key+"\n  (")
		if tt.want == "" && explained || tt.want != "" && !strings.Contains(out, tt.want) {
			t.Errorf("key %s with %d identities: want %q:\n%s", tt.key, tt.identities, tt.want, out)
		}
	}
}

// TestWriteInferenceUndecided: when other families reproduce the outcomes
// as well as the winner, the text says the answer is undecided between
// them; a winner ahead of every alternative needs no such line.
func TestWriteInferenceUndecided(t *testing.T) {
	inf := &infer.Inference{Algorithm: infer.TokenBucket, Reproduced: 0.975, Key: infer.KeyGlobal, Alternatives: []infer.Alternative{
		{Algorithm: infer.FixedWindow, Reproduced: 0.975}, {Algorithm: infer.SlidingLog, Reproduced: 0.975}, {Algorithm: infer.None, Reproduced: 0},
	}}
	var b strings.Builder
	if err := report.WriteInference(&b, inf, 1, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  undecided: fixed-window, sliding-log fit as well\n") {
		t.Errorf("tied alternatives: want the undecided line:\n%s", b.String())
	}
	inf.Alternatives[0].Reproduced, inf.Alternatives[1].Reproduced = 0.9, 0.8
	b.Reset()
	if err := report.WriteInference(&b, inf, 1, report.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "undecided") {
		t.Errorf("a clear winner: no undecided line wanted:\n%s", b.String())
	}
}
