package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

func TestWatchFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "2"}, "write a percentage such as 2%"},
		{[]string{"--budget", "150%"}, "at most 100"},
		{[]string{"--metrics-listen", "0.0.0.0:9464"}, "not loopback"},
		{[]string{"--metrics-listen", "9464"}, "want host:port"},
		{[]string{"--every", "60"}, "has no unit"},
		{[]string{"--limit", "10", "--window", "1m", "--budget", "2%", "--every", "1m"}, "budget cannot fit"},
	} {
		args := append([]string{"watch", "http://127.0.0.1:1/", "--dir", t.TempDir(), "--once"}, tc.args...)
		code, _, errOut := runCLI(t, nil, args...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestWatchDefaultsHeadersMode: `rlprobe watch URL --rate 20/s
// --capacity 20 --once` with every other setting at its default, against
// the reference server on loopback sending draft-8 headers: exit 0, and
// the start event, valid by its schema, says headers mode and a budget of
// one request per cycle and per period.
func TestWatchDefaultsHeadersMode(t *testing.T) {
	url := startServer(t, testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.TokenBucket, Rate: 20, Capacity: 20},
		Dialects: []headers.Dialect{headers.Draft8},
	})
	sch := testenv.CompileSchema(t, "../../docs/schema", "watch-event.schema.json")
	t.Chdir(t.TempDir()) // --dir's default, rlprobe-watch, lands here
	code, out, errOut := runCLI(t, nil, "watch", url, "--rate", "20/s", "--capacity", "20", "--once", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var start map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if err := sch.Validate(ev); err != nil {
			t.Errorf("event %s does not validate: %v", sc.Text(), err)
		}
		if ev["kind"] == "start" {
			start = ev
		}
	}
	want := map[string]any{"share": 0.02, "per_cycle": 1.0, "per_period_max": 1.0, "share_per_period": 0.05}
	if start == nil || start["mode"] != "headers" || fmt.Sprint(start["budget"]) != fmt.Sprint(want) {
		t.Fatalf("start event %v; want mode headers, budget %v", start, want)
	}
	if msg, _ := start["message"].(string); !strings.Contains(msg, "5% of the quota of 20 (above --budget 2%") {
		t.Errorf("the start line does not say the share really used: %q", msg)
	}
}

// TestWatchOnceJSON: one cycle against a reference server that keeps its
// advertised policy: exit 0, one event a line on stdout (start, cycle,
// stop), a record file in --dir, and the verdict pass.
func TestWatchOnceJSON(t *testing.T) {
	url := startServer(t, testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Second},
		Dialects: []headers.Dialect{headers.Draft8},
	})
	dir := t.TempDir()
	code, out, errOut := runCLI(t, nil, "watch", url, "--limit", "10", "--window", "1s", "--window-type", "fixed",
		"--budget", "20%", "--every", "1s", "--once", "--dir", dir, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var kinds []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev struct{ Schema, Kind, Verdict string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		if ev.Schema != "rlprobe.watch-event/v1" {
			t.Fatalf("schema %q", ev.Schema)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == "cycle" && ev.Verdict != "pass" {
			t.Errorf("verdict %q on an honest server", ev.Verdict)
		}
	}
	if strings.Join(kinds, ",") != "start,cycle,stop" {
		t.Errorf("events %v", kinds)
	}
	// The first cycle's first request (which chose the mode) has its own
	// record file; the rest of the cycle (2 per cycle here) the second,
	// which holds the verdict. Names sort by start time.
	files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
	if len(files) != 2 {
		t.Fatalf("%d record files, want 2", len(files))
	}
	for i, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), `"type":"end"`) || strings.Contains(string(b), `"type":"finding"`) != (i == 1) {
			t.Errorf("record %d: end line %v, verdict %v", i, strings.Contains(string(b), `"type":"end"`), strings.Contains(string(b), `"type":"finding"`))
		}
	}
}

// TestWatchStopsOnSignal: cancelling the context (SIGTERM) stops a
// running watch promptly with exit 0 and an end line in the record.
func TestWatchStopsOnSignal(t *testing.T) {
	url := startServer(t, testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Second},
		Dialects: []headers.Dialect{headers.Draft8},
	})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCLICtx(ctx, nil, "watch", url, "--limit", "10", "--window", "1s", "--budget", "20%", "--every", "1s", "--dir", dir)
		done <- code
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
		if len(files) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d after SIGTERM, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop after its context was cancelled")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
	for _, f := range files {
		if b, _ := os.ReadFile(f); !strings.Contains(string(b), `"type":"end"`) {
			t.Errorf("%s has no end line", f)
		}
	}
}

