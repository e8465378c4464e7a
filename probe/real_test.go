package probe

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Real-socket tests on loopback. They assert outcomes and orders, never
// durations; where timing matters, steps are at least 200 ms.

// seenServer records what each request looked like.
type seenServer struct {
	*httptest.Server
	mu      sync.Mutex
	remotes []string
	protos  []string
	newConn atomic.Int64
}

func startServer(t *testing.T, h http.HandlerFunc, configure func(*httptest.Server)) *seenServer {
	t.Helper()
	s := &seenServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.remotes = append(s.remotes, r.RemoteAddr)
		s.protos = append(s.protos, r.Proto)
		s.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConn.Add(1)
		}
	}
	if configure != nil {
		configure(s.Server)
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *seenServer) seen() (remotes, protos []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.remotes), slices.Clone(s.protos)
}

func newEngine(t *testing.T, opt Options) *Engine {
	t.Helper()
	e, err := New(opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func mustRun(t *testing.T, e *Engine, sends []Send) []record.Result {
	t.Helper()
	now := time.Now()
	results, err := e.Run(t.Context(), now, now.Add(20*ms), sends, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOnePerSend(t, results, sends, results[0].Seq)
	return results
}

func TestBurstUsesOneConnectionPerRequest(t *testing.T) {
	const n = 20
	var arrived sync.WaitGroup
	arrived.Add(n)
	// Every request waits until all have arrived: they are in flight together.
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait()
	}, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}})
	results := mustRun(t, e, steady(n, 0, 0))
	for i, r := range results {
		if r.Status != 200 {
			t.Errorf("results[%d] = %s %d %s", i, r.Outcome, r.Status, r.ErrMsg)
		}
	}
	remotes, _ := srv.seen()
	slices.Sort(remotes)
	if got := len(slices.Compact(remotes)); got != n {
		t.Errorf("server saw %d distinct connections, want %d", got, n)
	}
	if got := srv.newConn.Load(); got != n {
		t.Errorf("server accepted %d connections, want %d (pre-dialled, none extra)", got, n)
	}
}

func TestSourceAddressesOnLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("127.0.0.N source addresses need Linux loopback")
	}
	srv := startServer(t, nil, nil)
	ips := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
	e := newEngine(t, Options{URLs: []string{srv.URL}, SourceIPs: ips, ClientHeader: "X-Client"})
	sends := []Send{{Client: 0}, {At: 10 * ms, Client: 1}, {At: 20 * ms, Client: 2}, {At: 30 * ms, Client: 3}}
	results := mustRun(t, e, sends)
	remotes, _ := srv.seen()
	var hosts []string
	for _, r := range remotes {
		hosts = append(hosts, netip.MustParseAddrPort(r).Addr().String())
	}
	if want := []string{"127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"}; !slices.Equal(hosts, want) {
		t.Errorf("server saw requests from %v, want %v", hosts, want)
	}
	for i, r := range results {
		src := netip.MustParseAddrPort(r.Src).Addr()
		if src != ips[i%2] || r.Client != fmt.Sprintf("k%d", i+1) {
			t.Errorf("results[%d]: src %s client %q, want from %s as k%d", i, r.Src, r.Client, ips[i%2], i+1)
		}
	}
}

func TestReplicasOnLoopback(t *testing.T) {
	a, b := startServer(t, nil, nil), startServer(t, nil, nil)
	e := newEngine(t, Options{URLs: []string{a.URL, b.URL}})
	results := mustRun(t, e, steady(4, 0, 10*ms))
	for i, r := range results {
		want := []string{a.URL, b.URL}[i%2]
		if r.URL != want || r.Status != 200 {
			t.Errorf("results[%d] = %s %d, want 200 from %s", i, r.URL, r.Status, want)
		}
	}
	ra, _ := a.seen()
	rb, _ := b.seen()
	if len(ra) != 2 || len(rb) != 2 {
		t.Errorf("replicas saw %d and %d requests, want 2 each", len(ra), len(rb))
	}
}

