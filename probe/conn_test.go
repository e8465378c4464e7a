package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Send.Conn on both send paths: the event loop (loopback, default
// dialer), the net.Conn path over loopback (noLoop) and the net.Conn path
// over in-memory connections in a synctest bubble. Each test asserts which
// connection (the result's src) carried each request, never durations.

// addrConn is a connection with a local address of its own: net.Pipe's
// ends all call themselves "pipe", and Send.Conn's tests tell connections
// apart by the result's src.
type addrConn struct {
	net.Conn
	local net.Addr
}

func (c *addrConn) LocalAddr() net.Addr { return c.local }

// addrDial wraps n.Dial so that the k-th connection's local address is
// 10.0.0.1:(40000+k).
func addrDial(n *pipeNet) DialFunc {
	var mu sync.Mutex
	k := 0
	return func(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error) {
		c, err := n.Dial(ctx, network, addr, src)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		k++
		port := 40000 + k
		mu.Unlock()
		return &addrConn{Conn: c, local: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: port}}, nil
	}
}

// connPath runs sends on one of the engine's send paths against handler
// h, with Run or (stream) Stream, and returns the results in schedule
// order.
type connPath struct {
	name string
	run  func(t *testing.T, h http.HandlerFunc, opt Options, sends []Send, stream bool) []record.Result
}

// connPaths are the three ways a schedule reaches a target.
var connPaths = []connPath{
	{"event loop", func(t *testing.T, h http.HandlerFunc, opt Options, sends []Send, stream bool) []record.Result {
		return runLoopback(t, h, opt, sends, stream, false)
	}},
	{"net.Conn loopback", func(t *testing.T, h http.HandlerFunc, opt Options, sends []Send, stream bool) []record.Result {
		return runLoopback(t, h, opt, sends, stream, true)
	}},
	{"net.Conn in memory", func(t *testing.T, h http.HandlerFunc, opt Options, sends []Send, stream bool) []record.Result {
		var results []record.Result
		inBubble(t, func(t *testing.T) {
			n := newPipeNet(h)
			e := newTestEngine(t, n, opt)
			e.dial = addrDial(n)
			results = runOn(t, e, sends, stream, time.Now().Add(10*ms))
		})
		return results
	}},
}

// runLoopback runs sends against a loopback server answering with h, on
// the event loop or (noLoop) the net.Conn path.
func runLoopback(t *testing.T, h http.HandlerFunc, opt Options, sends []Send, stream, noLoop bool) []record.Result {
	t.Helper()
	srv := startServer(t, h, nil)
	opt.URLs = []string{srv.URL}
	e := newEngine(t, opt)
	e.noLoop = noLoop
	results := runOn(t, e, sends, stream, time.Now().Add(50*ms))
	if loop := e.loopRuns.Load() > 0; loop != (!noLoop && runtime.GOOS == "linux") {
		t.Errorf("noLoop=%v: the event loop ran: %v", noLoop, loop)
	}
	return results
}

