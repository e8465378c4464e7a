package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
)

// refServer starts the reference server on a free loopback port with one
// catch-all route (and, for a non-empty path, only that route), echoing
// arrivals. It stops when the test ends.
func refServer(t *testing.T, path string, lc limiter.Config, mod func(*testserver.Config, *testserver.Policy)) *testserver.Server {
	t.Helper()
	pol := testserver.Policy{Limiter: lc, Dialects: []headers.Dialect{headers.None}}
	cfg := testserver.Config{Listen: "127.0.0.1:0", Handler: testserver.HandlerOptions{EchoArrival: true}}
	if mod != nil {
		mod(&cfg, &pol)
	}
	cfg.Routes = []testserver.Route{{Path: path, Policy: pol}}
	srv, err := testserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

// runCLICtx runs the CLI in-process under ctx.
func runCLICtx(ctx context.Context, env map[string]string, args ...string) (int, string, string) {
	f, out, errOut := testFactory(env)
	code := Run(ctx, f, args)
	return code, out.String(), errOut.String()
}

// readRecord reads a record file and checks the invariants every run
// keeps: one result per scheduled request, seqs 0…n−1 each once, an end
// line whose counts match.
func readRecord(t *testing.T, path string) *record.Run {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := record.Read(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if run.End == nil {
		t.Fatalf("%s has no end line", path)
	}
	seqs := map[int64]bool{}
	sent := int64(0)
	for _, r := range run.Results {
		if seqs[r.Seq] {
			t.Errorf("seq %d recorded twice", r.Seq)
		}
		seqs[r.Seq] = true
		switch r.Outcome {
		case record.OutcomeResponse, record.OutcomeError:
			sent++
		case record.OutcomeNotSent:
		default:
			t.Errorf("seq %d: outcome %q", r.Seq, r.Outcome)
		}
	}
	for i := range int64(len(run.Results)) {
		if !seqs[i] {
			t.Errorf("seq %d missing from %s", i, path)
		}
	}
	if run.End.Scheduled != int64(len(run.Results)) || run.End.Sent != sent {
		t.Errorf("end line %+v, but the file holds %d results, %d sent", run.End, len(run.Results), sent)
	}
	return run
}

// statuses counts results by status (0 for no answer).
func statuses(run *record.Run) map[int]int {
	m := map[int]int{}
	for _, r := range run.Results {
		m[r.Status]++
	}
	return m
}

func nginxDemo() limiter.Config {
	return limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true}
}

func with503(_ *testserver.Config, p *testserver.Policy) { p.Status = 503 }

func TestRunBurst(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), with503)
	out := filepath.Join(t.TempDir(), "burst.jsonl")
	code, stdout, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "8", "--out", out, "--seed", "7")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	run := readRecord(t, out)
	if got := statuses(run); got[200] != 4 || got[503] != 4 || len(run.Results) != 8 {
		t.Errorf("statuses %v, want four 200 and four 503", got)
	}
	if run.End.Reason != record.ReasonCompleted || run.Header.Seed != 7 || string(run.Header.Plan) != `{"version":1,"phases":[{"pattern":"burst","count":8}]}` {
		t.Errorf("header %+v end %+v", run.Header, run.End)
	}
	for _, want := range []string{"accepted  200         4", "rejected  503         4", "record file: " + out, "pacing error"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "phase burst: 8 requests") {
		t.Errorf("progress lacks the phase line:\n%s", stderr)
	}
	// The file is never overwritten without --force.
	code, _, stderr = runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "1", "--out", out)
	if code != ExitUsage || !strings.Contains(stderr, "--force") {
		t.Errorf("second run onto the same --out: exit %d, %s; want 2 and a hint about --force", code, stderr)
	}
}

