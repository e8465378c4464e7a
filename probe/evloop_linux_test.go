//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// The event loop on real sockets: outcomes and counts, never durations.

func TestEventLoopIsChosenForPlainHTTP1(t *testing.T) {
	srv := startServer(t, nil, nil)
	loop := newEngine(t, Options{URLs: []string{srv.URL}})
	mustRun(t, loop, steady(3, 0, 5*ms))
	if loop.loopRuns.Load() != 1 {
		t.Errorf("plain HTTP/1.1 with the default dialer: event loop ran %d times, want 1", loop.loopRuns.Load())
	}
	var d net.Dialer
	custom := newEngine(t, Options{URLs: []string{srv.URL}, Dial: func(ctx context.Context, network, addr string, _ netip.Addr) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}})
	mustRun(t, custom, steady(3, 0, 5*ms))
	h2c := newEngine(t, Options{URLs: []string{srv.URL}, H2C: true})
	now := time.Now()
	_, _ = h2c.Run(t.Context(), now, now, steady(1, 0, 0), nil) // the server does not speak h2c
	if custom.loopRuns.Load() != 0 || h2c.loopRuns.Load() != 0 {
		t.Errorf("custom dialer / h2c: event loop ran %d / %d times, want 0", custom.loopRuns.Load(), h2c.loopRuns.Load())
	}
}

func TestEventLoopAnswersEverySend(t *testing.T) {
	var n atomic.Int64
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		fmt.Fprint(w, n.Add(1))
	}, nil)
	for _, noLoop := range []bool{false, true} {
		e := newEngine(t, Options{URLs: []string{srv.URL}, MaxRate: 1e5})
		e.noLoop = noLoop
		sends := steady(2000, 0, 250*time.Microsecond) // 4000/s
		sink := &memSink{}
		now := time.Now()
		results, err := e.Run(t.Context(), now, now.Add(20*ms), sends, sink)
		if err != nil {
			t.Fatalf("noLoop=%v: Run: %v", noLoop, err)
		}
		checkOnePerSend(t, results, sends, results[0].Seq)
		if got := outcomes(results); got["response"] != len(sends) {
			t.Errorf("noLoop=%v: outcomes %v, want %d responses", noLoop, got, len(sends))
		}
		for i, r := range results {
			if r.Status != 200 || r.Sent == 0 || r.Wrote != r.Sent || r.TTFB < r.Wrote || r.Done < r.TTFB || r.Src == "" ||
				r.Headers.Get("Retry-After") != "1" {
				t.Fatalf("noLoop=%v: results[%d] = %+v", noLoop, i, r)
			}
		}
		if got := len(sink.seqs()); got != len(sends) {
			t.Errorf("noLoop=%v: sink got %d results, want %d", noLoop, got, len(sends))
		}
	}
}

// TestEventLoopKeepsTheEchoes: the reference server's arrival echo and
// decision number reach the result on the event loop as on the other
// path (the loop once dropped the decision number, and verify lost the
// server's order of requests whose bounds overlap).
func TestEventLoopKeepsTheEchoes(t *testing.T) {
	var n atomic.Int64
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headers.ArrivalHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		w.Header().Set(headers.DecisionHeader, strconv.FormatInt(n.Add(1), 10))
	}, nil)
	for _, noLoop := range []bool{false, true} {
		e := newEngine(t, Options{URLs: []string{srv.URL}})
		e.noLoop = noLoop
		results := mustRun(t, e, steady(5, 0, 5*ms))
		if !noLoop && e.loopRuns.Load() != 1 {
			t.Fatalf("the event loop ran %d times, want 1", e.loopRuns.Load())
		}
		seen := map[int64]bool{}
		for i, r := range results {
			if r.Arrival == nil || r.Decision == nil || *r.Decision < 1 || seen[*r.Decision] {
				t.Errorf("noLoop=%v: results[%d]: arrival %v, decision %v; want both, each decision once", noLoop, i, r.Arrival, r.Decision)
				continue
			}
			seen[*r.Decision] = true
		}
	}
}