// runOn runs sends on e from begin with Run or Stream, expecting no
// error, and returns the results in schedule order.
func runOn(t *testing.T, e *Engine, sends []Send, stream bool, begin time.Time) []record.Result {
	t.Helper()
	zero := time.Now()
	if !stream {
		results, err := e.Run(t.Context(), zero, begin, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		return results
	}
	sink := &memSink{}
	if _, err := e.Stream(t.Context(), zero, begin, seqOf(sends), sink); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	results := sink.sorted()
	if len(results) != len(sends) {
		t.Fatalf("Stream: %d results for %d sends", len(results), len(sends))
	}
	return results
}

// connKey is a send's (client, Conn).
type connKey struct{ client, conn int }

// srcsByConn returns the srcs that carried the sends of each (client,
// Conn), in schedule order, failing on any send not answered.
func srcsByConn(t *testing.T, sends []Send, results []record.Result) map[connKey][]string {
	t.Helper()
	by := make(map[connKey][]string)
	for i, r := range results {
		if r.Outcome != record.OutcomeResponse || r.Src == "" {
			t.Errorf("send %d (client %d, conn %d): %s %s %q, src %q; want a response", i, sends[i].Client, sends[i].Conn, r.Outcome, r.Err, r.ErrMsg, r.Src)
		}
		k := connKey{sends[i].Client, sends[i].Conn}
		by[k] = append(by[k], r.Src)
	}
	return by
}

// mixedConns is a schedule of two clients, each sending on its shared
// connections (Conn 0) and on dedicated connections 1 and 2, a send every
// 5 ms in turn: with 40 ms answers, sends on one Conn overlap (every 30
// ms), so the shared pools need several connections and a dedicated
// Conn's sends wait for theirs.
func mixedConns() []Send {
	var sends []Send
	for k := range 24 {
		sends = append(sends, Send{At: time.Duration(k) * 5 * ms, Client: k % 2, Conn: k / 2 % 3, Phase: "mixed"})
	}
	return sends
}

func TestConnChoosesTheClientsConnection(t *testing.T) {
	slow := func(http.ResponseWriter, *http.Request) { time.Sleep(40 * ms) }
	for _, path := range connPaths {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", path.name, stream), func(t *testing.T) {
				sends := mixedConns()
				results := path.run(t, slow, Options{}, sends, stream)
				by := srcsByConn(t, sends, results)
				owner := make(map[string]connKey) // dedicated src → its (client, Conn)
				for k, srcs := range by {
					if k.conn == 0 {
						continue
					}
					if len(slices.Compact(slices.Clone(srcs))) != 1 {
						t.Errorf("client %d conn %d: sent from %v, want one connection", k.client, k.conn, srcs)
					}
					if o, ok := owner[srcs[0]]; ok {
						t.Errorf("client %d conn %d and client %d conn %d share connection %s", k.client, k.conn, o.client, o.conn, srcs[0])
					}
					owner[srcs[0]] = k
				}
				if len(owner) != 4 {
					t.Errorf("%d dedicated connections, want 4 (two clients × conns 1 and 2)", len(owner))
				}
				shared := make(map[string]bool)
				for _, c := range []int{0, 1} {
					for _, src := range by[connKey{c, 0}] {
						shared[src] = true
						if o, ok := owner[src]; ok {
							t.Errorf("client %d's conn-0 send went on client %d's conn %d (%s)", c, o.client, o.conn, src)
						}
					}
				}
				if len(shared) < 2 {
					t.Errorf("conn-0 sends used %d connections, want at least 2 (two clients)", len(shared))
				}
			})
		}
	}
}

func TestConnReopensWhenTheServerClosedIt(t *testing.T) {
	spaced := []Send{{At: 0, Conn: 1}, {At: 30 * ms, Conn: 1}, {At: 60 * ms, Conn: 1}, {At: 90 * ms, Conn: 2}}
	tests := []struct {
		name   string
		header string // set on every answer
		paths  []connPath
		sends  []Send
	}{
		// The server says so: Connection: close.
		{"connection close", "Connection", connPaths, spaced},
		// The server closes it after answering, without saying so (an idle
		// timeout): the engine finds it closed before the next send.
		{"silent close", closeAfterHeader, connPaths[2:], spaced},
		// A send waiting for its busy conn gets the one dialled anew.
		{"waiting send", "Connection", connPaths, []Send{{At: 0, Conn: 1}, {At: 0, Conn: 1}, {At: 0, Conn: 1}}},
	}
	for _, tt := range tests {
		for _, path := range tt.paths {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", tt.name, path.name, stream), func(t *testing.T) {
					h := func(w http.ResponseWriter, _ *http.Request) { w.Header().Set(tt.header, "close") }
					sends := tt.sends
					results := path.run(t, h, Options{}, sends, stream)
					by := srcsByConn(t, sends, results)
					srcs := append(by[connKey{0, 1}], by[connKey{0, 2}]...)
					if len(slices.Compact(slices.Sorted(slices.Values(srcs)))) != len(sends) {
						t.Errorf("sent from %v, want a new connection for every send", srcs)
					}
				})
			}
		}
	}
}

func TestConnSendsGoOneAfterAnother(t *testing.T) {
	slow := func(http.ResponseWriter, *http.Request) { time.Sleep(40 * ms) }
	for _, path := range connPaths {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", path.name, stream), func(t *testing.T) {
				// Two sends on conn 1 due at one instant, and two on conn 0
				// (which takes a connection each) as a control.
				sends := []Send{{At: 0, Conn: 1}, {At: 0, Conn: 1}, {At: 0}, {At: 0}}
				results := path.run(t, slow, Options{}, sends, stream)
				by := srcsByConn(t, sends, results)
				if srcs := by[connKey{0, 1}]; srcs[0] != srcs[1] {
					t.Errorf("conn 1 sent from %v, want one connection", srcs)
				}
				if srcs := by[connKey{0, 0}]; srcs[0] == srcs[1] {
					t.Errorf("conn 0 sent both from %s, want a connection each", srcs[0])
				}
				first, second := results[0], results[1]
				if second.Sent < first.Sent {
					first, second = second, first
				}
				if second.Sent < first.Done {
					t.Errorf("conn 1: second sent at %d, before the first was done (%d): pipelined", second.Sent, first.Done)
				}
				// It waited for the first answer (40 ms): late by far more
				// than the threshold on any machine. In fake time nothing
				// else is late; on loopback a loaded machine may make
				// others late too.
				late := Summarize(results).Late
				if second.Sent-second.Sched < int64(20*ms) || late < 1 || (path.name == "net.Conn in memory" && late != 1) {
					t.Errorf("late = %d, second send %d ns after its deadline; want the second late (alone, in fake time)", late, second.Sent-second.Sched)
				}
			})
		}
	}
}