// TestServeReloadsOnHangup: serve --config reloads the file on a hang-up
// (SIGHUP): the limit doubles for later requests; a broken file keeps the
// running routes.
func TestServeReloadsOnHangup(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "routes.yaml")
	write := func(s string) {
		if err := os.WriteFile(conf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("routes:\n  - {path: /, algorithm: fixed-window, limit: 2, window: 1h}\n")
	hup := make(chan struct{})
	ready := make(chan *testserver.Server, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, _, _ := testFactory(nil)
	errOut := &lockedBuffer{}
	f.IO.ErrOut = errOut
	f.Hangups = hup
	f.ServeReady = func(s *testserver.Server) { ready <- s }
	done := make(chan int, 1)
	go func() { done <- Run(ctx, f, []string{"serve", "--config", conf, "--listen", "127.0.0.1:0"}) }()
	srv := <-ready
	accepted := func(n int) int {
		ok := 0
		for range n {
			resp, err := http.Get(srv.URL() + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok++
			}
		}
		return ok
	}
	if got := accepted(4); got != 2 {
		t.Fatalf("%d accepted before the reload, want 2", got)
	}
	write("routes: [oops")
	hup <- struct{}{}
	waitFor(t, errOut, "reload of "+conf+" failed")
	if got := accepted(1); got != 0 {
		t.Fatalf("a broken file changed the routes: %d accepted", got)
	}
	write("routes:\n  - {path: /, algorithm: fixed-window, limit: 4, window: 1h}\n")
	hup <- struct{}{}
	waitFor(t, errOut, "reloaded "+conf)
	if got := accepted(6); got != 4 {
		t.Fatalf("%d accepted after the reload, want 4", got)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d", code)
	}
}

// waitFor polls b until it holds want (bounded).
func waitFor(t *testing.T, b *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q:\n%s", want, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchCatchesReloadedLimit: the reference server's limit doubled by a
// reload under a running watch reaches the webhook as a policy-drift event
// and the metrics within two cycles — through advertised headers, and with
// --headers none on a per-key limit.
func TestWatchCatchesReloadedLimit(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	for _, tc := range []struct{ name, route, key string }{
		{"advertised headers", "algorithm: fixed-window, window: 1s, headers: draft-8", "global"},
		{"per-key, no headers", "algorithm: fixed-window, window: 1s, headers: none, key: 'header:X-Api-Key'", "header:X-Api-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "routes.yaml")
			write := func(limit int) {
				text := fmt.Sprintf("routes:\n  - {path: /, limit: %d, %s}\n", limit, tc.route)
				if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(10)
			hup := make(chan struct{})
			ready := make(chan *testserver.Server, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sf, _, _ := testFactory(nil)
			serr := &lockedBuffer{}
			sf.IO.ErrOut, sf.Hangups = serr, hup
			sf.ServeReady = func(s *testserver.Server) { ready <- s }
			go Run(ctx, sf, []string{"serve", "--config", conf, "--listen", "127.0.0.1:0"})
			srv := <-ready

			var mu sync.Mutex
			var hooks []map[string]any
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var ev map[string]any
				_ = json.NewDecoder(r.Body).Decode(&ev)
				mu.Lock()
				hooks = append(hooks, ev)
				mu.Unlock()
			}))
			defer hook.Close()
			kinds := func(kind string) []map[string]any {
				mu.Lock()
				defer mu.Unlock()
				var out []map[string]any
				for _, ev := range hooks {
					if ev["kind"] == kind {
						out = append(out, ev)
					}
				}
				return out
			}
			wdir := t.TempDir()
			wf, _, _ := testFactory(nil)
			werr := &lockedBuffer{}
			wf.IO.ErrOut = werr
			wdone := make(chan int, 1)
			go func() {
				wdone <- Run(ctx, wf, []string{"watch", srv.URL() + "/", "--limit", "10", "--window", "1s", "--window-type", "fixed",
					"--key", tc.key, "--budget", "20%", "--every", "1s", "--dir", wdir, "--webhook", hook.URL, "--metrics-listen", "127.0.0.1:0"})
			}()
			waitCycles := func(n int) {
				deadline := time.Now().Add(30 * time.Second)
				for len(kinds("cycle")) < n {
					select {
					case code := <-wdone:
						t.Fatalf("watch exited %d; it said:\n%s", code, werr.String())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("fewer than %d cycles reached the webhook; watch said:\n%s", n, werr.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitCycles(2)
			if d := kinds("drift"); len(d) != 0 {
				t.Fatalf("drift before the reload: %v", d)
			}
			write(20)
			hup <- struct{}{}
			waitFor(t, serr, "reloaded "+conf)
			before := len(kinds("cycle"))
			waitCycles(before + 2)
			drifts := kinds("drift")
			if len(drifts) == 0 {
				t.Fatalf("no policy-drift within two cycles of the reload; watch said:\n%s", werr.String())
			}
			d, _ := drifts[0]["drift"].(map[string]any)
			f, _ := drifts[0]["finding"].(map[string]any)
			if d["field"] != "limit" || d["before"] != "10" || d["after"] != "20" || f["id"] != "policy-drift" {
				t.Errorf("drift event %v", drifts[0])
			}
			_, maddr, _ := strings.Cut(werr.String(), "metrics on http://")
			maddr, _, _ = strings.Cut(maddr, "/metrics")
			resp, err := http.Get("http://" + maddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `rlprobe_drift_events_total{field="limit"} 1`) {
				t.Errorf("the metrics do not count the drift:\n%s", body)
			}
			cancel()
			if code := <-wdone; code != ExitOK {
				t.Errorf("watch exit %d after its context ended", code)
			}
		})
	}
}