// runJSON runs with --json and decodes the document.
func runJSON(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, nil, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("rlprobe %v: exit %d, stderr %s", args, code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	return doc, stdout
}

func TestRunJSONSchema(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), with503)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	doc, raw := runJSON(t, "run", srv.URL()+"/", "--pattern", "burst", "--count", "6", "--out", out)
	if doc["schema"] != "rlprobe.run/v1" || doc["record_file"] != out || doc["accepted"] != 4.0 || doc["rejected"] != 2.0 || doc["complete"] != true {
		t.Errorf("document = %s", raw)
	}
	// The record writer's back-pressure: six results went through its
	// backlog; a loopback run into a temporary file never waits for room.
	if bl, _ := doc["record_backlog_max"].(float64); bl <= 0 || bl > 64<<20 {
		t.Errorf("record_backlog_max = %v, want the bytes of at least one line", doc["record_backlog_max"])
	}
	if st, ok := doc["record_stall_ms"].(float64); !ok || st != 0 {
		t.Errorf("record_stall_ms = %v, want 0", doc["record_stall_ms"])
	}
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("../../docs/schema/run.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err := sch.Validate(inst); err != nil {
		t.Errorf("run document does not validate: %v", err)
	}
	// The dry run's document follows the same schema.
	_, raw = runJSON(t, "run", srv.URL()+"/", "--pattern", "steady", "--rate", "2/s", "--duration", "3s", "--dry-run")
	inst, _ = jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err := sch.Validate(inst); err != nil {
		t.Errorf("dry-run document does not validate: %v", err)
	}
}

// TestRunEdge: a fixed window aligned to the epoch lets 2N through across
// its edge; a sliding log does not.
func TestRunEdge(t *testing.T) {
	tests := []struct {
		lc   limiter.Config
		want int // accepted
	}{
		{limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Second, Align: limiter.AlignEpoch}, 6},
		{limiter.Config{Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Second}, 3},
	}
	for _, tt := range tests {
		t.Run(string(tt.lc.Algorithm), func(t *testing.T) {
			srv := refServer(t, "", tt.lc, nil)
			out := filepath.Join(t.TempDir(), "edge.jsonl")
			// 3 requests 200ms before a whole second, 3 requests 200ms after.
			code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "edge", "--count", "3", "--period", "1s", "--gap", "400ms", "--out", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			run := readRecord(t, out)
			if got := statuses(run); got[200] != tt.want || got[429] != 6-tt.want {
				t.Errorf("statuses %v, want %d accepted of 6", got, tt.want)
			}
			// The groups straddle a whole second of the wall clock.
			start := run.Header.Start
			var before, after []time.Time
			for _, r := range run.Results {
				// (Sched counts on the monotonic clock, Start is the wall
				// clock: they may disagree by nanoseconds.)
				at := start.Add(time.Duration(r.Sched)).Round(time.Microsecond)
				if at.Nanosecond() > 500e6 {
					before = append(before, at)
				} else {
					after = append(after, at)
				}
			}
			if len(before) != 3 || len(after) != 3 || before[0].Nanosecond() != 800e6 || after[0].Nanosecond() != 200e6 {
				t.Errorf("scheduled at %v and %v, want 3 at .8s and 3 at .2s", before, after)
			}
		})
	}
}

func TestRunRaceModes(t *testing.T) {
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.1, Capacity: 5}
	tests := []struct {
		mode string
		h2c  bool
	}{{"barrier", false}, {"last-byte", false}, {"single-packet", true}}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			srv := refServer(t, "", bucket, func(c *testserver.Config, _ *testserver.Policy) { c.H2C = tt.h2c })
			out := filepath.Join(t.TempDir(), "race.jsonl")
			args := []string{"run", srv.URL() + "/", "--pattern", "race", "--count", "12", "--race-mode", tt.mode, "--out", out}
			if tt.h2c {
				args = append(args, "--h2c")
			}
			code, stdout, stderr := runCLI(t, nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			run := readRecord(t, out)
			if got := statuses(run); got[200] != 5 || got[429] != 7 {
				t.Errorf("statuses %v, want exactly the capacity (5) accepted of 12", got)
			}
			if !strings.Contains(stdout, "races: 1 release") || !strings.Contains(stdout, "server arrival spread") {
				t.Errorf("summary lacks the race line:\n%s", stdout)
			}
		})
	}
}

// clientAccepted returns the accepted count per client of a --json run.
func clientAccepted(t *testing.T, doc map[string]any) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	list, _ := doc["clients"].([]any)
	for _, c := range list {
		c := c.(map[string]any)
		m[c["client"].(string)] = c["accepted"].(float64)
	}
	return m
}