func TestConnRefusesInvalidSchedules(t *testing.T) {
	tests := []struct {
		name  string
		opt   Options
		sends []Send
		want  string
	}{
		{"negative conn", Options{}, []Send{{Conn: -1}}, "negative conn"},
		{"two members on one conn", Options{}, []Send{{Batch: 1, Conn: 1}, {Batch: 1, Conn: 1}}, "two members on client 0's conn 1"},
		{"single-packet member with a conn", Options{RaceMode: RaceSinglePacket, H2C: true}, []Send{{Batch: 1}, {Batch: 1, Conn: 2}}, "cannot choose a conn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newPipeNet(okHandler(0))
			e := newTestEngine(t, n, tt.opt)
			_, err := e.Run(t.Context(), time.Now(), time.Now(), tt.sends, nil)
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run error = %v, want a usage error containing %q", err, tt.want)
			}
			if n.dialCount() != 0 {
				t.Errorf("dials = %d, want none", n.dialCount())
			}
		})
	}
	// Members of one batch on distinct conns, or on one conn of distinct
	// clients, are fine.
	n := newPipeNet(okHandler(0))
	e := newTestEngine(t, n, Options{})
	sends := []Send{{Batch: 1, Conn: 1}, {Batch: 1, Conn: 2}, {Batch: 1, Client: 1, Conn: 1}}
	if err := e.checkSends(sends); err != nil {
		t.Errorf("checkSends: %v", err)
	}
}

func TestConnKeptAliveHoweverLongIdle(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{})
		e.dial = addrDial(n)
		// Idle for 10 s, beyond maxIdleAge: the shared pool's connection is
		// no longer trusted, a dedicated one is.
		sends := []Send{{At: 0, Conn: 1}, {At: 0}, {At: 10 * time.Second, Conn: 1}, {At: 10 * time.Second}}
		results := runOn(t, e, sends, false, time.Now())
		by := srcsByConn(t, sends, results)
		if srcs := by[connKey{0, 1}]; srcs[0] != srcs[1] {
			t.Errorf("conn 1 sent from %v, want its connection kept", srcs)
		}
		if srcs := by[connKey{0, 0}]; srcs[0] == srcs[1] {
			t.Errorf("conn 0 sent both from %s, want a new connection after %v idle", srcs[0], maxIdleAge)
		}
	})
}

func TestConnRaceMembersUseTheirConnections(t *testing.T) {
	// 100 ms answers. Client 0's conn 1 is busy (its send at 150 ms) when
	// the batch is prepared at 200 ms (RaceHold before 300 ms): its member
	// waits for it. The other members' conns are idle, or (client 1's conn
	// 2) not open yet; a conn-0 member takes a connection of the shared
	// pool.
	slow := func(http.ResponseWriter, *http.Request) { time.Sleep(100 * ms) }
	sends := []Send{
		{At: 0, Client: 0, Conn: 1}, {At: 0, Client: 0, Conn: 2}, {At: 0, Client: 1, Conn: 1}, {At: 0, Client: 0},
		{At: 150 * ms, Client: 0, Conn: 1},
		{At: 300 * ms, Client: 0, Conn: 1, Batch: 1}, {At: 300 * ms, Client: 0, Conn: 2, Batch: 1},
		{At: 300 * ms, Client: 1, Conn: 1, Batch: 1}, {At: 300 * ms, Client: 1, Conn: 2, Batch: 1},
		{At: 300 * ms, Client: 0, Batch: 1},
		{At: 500 * ms, Client: 0, Conn: 1}, {At: 500 * ms, Client: 1, Conn: 2},
	}
	for _, path := range connPaths {
		for _, mode := range []string{RaceBarrier, RaceLastByte} {
			t.Run(path.name+"/"+mode, func(t *testing.T) {
				results := path.run(t, slow, Options{RaceMode: mode}, sends, false)
				by := srcsByConn(t, sends, results)
				owner := make(map[string]connKey)
				for k, srcs := range by {
					if k.conn == 0 {
						continue
					}
					if len(slices.Compact(slices.Clone(srcs))) != 1 {
						t.Errorf("client %d conn %d: sent from %v, want one connection", k.client, k.conn, srcs)
					}
					if o, ok := owner[srcs[0]]; ok {
						t.Errorf("client %d conn %d and client %d conn %d share connection %s", k.client, k.conn, o.client, o.conn, srcs[0])
					}
					owner[srcs[0]] = k
				}
				if o, ok := owner[results[9].Src]; ok {
					t.Errorf("the conn-0 member went on client %d's conn %d", o.client, o.conn)
				}
				// The members went out together, after the busy conn's send.
				if m, busy := results[5], results[4]; m.Wrote < busy.Done {
					t.Errorf("client 0 conn 1's member wrote at %d, before the send it waited for was done (%d)", m.Wrote, busy.Done)
				}
			})
		}
	}
}

