package testserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/http2"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
)

// startServer starts a server for cfg (on 127.0.0.1:0 unless set) and
// stops it when the test ends.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// smoke sends 4 quick requests to a fixed window of 3 per minute and
// checks 3 × 200 then a 429 with its headers, over HTTP on loopback.
func smoke(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Routes = []Route{{Path: "/limited", Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Minute}}}}
	cfg.Handler.EchoArrival = true
	s := startServer(t, cfg)
	var codes []int
	var last *http.Response
	for range 4 {
		before := time.Now()
		resp, err := http.Get(s.URL() + "/limited")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		last = resp
		ns, err := strconv.ParseInt(resp.Header.Get(headers.ArrivalHeader), 10, 64)
		if err != nil || ns < before.UnixNano() || ns > time.Now().UnixNano() {
			t.Errorf("arrival echo %q not within the request's lifetime", resp.Header.Get(headers.ArrivalHeader))
		}
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Errorf("4 requests to a limit of 3: %v", codes)
	}
	if last.Header.Get("Retry-After") == "" || last.Header.Get("RateLimit") == "" || last.Header.Get("RateLimit-Policy") != `"default";q=3;w=60` {
		t.Errorf("rejection headers: %v", last.Header)
	}
	resp, err := http.Get(s.URL() + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /other = %d, want 404", resp.StatusCode)
	}
}

func TestSmokeMemory(t *testing.T) { smoke(t, Config{}) }

func TestSmokeRedis(t *testing.T) {
	smoke(t, Config{Backend: BackendRedis, Redis: RedisConfig{URL: "redis://" + testenv.StartRedis(t)}})
}

// TestTLSAndH2C: the self-signed TLS server speaks HTTP/1.1 and HTTP/2;
// --h2c speaks HTTP/2 over cleartext with prior knowledge.
func TestTLSAndH2C(t *testing.T) {
	one := []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute}}}}
	s := startServer(t, Config{Routes: one, TLS: true})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %q, want https", s.URL())
	}
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.RootCAs()}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want || resp.StatusCode != 200 {
			t.Errorf("TLS, h2 %v: %s %d, want HTTP/%d 200", h2, resp.Proto, resp.StatusCode, want)
		}
		tr.CloseIdleConnections()
	}

	s = startServer(t, Config{Routes: one, H2C: true})
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Errorf("h2c: %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
	}
	tr.CloseIdleConnections()
}

func TestNewErrors(t *testing.T) {
	one := []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}}}}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Routes: one, Listen: "0.0.0.0:0"}, "not loopback"},
		{Config{Routes: one, Listen: ":8080"}, "not loopback"},
		{Config{Routes: one, Listen: "192.0.2.1:80"}, "--public"},
		{Config{Routes: one, Listen: "nonsense"}, "listen address"},
		{Config{Routes: one, TLS: true, H2C: true}, "h2c"},
		{Config{Routes: one, TLSCertFile: "x.pem"}, "both"},
		{Config{Routes: one, Backend: "etcd"}, "backend"},
		{Config{Routes: one, Backend: BackendRedis, Redis: RedisConfig{URL: "http://x"}}, "redis URL"},
		{Config{Routes: []Route{{Policy: one[0].Policy, Backend: failing{}}}}, "Config.Backend"},
		{Config{Routes: one, TLSCertFile: "/nonexistent.pem", TLSKeyFile: "/nonexistent.key"}, "certificate"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) error = %v, want one containing %q", tc.cfg, err, tc.want)
		}
	}
	for _, listen := range []string{"localhost:0", "127.0.0.1:0", "[::1]:0"} {
		if _, err := New(Config{Routes: one, Listen: listen}); err != nil {
			t.Errorf("New(listen %s) = %v, want no error", listen, err)
		}
	}
	if _, err := New(Config{Routes: one, Listen: "0.0.0.0:0", Public: true}); err != nil {
		t.Errorf("New(listen 0.0.0.0:0, public) = %v, want no error", err)
	}
}