func TestTLSAndHTTP2(t *testing.T) {
	tests := []struct {
		mode      string
		wantProto string
	}{
		{"", "HTTP/2.0"}, // plain sends: ALPN h2
		{RaceBarrier, "HTTP/2.0"},
		{RaceLastByte, "HTTP/1.1"}, // needs a connection per request
		{RaceSinglePacket, "HTTP/2.0"},
	}
	// A Go server runs a handler as soon as the HEADERS arrive; reading the
	// body to its end is what makes it wait for the withheld final frame.
	readBody := func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }
	for _, tt := range tests {
		t.Run("mode="+tt.mode, func(t *testing.T) {
			srv := startServer(t, readBody, func(s *httptest.Server) {
				s.EnableHTTP2 = true
				s.StartTLS()
			})
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			e := newEngine(t, Options{URLs: []string{srv.URL}, TLSConfig: &tls.Config{RootCAs: roots}, RaceMode: tt.mode})
			sends := steady(3, 0, 10*ms)
			if tt.mode != "" {
				sends = batch(3, 1)
			}
			results := mustRun(t, e, sends)
			for i, r := range results {
				if r.Status != 200 || r.TTFB < r.Wrote || r.Done < r.TTFB {
					t.Errorf("results[%d] = %s %d %s (wrote %d ttfb %d done %d)", i, r.Outcome, r.Status, r.ErrMsg, r.Wrote, r.TTFB, r.Done)
				}
			}
			_, protos := srv.seen()
			if want := slices.Repeat([]string{tt.wantProto}, 3); !slices.Equal(protos, want) {
				t.Errorf("server saw %v, want %v", protos, want)
			}
		})
	}
}

func TestTLSErrorIsClassified(t *testing.T) {
	srv := startServer(t, nil, func(s *httptest.Server) { s.StartTLS() })
	e := newEngine(t, Options{URLs: []string{srv.URL}}) // the self-signed root is unknown
	now := time.Now()
	results, err := e.Run(t.Context(), now, now, steady(2, 0, 0), nil)
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("Run error = %v, want ErrAborted (the first connection failed)", err)
	}
	if r := results[0]; r.Err != record.ErrTLS {
		t.Errorf("results[0] = %s %s (%s), want error tls", r.Outcome, r.Err, r.ErrMsg)
	}
}

func TestH2COnLoopback(t *testing.T) {
	srv := startServer(t, nil, func(s *httptest.Server) {
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Start()
	})
	e := newEngine(t, Options{URLs: []string{srv.URL}, H2C: true, Method: http.MethodPost, Body: []byte("hello")})
	results := mustRun(t, e, steady(3, 0, 10*ms))
	for i, r := range results {
		if r.Status != 200 {
			t.Errorf("results[%d] = %s %d %s", i, r.Outcome, r.Status, r.ErrMsg)
		}
	}
	if _, protos := srv.seen(); !slices.Equal(protos, []string{"HTTP/2.0", "HTTP/2.0", "HTTP/2.0"}) {
		t.Errorf("server saw %v, want HTTP/2.0 three times", protos)
	}
	if got := srv.newConn.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1 (multiplexed)", got)
	}
}

func TestTimeoutOnLoopback(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // until the client gives up
	}, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}, Timeout: 200 * ms})
	results := mustRun(t, e, steady(1, 0, 0))
	if r := results[0]; r.Outcome != record.OutcomeError || r.Err != record.ErrTimeout {
		t.Errorf("result = %s %s (%s), want error timeout", r.Outcome, r.Err, r.ErrMsg)
	}
}

func TestRefusedOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	e := newEngine(t, Options{URLs: []string{"http://" + addr + "/"}})
	now := time.Now()
	results, err := e.Run(t.Context(), now, now, steady(3, 0, 0), nil)
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("Run error = %v, want ErrAborted", err)
	}
	if got, want := outcomes(results), map[string]int{"error:refused": 1, "not-sent:abort": 2}; !mapsEqual(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
}