func TestRunClientsByHeader(t *testing.T) {
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.1, Capacity: 2}
	srv := refServer(t, "", bucket, func(_ *testserver.Config, p *testserver.Policy) { p.Key = "header:X-Key" })
	dir := t.TempDir()
	vals := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(vals, []byte("alpha\nbeta\n\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Synthetic k1…k3.
	doc, raw := runJSON(t, "run", srv.URL()+"/", "--pattern", "burst", "--count", "3", "--clients", "3",
		"--client-header", "X-Key", "--out", filepath.Join(dir, "a.jsonl"))
	if got, want := clientAccepted(t, doc), map[string]float64{"k1": 2, "k2": 2, "k3": 2}; !mapsEqual(got, want) {
		t.Errorf("accepted per client = %v, want %v\n%s", got, want, raw)
	}
	// Values from a file; --clients defaults to their number.
	doc, raw = runJSON(t, "run", srv.URL()+"/", "--pattern", "burst", "--count", "3",
		"--client-header", "X-Key", "--client-values", vals, "--out", filepath.Join(dir, "b.jsonl"))
	if got, want := clientAccepted(t, doc), map[string]float64{"alpha": 2, "beta": 2, "gamma": 2}; !mapsEqual(got, want) {
		t.Errorf("accepted per client = %v, want %v\n%s", got, want, raw)
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRunClientsBySourceIP(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("127.0.0.N source addresses need Linux")
	}
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.1, Capacity: 2}
	srv := refServer(t, "", bucket, func(_ *testserver.Config, p *testserver.Policy) { p.Key = testserver.KeyIP })
	out := filepath.Join(t.TempDir(), "ip.jsonl")
	code, stdout, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "3",
		"--source-ips", "127.0.0.0/30,127.0.0.4", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	per := map[string]map[int]int{}
	for _, r := range run.Results {
		ip, _, _ := strings.Cut(r.Src, ":")
		if per[ip] == nil {
			per[ip] = map[int]int{}
		}
		per[ip][r.Status]++
	}
	// /30 gives .1 and .2 (network and broadcast skipped), then .4.
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.4"} {
		if per[ip][200] != 2 || per[ip][429] != 1 {
			t.Errorf("source %s: statuses %v, want two 200 and one 429 (per-IP quota of 2)", ip, per[ip])
		}
	}
	if len(per) != 3 {
		t.Errorf("sources %v, want 3", per)
	}
	if !strings.Contains(stdout, "client") {
		t.Errorf("no per-client table:\n%s", stdout)
	}
}

func TestRunReplicas(t *testing.T) {
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.1, Capacity: 2}
	a := refServer(t, "", bucket, nil)
	b := refServer(t, "", bucket, nil)
	out := filepath.Join(t.TempDir(), "rep.jsonl")
	code, _, stderr := runCLI(t, nil, "run", a.URL()+"/", b.URL()+"/", "--pattern", "burst", "--count", "6", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	per := map[string]map[int]int{}
	for _, r := range run.Results {
		if per[r.URL] == nil {
			per[r.URL] = map[int]int{}
		}
		per[r.URL][r.Status]++
	}
	// Round-robin: 3 requests to each replica, each admits its capacity of 2.
	for _, u := range []string{a.URL() + "/", b.URL() + "/"} {
		if per[u][200] != 2 || per[u][429] != 1 {
			t.Errorf("replica %s: statuses %v, want two 200 and one 429", u, per[u])
		}
	}
	if !slices.Equal(run.Header.Targets, []string{a.URL() + "/", b.URL() + "/"}) {
		t.Errorf("header targets %v", run.Header.Targets)
	}
}

func TestRunPlanFile(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 10, Capacity: 3}, nil)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\nphases:\n  - {pattern: burst, count: 5}\n  - pause: 300ms\n  - {pattern: steady, rate: 5/s, duration: 600ms, name: trickle}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan.jsonl")
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--plan", plan, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	phases := map[string]map[int]int{}
	for _, r := range run.Results {
		if phases[r.Phase] == nil {
			phases[r.Phase] = map[int]int{}
		}
		phases[r.Phase][r.Status]++
	}
	// burst of 5 against capacity 3; 300ms later the bucket holds 3 again,
	// and 5/s is below the refill rate.
	if phases["burst"][200] != 3 || phases["burst"][429] != 2 || phases["trickle"][200] != 3 || len(phases) != 2 {
		t.Errorf("statuses per phase %v, want burst 3+2, trickle 3 accepted", phases)
	}
	for _, want := range []string{"phase burst: 5 requests", "phase pause: 300ms", "phase trickle: 3 requests"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
}

