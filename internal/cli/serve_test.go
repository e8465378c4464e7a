package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs `rlprobe serve args...` in-process until the test ends
// or stop is called, and returns the URL of its first stdout line.
func startServe(t *testing.T, args ...string) (url string, stop func() (int, string)) {
	t.Helper()
	pr, pw := io.Pipe()
	errOut := &lockedBuffer{}
	f := &Factory{IO: IOStreams{In: strings.NewReader(""), Out: pw, ErrOut: errOut}, Getenv: func(string) string { return "" }, Version: "test"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code := Run(ctx, f, append([]string{"serve"}, args...))
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("rlprobe serve %v: no first line (exit %d): %s", args, <-done, errOut.String())
	}
	go io.Copy(io.Discard, pr)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("first stdout line %q, want 'listening on URL'", line)
	}
	var once sync.Once
	var code int
	stop = func() (int, string) {
		once.Do(func() { cancel(); code = <-done })
		return code, errOut.String()
	}
	t.Cleanup(func() { stop() })
	return url, stop
}

// TestServeFixedWindow is the example: a fixed window of 5 per 2 s
// answered by 8 quick requests gives 5 × 200 then 3 × 429 with
// Retry-After, RateLimit and RateLimit-Policy; cancelling the context
// (SIGINT) stops it with exit 0.
func TestServeFixedWindow(t *testing.T) {
	url, stop := startServe(t, "--algorithm", "fixed-window", "--limit", "5", "--window", "2s", "--listen", "127.0.0.1:0", "--log-requests")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("URL %q", url)
	}
	var codes []int
	for i := range 8 {
		resp, err := http.Get(url + "/anything")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") != `"default";q=5;w=2` {
			t.Errorf("request %d: RateLimit %q, RateLimit-Policy %q", i, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
		}
		if ra := resp.Header.Get("Retry-After"); (resp.StatusCode == 429) != (ra == "1" || ra == "2") {
			t.Errorf("request %d: status %d with Retry-After %q", i, resp.StatusCode, ra)
		}
	}
	if got := fmt.Sprint(codes); got != "[200 200 200 200 200 429 429 429]" {
		t.Errorf("8 quick requests: %s, want 5 × 200 then 3 × 429", got)
	}
	code, errOut := stop()
	if code != 0 {
		t.Errorf("serve exit %d after cancel, want 0; stderr %s", code, errOut)
	}
	if n := strings.Count(errOut, "status="); n != 8 {
		t.Errorf("--log-requests wrote %d request lines, want 8:\n%s", n, errOut)
	}
}

func TestServeConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "routes.yaml")
	doc := "routes:\n  - {path: /a, algorithm: gcra, rate: 1r/m, burst: 1, status: 503}\n  - {path: /b, algorithm: sliding-log, limit: 1, window: 1m, headers: x-ratelimit}\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	url, _ := startServe(t, "--config", path, "--listen", "127.0.0.1:0")
	var got []string
	for _, p := range []string{"/a", "/a", "/a", "/b", "/b", "/c"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, fmt.Sprintf("%s=%d", p, resp.StatusCode))
		if p == "/b" && resp.Header.Get("X-RateLimit-Limit") != "1" {
			t.Errorf("/b: X-RateLimit-Limit %q, want 1", resp.Header.Get("X-RateLimit-Limit"))
		}
	}
	if want := "[/a=200 /a=200 /a=503 /b=200 /b=429 /c=404]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestServeTLS(t *testing.T) {
	url, _ := startServe(t, "--algorithm", "token-bucket", "--rate", "10/s", "--capacity", "5", "--tls", "--listen", "127.0.0.1:0")
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Errorf("first line URL %q, want https", url)
	}
}

func TestServeUsageErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	deadRedis := "redis://" + free.Addr().String()
	free.Close()
	cfgPath := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(cfgPath, []byte("routes:\n  - path: /a\n    algorithm: fixed-window\n    limit: 5\n    windw: 2s\n"), 0o644)
	penaltyCfg := filepath.Join(t.TempDir(), "penalty.yaml")
	os.WriteFile(penaltyCfg, []byte("routes:\n  - {path: /a, algorithm: fixed-window, limit: 5, window: 2s, penalty: extend}\n"), 0o644)
	fw := []string{"--algorithm", "fixed-window", "--limit", "5", "--window", "2s"}
	tests := []struct {
		args []string
		want string
	}{
		{nil, "choose --algorithm"},
		{append(fw, "--capacity", "3"), "capacity means nothing for fixed-window"},
		{[]string{"--algorithm", "gcra", "--rate", "1/s", "--capacity", "4", "--burst", "3"}, "capacity and burst"},
		{[]string{"--algorithm", "token-bucket", "--rate", "1/s", "--nodelay"}, "nodelay means nothing"},
		{[]string{"--algorithm", "gcra", "--rate", "10"}, "rate"},
		{[]string{"--algorithm", "fixed-window", "--limit", "5", "--window", "60"}, "no unit"},
		{append(fw, "--config", cfgPath), "--config"},
		{[]string{"--config", cfgPath}, "windw"},
		{[]string{"--config", "/nonexistent.yaml"}, "no such file"},
		{append(fw, "--redis", "redis://x"), "--backend memory"},
		{append(fw, "--backend", "redis", "--race-gap", "20ms"), "--atomic=false"},
		{append(fw, "--backend", "cassandra"), "memory or redis"},
		{append(fw, "--on-backend-error", "panic"), "allow or deny"},
		{append(fw, "--headers", "draft-9"), "draft-9"},
		{append(fw, "--fault", "lies"), "fault"},
		{append(fw, "--retry-after", "never"), "Retry-After mode"},
		{append(fw, "--key", "cookie"), "header:NAME"},
		{append(fw, "--listen", "0.0.0.0:0"), "--public"},
		{append(fw, "--tls", "--h2c"), "h2c"},
		{append(fw, "--listen", taken.Addr().String()), "port unavailable"},
		{append(fw, "--listen", "127.0.0.1:0", "--backend", "redis", "--redis", deadRedis), "Redis unreachable"},
		{append(fw, "--penalty", "jail"), `penalty "jail"`},
		{[]string{"--algorithm", "gcra", "--rate", "1/s", "--penalty", "extend"}, "extend only for fixed-window"},
		{append(fw, "--refill", "whole"), "refill"},
		{append(fw, "--penalty", "block:5s", "--backend", "redis"), "--penalty cannot be used with --backend redis: penalties, idle eviction and refills are decided by the memory backend only"},
		{[]string{"--algorithm", "token-bucket", "--rate", "1/s", "--refill", "interval", "--backend", "redis"}, "--refill cannot be used with --backend redis"},
		{append(fw, "--forget-idle", "1m", "--backend", "redis"), "--forget-idle cannot be used with --backend redis"},
		{[]string{"--config", penaltyCfg, "--backend", "redis", "--redis", deadRedis}, "penalty extend is decided by the memory backend only"},
		{append(fw, "--instances", "0"), "--instances 0: want at least 1"},
		{append(fw, "--instances", "2", "--store", "both"), `store "both"`},
		{append(fw, "--instances", "2", "--balance", "random"), `balance "random"`},
		{append(fw, "--key-fault", "scramble"), `key fault "scramble"`},
		{append(fw, "extra"), "unknown command"},
	}
	for _, tc := range tests {
		code, out, errOut := runCLI(t, nil, append([]string{"serve"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("rlprobe serve %v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestServeNginxDemo: the nginx limit_req demo (rate=1r/s burst=3
// nodelay, 503): 8 quick requests give four 200s then 503s; the server
// then stops promptly with exit 0.
func TestServeNginxDemo(t *testing.T) {
	url, stop := startServe(t, "--algorithm", "leaky-bucket", "--rate", "1r/s", "--burst", "3", "--nodelay", "--status", "503", "--listen", "127.0.0.1:0")
	var codes []int
	for range 8 {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if got := fmt.Sprint(codes); got != "[200 200 200 200 503 503 503 503]" {
		t.Errorf("nginx demo (1r/s burst=3 nodelay), 8 requests: %s", got)
	}
	start := time.Now()
	if code, errOut := stop(); code != 0 {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("graceful stop took %v", d)
	}
}