func TestStoppingTheTargetMidRun(t *testing.T) {
	var served atomic.Int64
	var srv *seenServer
	srv = startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 5 {
			go srv.Close() // waits for this handler, then refuses everything
		}
	}, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}, AbortAfterErrors: 5})
	sink := &memSink{}
	sends := steady(40, 0, 20*ms)
	now := time.Now()
	results, err := e.Run(t.Context(), now, now, sends, sink)
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("Run error = %v, want ErrAborted after 5 consecutive errors", err)
	}
	checkOnePerSend(t, results, sends, 0)
	got := outcomes(results)
	if got["response"] < 5 || got["response"]+got["error:refused"]+got["error:reset"]+got["not-sent:abort"] != len(sends) {
		t.Errorf("outcomes = %v, want ≥ 5 responses, then refused or reset errors, then not-sent", got)
	}
	var consec, maxConsec int
	for _, r := range results {
		if r.Outcome == record.OutcomeError {
			consec++
			maxConsec = max(maxConsec, consec)
		} else if r.Outcome == record.OutcomeResponse {
			consec = 0
		}
	}
	if maxConsec != 5 {
		t.Errorf("longest error streak = %d, want 5 (the abort limit)", maxConsec)
	}
	if want := seqRange(0, len(sends)); !slices.Equal(sink.seqs(), want) {
		t.Errorf("sink seqs = %v, want %v", sink.seqs(), want)
	}
}

func seqRange(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

func TestResponsesTheLeanParserDeclinesKeepTheirConnection(t *testing.T) {
	// A chunked body, an interim 103 and a HEAD answer go through
	// net/http's reader; the connection still carries the next request.
	tests := []struct {
		name    string
		method  string
		handler http.HandlerFunc
	}{
		{"chunked", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Ratelimit", `"d";r=1;t=2`)
			fmt.Fprint(w, "part one ")
			w.(http.Flusher).Flush()
			fmt.Fprint(w, "part two")
		}},
		{"interim 103", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Ratelimit", `"d";r=1;t=2`)
			fmt.Fprint(w, "ok")
		}},
		{"HEAD", http.MethodHead, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Ratelimit", `"d";r=1;t=2`)
			w.Header().Set("Content-Length", "5")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.handler, nil)
			e := newEngine(t, Options{URLs: []string{srv.URL}, Method: tt.method})
			results := mustRun(t, e, steady(3, 0, 20*ms))
			for i, r := range results {
				if r.Status != 200 || r.ErrMsg != "" || r.Headers.Get("Ratelimit") == "" || r.TTFB < r.Wrote || r.Done < r.TTFB {
					t.Errorf("results[%d] = %s %d %q headers %v sent %d ttfb %d done %d", i, r.Outcome, r.Status, r.ErrMsg, r.Headers, r.Sent, r.TTFB, r.Done)
				}
			}
			if got := srv.newConn.Load(); got != 1 {
				t.Errorf("server accepted %d connections, want 1 (kept alive)", got)
			}
		})
	}
}

func TestIdleConnectionTheServerClosedIsDropped(t *testing.T) {
	// The server closes each connection 50 ms after its answer, without
	// saying so: the reader waiting on the idle connection notices, and the
	// next send dials instead of failing and retrying.
	srv := startServer(t, nil, func(s *httptest.Server) {
		s.Config.IdleTimeout = 50 * ms
		s.Start()
	})
	e := newEngine(t, Options{URLs: []string{srv.URL}})
	results := mustRun(t, e, steady(3, 0, 300*ms))
	for i, r := range results {
		if r.Status != 200 || r.Src == "" {
			t.Fatalf("results[%d] = %s %d %s", i, r.Outcome, r.Status, r.ErrMsg)
		}
	}
	if results[0].Src == results[1].Src || results[1].Src == results[2].Src {
		t.Errorf("sources %s %s %s: want a new connection for each send", results[0].Src, results[1].Src, results[2].Src)
	}
	p := e.pool(0, 0, 0)
	deadline := time.Now().Add(5 * time.Second)
	for p.idleCount() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * ms)
	}
	if n := p.idleCount(); n != 0 {
		t.Errorf("%d idle connections left after the server closed them all", n)
	}
}
