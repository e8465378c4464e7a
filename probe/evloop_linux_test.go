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
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
			sends = append(batch(3, 1), sends...) // races keep their own path
		}
		results := mustRun(t, e, sends)
		if got := outcomes(results); got["response"] != len(sends) {
			t.Errorf("run %d: outcomes %v, want %d responses", run, got, len(sends))
		}
		first := results[len(results)-4] // the first steady send
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