func TestRunDryRun(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, stdout, stderr := runCLI(t, nil, "run", "http://127.0.0.1:1/", "--pattern", "ramp", "--from", "1/s", "--to", "3/s", "--duration", "2s", "--dry-run", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"dry run: nothing sent", "ramp", "4 requests from 1 client(s) over 2s", "seed 1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("dry run wrote %v", files)
	}
}

func TestRunDefaultOut(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), with503)
	dir := t.TempDir()
	t.Chdir(dir)
	code, stdout, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-run-*Z.jsonl"))
	if len(files) != 1 || !strings.Contains(stdout, "record file: "+filepath.Base(files[0])) {
		t.Errorf("files %v, summary %s; want one rlprobe-run-<UTC time>.jsonl, named in the summary", files, stdout)
	}
}

// TestRunUsageErrors: problems are reported before anything is sent,
// exit 2, every problem at once, and no file is left behind.
func TestRunUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.jsonl")
	base := []string{"run", "http://127.0.0.1:1/", "--out", out}
	plan := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\nphases:\n  - {pattern: burst, cont: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no pattern", base, []string{"give --pattern NAME"}},
		{"unsafe method", append(slices.Clone(base), "-X", "POST", "--pattern", "burst", "--count", "1"), []string{"-X POST may change state", "--allow-unsafe-method"}},
		{"bad URLs and more", []string{"run", "ftp://x/", "localhost:8080", "http:///p", "--pattern", "burst", "--count", "1", "--clients", "0", "--timeout", "0s", "--out", out},
			[]string{"5 problems", "scheme must be http or https", "has no scheme", "has no host", "--clients must be at least 1", "--timeout must be positive"}},
		{"request cap", append(slices.Clone(base), "--pattern", "steady", "--rate", "100/s", "--duration", "2m"), []string{"12000 requests, over the cap --max-requests 10000"}},
		{"duration cap", append(slices.Clone(base), "--pattern", "recovery", "--every", "1m", "--span", "6m"), []string{"lasts 6m0s, over the cap --max-duration 5m0s"}},
		{"rate cap", append(slices.Clone(base), "--pattern", "steady", "--rate", "600/s", "--duration", "1s", "--clients", "2"), []string{"over the cap --max-rate 1000/s"}},
		{"lowered cap", append(slices.Clone(base), "--pattern", "burst", "--count", "8", "--max-requests", "5"), []string{"8 requests, over the cap --max-requests 5"}},
		{"missing pattern flag", append(slices.Clone(base), "--pattern", "steady", "--rate", "2/s"), []string{"--pattern steady: --duration is required"}},
		{"foreign pattern flag", append(slices.Clone(base), "--pattern", "burst", "--count", "2", "--every", "1s"), []string{"--pattern burst: --every does not apply to burst"}},
		{"unknown pattern", append(slices.Clone(base), "--pattern", "sine"), []string{`--pattern "sine" is not one of`}},
		{"plan and pattern", append(slices.Clone(base), "--plan", plan, "--pattern", "burst"), []string{"exclusive"}},
		{"plan with pattern flags", append(slices.Clone(base), "--plan", plan, "--count", "3"), []string{"--count: pattern flags go with --pattern"}},
		{"bad plan", append(slices.Clone(base), "--plan", plan), []string{"p.yaml:3: unknown key \"cont\""}},
		{"bare duration", append(slices.Clone(base), "--pattern", "steady", "--rate", "1/s", "--duration", "10"), []string{"has no unit"}},
		{"bare rate", append(slices.Clone(base), "--pattern", "steady", "--rate", "10", "--duration", "1s"), []string{"has no unit"}},
		{"start in the past", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "--start-at", "2001-01-01T00:00:00Z"), []string{"--start-at 2001-01-01T00:00:00Z is in the past"}},
		{"client values without header", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "--client-values", plan), []string{"--client-values needs --client-header"}},
		{"h2c with https", []string{"run", "https://127.0.0.1:1/", "--h2c", "--pattern", "burst", "--count", "1", "--out", out}, []string{"--h2c is for http://"}},
		{"unset variable", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "-H", "Authorization: Bearer $NOPE"), []string{"$NOPE is not set"}},
		{"bad header", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "-H", "NoColon"), []string{`write a header as "Name: value"`}},
		{"cert without key", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "--client-cert", plan), []string{"--client-cert and --client-key go together"}},
		{"bad source ips", append(slices.Clone(base), "--pattern", "burst", "--count", "1", "--source-ips", "127.0.0.300"), []string{"not an IP address"}},
		{"race over the rate cap", append(slices.Clone(base), "--pattern", "race", "--count", "30", "--clients", "40"), []string{"a race releases 1200 requests at once, over the cap --max-rate 1000/s"}},
		{"race mode", append(slices.Clone(base), "--pattern", "race", "--count", "2", "--race-mode", "fast"), []string{"race-mode must be barrier, last-byte or single-packet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, nil, tt.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want 2; stderr %s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was created", out)
			}
		})
	}
}