func TestConnRaceMemberWaitingForItsConnIsCalledOff(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(time.Second))
		e := newTestEngine(t, n, Options{})
		e.dial = addrDial(n)
		// Conn 1 is busy until 1 s; the batch is prepared at 200 ms and the
		// run interrupted at 250 ms, while its member waits for conn 1.
		sends := []Send{{At: 0, Conn: 1}, {At: 300 * ms, Conn: 1, Batch: 1}, {At: 300 * ms, Conn: 2, Batch: 1}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(250*ms, cancel)
		zero := time.Now()
		results, err := e.Run(ctx, zero, zero, sends, nil)
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("Run: %v, want ErrInterrupted", err)
		}
		want := []record.Outcome{record.OutcomeResponse, record.OutcomeNotSent, record.OutcomeNotSent}
		for i, r := range results {
			if r.Outcome != want[i] {
				t.Errorf("results[%d] = %s %s, want %s", i, r.Outcome, r.Err, want[i])
			}
		}
	})
}

func TestConnRaceMemberCalledOffOnLoopback(t *testing.T) {
	for _, noLoop := range []bool{false, true} {
		srv := startServer(t, func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }, nil)
		e := newEngine(t, Options{URLs: []string{srv.URL}})
		e.noLoop = noLoop
		sends := []Send{{At: 0, Conn: 1}, {At: 300 * ms, Conn: 1, Batch: 1}, {At: 300 * ms, Conn: 2, Batch: 1}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(250*ms, cancel)
		zero := time.Now()
		results, err := e.Run(ctx, zero, zero, sends, nil)
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("noLoop=%v: Run: %v, want ErrInterrupted", noLoop, err)
		}
		want := []record.Outcome{record.OutcomeResponse, record.OutcomeNotSent, record.OutcomeNotSent}
		for i, r := range results {
			if r.Outcome != want[i] {
				t.Errorf("noLoop=%v: results[%d] = %s %s, want %s", noLoop, i, r.Outcome, r.Err, want[i])
			}
		}
	}
}

func TestConnOverHTTP2IsAConnectionOfItsOwn(t *testing.T) {
	srv := startServer(t, func(http.ResponseWriter, *http.Request) { time.Sleep(40 * ms) }, func(s *httptest.Server) {
		s.EnableHTTP2 = true
		s.StartTLS()
	})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	e := newEngine(t, Options{URLs: []string{srv.URL}, TLSConfig: &tls.Config{RootCAs: roots}})
	sends := mixedConns()
	results := mustRun(t, e, sends)
	by := srcsByConn(t, sends, results)
	srcs := make(map[string]connKey)
	for k, ss := range by {
		if len(slices.Compact(slices.Clone(ss))) != 1 {
			t.Errorf("client %d conn %d: sent from %v, want one (multiplexed) connection", k.client, k.conn, ss)
		}
		if o, ok := srcs[ss[0]]; ok {
			t.Errorf("client %d conn %d and client %d conn %d share connection %s", k.client, k.conn, o.client, o.conn, ss[0])
		}
		srcs[ss[0]] = k
	}
	if _, protos := srv.seen(); slices.ContainsFunc(protos, func(p string) bool { return p != "HTTP/2.0" }) {
		t.Errorf("server saw %v, want HTTP/2.0 only", protos)
	}
	if got := srv.newConn.Load(); got != 6 {
		t.Errorf("server accepted %d connections, want 6 (two clients × conns 0, 1 and 2)", got)
	}
}

func TestStreamRefusesANegativeConn(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		e := newTestEngine(t, newPipeNet(okHandler(0)), Options{})
		sink := &memSink{}
		zero := time.Now()
		c, err := e.Stream(t.Context(), zero, zero, seqOf([]Send{{At: 0}, {At: ms, Conn: -1}, {At: 2 * ms}}), sink)
		if !errors.Is(err, ErrUsage) || !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "negative conn") {
			t.Errorf("Stream error = %v, want an abort matching ErrUsage about the negative conn", err)
		}
		if c.Results != 3 || c.NotSent < 2 {
			t.Errorf("counts %+v, want 3 results, the last 2 (at least) not sent", c)
		}
	})
}