func TestEventLoopLateSendsShareFewConnections(t *testing.T) {
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(20 * ms) }, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}})
	e.maxConns = 3
	// One connection is dialled ahead (one send per millisecond at most);
	// the sends that find it busy dial up to the bound, then wait for a
	// connection freed.
	sends := steady(20, 0, 2*ms)
	results := mustRun(t, e, sends)
	if got := outcomes(results); got["response"] != len(sends) {
		t.Errorf("outcomes %v, want %d responses", got, len(sends))
	}
	if got := srv.newConn.Load(); got > 3 {
		t.Errorf("server accepted %d connections, want at most 3", got)
	}
	if e.loopRuns.Load() != 1 {
		t.Errorf("event loop ran %d times, want 1", e.loopRuns.Load())
	}
}

func TestEventLoopConnectionsCarryOverRuns(t *testing.T) {
	srv := startServer(t, nil, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}})
	pre, _, err := e.Preflight(t.Context(), time.Now()) // the net.Conn path, with a reader
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{pre.Src: true}
	for run := range 4 {
		sends := steady(4, 0, 5*ms)
		if run == 3 {
			sends = append(batch(3, 1), sends...) // a race in the same run
		}
		results := mustRun(t, e, sends)
		if got := outcomes(results); got["response"] != len(sends) {
			t.Errorf("run %d: outcomes %v, want %d responses", run, got, len(sends))
		}
		first := results[0] // the first steady send, or the race member of client 0 (prepared first)
		if !seen[first.Src] {
			t.Errorf("run %d: first send from %s, want a connection of an earlier run (%v)", run, first.Src, seen)
		}
		for _, r := range results {
			seen[r.Src] = true
		}
	}
	if e.loopRuns.Load() != 4 {
		t.Errorf("event loop ran %d times, want 4", e.loopRuns.Load())
	}
}

func TestEventLoopFallbackAndRetry(t *testing.T) {
	// Every answer is chunked (the lean parser declines it) and every
	// connection is closed by the server after its second answer, without
	// saying so: fallback readers give connections back, and a request
	// written on a connection the server closed goes again on a new one.
	var mu sync.Mutex
	answered := make(map[net.Conn]int)
	srv := startAnswerServer(t, func(c net.Conn, _ int64) error {
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if answered[c]++; answered[c] == 2 {
			return errors.New("closing")
		}
		return nil
	})
	e := newEngine(t, Options{URLs: []string{srv.url()}})
	results := mustRun(t, e, steady(10, 0, 10*ms))
	if got := outcomes(results); got["response"] != 10 {
		t.Errorf("outcomes %v, want 10 responses", got)
	}
	// Every connection carries two answers, unless a request met one the
	// server had just closed (then it went again on a new connection).
	bySrc := make(map[string]int)
	for _, r := range results {
		bySrc[r.Src]++
	}
	reused := 0
	for _, n := range bySrc {
		if n == 2 {
			reused++
		}
	}
	if reused == 0 || len(bySrc) > 10 {
		t.Errorf("answers per connection %v: want connections given back after a fallback read", bySrc)
	}
}

func TestEventLoopInterruptedRun(t *testing.T) {
	block := make(chan struct{})
	srv := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}, nil)
	defer close(block)
	e := newEngine(t, Options{URLs: []string{srv.URL}, Grace: 100 * ms})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*ms, cancel)
	sends := steady(20, 0, 50*ms) // 1 s of sends; cancelled after about 4
	now := time.Now()
	results, err := e.Run(ctx, now, now, sends, nil)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run error = %v, want ErrInterrupted", err)
	}
	checkOnePerSend(t, results, sends, results[0].Seq)
	got := outcomes(results)
	if got["error:"+record.ErrOther]+got["not-sent:"+NotSentSignal] != len(sends) || got["not-sent:"+NotSentSignal] == 0 {
		t.Errorf("outcomes %v, want abandoned errors and not-sent (signal) only", got)
	}
}