// TestRunTargetStops: the target goes away mid-run; the run aborts with
// exit 3 and every request is accounted for in the file.
func TestRunTargetStops(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 100, Capacity: 100}, nil)
	out := filepath.Join(t.TempDir(), "stop.jsonl")
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Stop the server once it has answered a few requests.
		for range 200 {
			time.Sleep(50 * time.Millisecond)
			if b, _ := os.ReadFile(out); bytes.Count(b, []byte(`"status":200`)) >= 5 {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	code, stdout, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "steady", "--rate", "20/s", "--duration", "5s",
		"--abort-after-errors", "3", "--out", out)
	<-done
	if code != ExitUnreachable {
		t.Fatalf("exit %d, want 3; stderr %s", code, stderr)
	}
	if !strings.Contains(stderr, "aborted") || !strings.Contains(stderr, "consecutive transport errors") || !strings.Contains(stderr, out) {
		t.Errorf("stderr does not explain the abort: %s", stderr)
	}
	run := readRecord(t, out)
	if len(run.Results) != 100 || run.End.Reason != record.ReasonAborted {
		t.Errorf("%d results, end %+v; want all 100 scheduled requests and reason aborted", len(run.Results), run.End)
	}
	by := map[record.Outcome]int{}
	for _, r := range run.Results {
		by[r.Outcome]++
	}
	if by[record.OutcomeResponse] < 5 || by[record.OutcomeError] < 3 || by[record.OutcomeNotSent] == 0 {
		t.Errorf("outcomes %v; want answers, then errors, then not-sent", by)
	}
	if !strings.Contains(stdout, "not-sent") {
		t.Errorf("the partial summary lacks the not-sent row:\n%s", stdout)
	}
}

// TestRunInterrupted: cancelling the context (SIGINT in cmd/rlprobe) stops
// the run with exit 3; results so far and the not-sent rest are recorded.
func TestRunInterrupted(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 100, Capacity: 100}, nil)
	out := filepath.Join(t.TempDir(), "int.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for range 200 {
			time.Sleep(50 * time.Millisecond)
			if b, _ := os.ReadFile(out); bytes.Count(b, []byte(`"status":200`)) >= 3 {
				break
			}
		}
		cancel()
	}()
	code, stdout, stderr := runCLICtx(ctx, nil, "run", srv.URL()+"/", "--pattern", "steady", "--rate", "10/s", "--duration", "5s", "--out", out)
	cancel()
	if code != ExitUnreachable || !strings.Contains(stderr, "interrupted after") || !strings.Contains(stderr, out) {
		t.Fatalf("exit %d, stderr %s; want 3 and an interruption message naming the file", code, stderr)
	}
	run := readRecord(t, out)
	if len(run.Results) != 50 || run.End.Reason != record.ReasonInterrupted {
		t.Errorf("%d results, end %+v; want 50 and reason interrupted", len(run.Results), run.End)
	}
	notSent := 0
	for _, r := range run.Results {
		if r.Outcome == record.OutcomeNotSent {
			notSent++
			if r.Err != "signal" {
				t.Errorf("not-sent seq %d err %q, want signal", r.Seq, r.Err)
			}
		}
	}
	if notSent == 0 || notSent == 50 {
		t.Errorf("%d not-sent, want some", notSent)
	}
	if !strings.Contains(stdout, "(interrupted)") {
		t.Errorf("no partial summary:\n%s", stdout)
	}
}