// TestStartErrors: a taken port and an unreachable Redis are told apart.
func TestStartErrors(t *testing.T) {
	one := []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}}}}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s, err := New(Config{Routes: one, Listen: taken.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if !errors.Is(err, ErrListen) || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("Start on a taken port: %v; want ErrListen naming the address", err)
	}

	// A port nothing listens on: the one just taken, once closed.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := free.Addr().String()
	free.Close()
	s, err = New(Config{Routes: one, Listen: "127.0.0.1:0", Backend: BackendRedis, Redis: RedisConfig{URL: "redis://" + addr}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if !errors.Is(err, ErrRedisUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Start with Redis down: %v; want ErrRedisUnreachable naming %s", err, addr)
	}
	s.Shutdown(context.Background())
}

// TestMemListenerSynctest serves over the in-memory listener inside a
// synctest bubble: keys by the dialled source address, exact counts at a
// window edge with fake time, and a clean shutdown.
func TestMemListenerSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Second}
		s, err := New(Config{Routes: []Route{{Path: "/x", Policy: Policy{Limiter: cfg, Key: KeyIP}}}, Handler: HandlerOptions{EchoArrival: true}})
		if err != nil {
			t.Fatal(err)
		}
		l := NewMemListener()
		if err := s.StartListener(l); err != nil {
			t.Fatal(err)
		}
		client := func(src string) *http.Client {
			return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return l.Dial(ctx, network, addr, netip.MustParseAddr(src))
			}}}
		}
		a, b := client("10.0.0.1"), client("10.0.0.2")
		status := func(c *http.Client) int {
			resp, err := c.Get(s.URL() + "/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ns, _ := strconv.ParseInt(resp.Header.Get(headers.ArrivalHeader), 10, 64); ns != time.Now().UnixNano() {
				t.Errorf("arrival echo %d, want the bubble's now %d", ns, time.Now().UnixNano())
			}
			return resp.StatusCode
		}
		var got []int
		for _, c := range []*http.Client{a, a, a, b, b, b} {
			got = append(got, status(c))
		}
		time.Sleep(time.Second - time.Microsecond) // just before a's window ends
		got = append(got, status(a))
		time.Sleep(time.Microsecond)
		got = append(got, status(a), status(a), status(a))
		if want := "[200 200 429 200 200 429 429 200 200 429]"; fmt.Sprint(got) != want {
			t.Errorf("statuses %v, want %s", got, want)
		}
		a.CloseIdleConnections()
		b.CloseIdleConnections()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Dial(context.Background(), "tcp", "x", netip.Addr{}); !errors.Is(err, ErrListenerClosed) {
			t.Errorf("Dial after Shutdown = %v, want ErrListenerClosed", err)
		}
	})
}

// TestArrivalIsLastRead: over a real HTTP/1 connection, the echoed arrival
// is when the request's last byte was read, not when the handler ran.
func TestArrivalIsLastRead(t *testing.T) {
	s := startServer(t, Config{Routes: []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Minute}}}},
		Handler: HandlerOptions{EchoArrival: true}})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	before := time.Now()
	if _, err := io.WriteString(c, "\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ns, _ := strconv.ParseInt(resp.Header.Get(headers.ArrivalHeader), 10, 64)
	if ns < before.UnixNano() {
		t.Errorf("arrival %d is before the last byte was sent (%d)", ns, before.UnixNano())
	}
}

// TestShutdownEndsDelays: a graceful stop answers requests held by a
// leaky-bucket delay with 503 at once instead of waiting out the queue.
func TestShutdownEndsDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1.0 / 60, Capacity: 3}
		s, err := New(Config{Routes: []Route{{Policy: Policy{Limiter: cfg}}}})
		if err != nil {
			t.Fatal(err)
		}
		l := NewMemListener()
		if err := s.StartListener(l); err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return l.Dial(ctx, network, addr, netip.Addr{})
		}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		start := time.Now()
		got := make(chan int, 1)
		go func() {
			resp, err := c.Get(s.URL()) // delayed by 62.5 s (1r/m is 16 milli-requests/s)
			if err != nil {
				got <- 0
				return
			}
			resp.Body.Close()
			got <- resp.StatusCode
		}()
		synctest.Wait()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if code := <-got; code != http.StatusServiceUnavailable {
			t.Errorf("delayed request during shutdown: %d, want 503", code)
		}
		if d := time.Since(start); d >= time.Second {
			t.Errorf("shutdown waited %v for a delayed request", d)
		}
	})
}

// TestReloadChangesThePolicy: a reload doubles the limit of a running
// server; requests after it are decided under the new policy, and an
// invalid config changes nothing.
func TestReloadChangesThePolicy(t *testing.T) {
	fw := func(limit int64) Config {
		return Config{Routes: []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: limit, Window: time.Hour}}}}}
	}
	srv, err := New(fw(2))
	if err != nil {
		t.Fatal(err)
	}
	ml := NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	accepted := func(n int) int { return acceptedOf(t, ml, n) }
	if got := accepted(5); got != 2 {
		t.Fatalf("before the reload %d accepted, want 2", got)
	}
	bad := fw(0)
	if err := srv.Reload(bad); err == nil {
		t.Fatal("an invalid config was reloaded")
	}
	if got := accepted(1); got != 0 {
		t.Fatalf("a failed reload changed the policy: %d accepted", got)
	}
	if err := srv.Reload(fw(4)); err != nil {
		t.Fatal(err)
	}
	if got := accepted(6); got != 4 {
		t.Fatalf("after the reload %d accepted, want 4 (fresh state, doubled limit)", got)
	}
}

// acceptedOf sends n GET / requests, one after the other, through the
// in-memory listener ml and counts the 200 answers.
func acceptedOf(t *testing.T, ml *MemListener, n int) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ml.Dial(ctx, network, addr, netip.Addr{})
	}}}
	defer c.CloseIdleConnections()
	ok := 0
	for range n {
		resp, err := c.Get("http://" + MemListenerAddr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	return ok
}