func TestEventLoopReleasesRaces(t *testing.T) {
	for _, mode := range []string{RaceBarrier, RaceLastByte} {
		srv := startServer(t, nil, nil)
		e := newEngine(t, Options{URLs: []string{srv.URL}, RaceMode: mode, RaceHold: 50 * ms, ClientHeader: "X-Key"})
		sends := append(batch(20, 1), batch(20, 2)...)
		for i := 20; i < 40; i++ {
			sends[i].At = 200 * ms
		}
		results := mustRun(t, e, sends)
		for i, r := range results {
			if r.Status != 200 || r.Sent == 0 || r.Wrote == 0 || r.TTFB < r.Wrote || (mode == RaceLastByte) != (r.Sent < r.Wrote) {
				t.Errorf("%s: results[%d] = %s %d %q sent %d wrote %d ttfb %d", mode, i, r.Outcome, r.Status, r.ErrMsg, r.Sent, r.Wrote, r.TTFB)
			}
		}
		// Each member wrote its final byte only once every member was ready.
		for _, b := range [][]record.Result{results[:20], results[20:]} {
			var lastSent, firstWrote int64
			for k, r := range b {
				if k == 0 || r.Sent > lastSent {
					lastSent = r.Sent
				}
				if k == 0 || r.Wrote < firstWrote {
					firstWrote = r.Wrote
				}
			}
			if mode == RaceLastByte && firstWrote < lastSent {
				t.Errorf("%s: a final byte went out (%d) before every member held its request (%d)", mode, firstWrote, lastSent)
			}
		}
		if got := srv.newConn.Load(); got != 20 {
			t.Errorf("%s: server accepted %d connections, want 20 (the second race reuses the first's)", mode, got)
		}
		if e.loopRuns.Load() != 1 {
			t.Errorf("%s: event loop ran %d times, want 1", mode, e.loopRuns.Load())
		}
	}
}

func TestEventLoopCallsOffARace(t *testing.T) {
	srv := startServer(t, nil, nil)
	e := newEngine(t, Options{URLs: []string{srv.URL}, RaceMode: RaceLastByte, RaceHold: 300 * ms})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*ms, cancel) // while the members hold their requests
	sends := batch(5, 1)
	now := time.Now()
	results, err := e.Run(ctx, now, now.Add(300*ms), sends, nil)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run error = %v, want ErrInterrupted", err)
	}
	checkOnePerSend(t, results, sends, 0)
	if got := outcomes(results); got["not-sent:"+NotSentSignal] != 5 {
		t.Errorf("outcomes %v, want 5 not-sent (signal)", got)
	}
	if _, protos := srv.seen(); len(protos) != 0 {
		t.Errorf("server answered %d requests, want none (the final bytes never went out)", len(protos))
	}
}

func TestEventLoopFailedDialsLeaveNoSendWaiting(t *testing.T) {
	// The server answers one request, closing its connection, and stops
	// listening: the sends waiting for a connection (one at a time may be
	// dialled) each get their refusal; none waits forever.
	var srv *answerServer
	srv = startAnswerServer(t, func(c net.Conn, _ int64) error {
		_ = srv.ln.Close()
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		return errors.New("closing")
	})
	e := newEngine(t, Options{URLs: []string{srv.url()}, AbortAfterErrors: -1})
	e.maxConns = 1
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sends := steady(5, 0, 2*ms)
	now := time.Now()
	results, err := e.Run(ctx, now, now.Add(20*ms), sends, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := outcomes(results); got["response"] != 1 || got["error:"+record.ErrRefused] != 4 {
		t.Errorf("outcomes %v, want 1 response and 4 refused", got)
	}
}