// TestRunOther: more than 5% of answers neither accepted nor rejected ends
// the run with exit 3 and a hint.
func TestRunOther(t *testing.T) {
	srv := refServer(t, "/only", nginxDemo(), nil)
	out := filepath.Join(t.TempDir(), "404.jsonl")
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/wrong", "--pattern", "steady", "--rate", "50/s", "--duration", "2s", "--out", out)
	if code != ExitUnreachable || !strings.Contains(stderr, "neither accepted") || !strings.Contains(stderr, "404 ×") || !strings.Contains(stderr, "check the URL's path") {
		t.Fatalf("exit %d, stderr %s; want 3, the 404 count and a hint", code, stderr)
	}
	run := readRecord(t, out)
	if run.End.Reason != record.ReasonAborted || len(run.Results) != 100 {
		t.Errorf("end %+v, %d results; want aborted with all 100 accounted for", run.End, len(run.Results))
	}
	if n := statuses(run)[404]; n < 5 || n > 50 {
		t.Errorf("%d answers of 404 before aborting; want the run cut short after 5", n)
	}
	// A short run that is all 404 completes, then exits 3 all the same.
	out2 := filepath.Join(t.TempDir(), "404b.jsonl")
	code, _, stderr = runCLI(t, nil, "run", srv.URL()+"/wrong", "--pattern", "burst", "--count", "2", "--out", out2)
	if code != ExitUnreachable || !strings.Contains(stderr, "2 of 2 answers") {
		t.Errorf("exit %d, stderr %s; want 3", code, stderr)
	}
}

// TestRunSecrets: secrets given on the command line never reach the record
// file, stdout or stderr.
func TestRunSecrets(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), nil)
	dir := t.TempDir()
	hfile := filepath.Join(dir, "headers.txt")
	if err := os.WriteFile(hfile, []byte("# secrets\nX-Api-Key: filekey-0123456789\nX-Custom-Token: ${CUSTOM}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vals := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(vals, []byte("clientkey-aaaa1111\nclientkey-bbbb2222\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "envtoken-5f3c9a", "CUSTOM": "customsecret-77aa"}
	secrets := []string{"envtoken-5f3c9a", "customsecret-77aa", "filekey-0123456789", "querysecret-9911", "userpass-4242", "clientkey-aaaa1111", "clientkey-bbbb2222"}
	u := strings.Replace(srv.URL(), "http://", "http://user:userpass-4242@", 1) + "/?sig=querysecret-9911&x=1"
	for _, json := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprintf("s%v.jsonl", json))
		args := []string{"run", u, "--pattern", "burst", "--count", "2", "--out", out,
			"-H", "Authorization: Bearer $TOKEN", "-H", "@" + hfile, "--secret-header", "X-Custom-Token", "--secret-query", "sig",
			"--client-header", "X-Client", "--client-values", vals, "--secret-header", "X-Client"}
		if json {
			args = append(args, "--json")
		}
		code, stdout, stderr := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		file, _ := os.ReadFile(out)
		for _, s := range secrets {
			for name, text := range map[string]string{"record file": string(file), "stdout": stdout, "stderr": stderr} {
				if strings.Contains(text, s) {
					t.Errorf("%s holds the secret %q", name, s)
				}
			}
		}
		if !strings.Contains(string(file), "redacted:sha256:") {
			t.Errorf("record file shows no fingerprint: %s", file)
		}
	}
}

// TestRunUsageErrorsHideSecrets: a refused target is named without its
// credentials.
func TestRunUsageErrorsHideSecrets(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "run", "ftp://user:topsecret-31@example.com/?access_token=tok-9876", "--pattern", "burst", "--count", "1", "--dry-run")
	if code != ExitUsage || !strings.Contains(stderr, "scheme must be http or https") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, s := range []string{"topsecret-31", "tok-9876"} {
		if strings.Contains(stderr, s) {
			t.Errorf("stderr shows the secret %q: %s", s, stderr)
		}
	}
}
