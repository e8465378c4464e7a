package probe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// seqOf returns an iterator over sends.
func seqOf(sends []Send) func(func(Send) bool) {
	return func(yield func(Send) bool) {
		for _, s := range sends {
			if !yield(s) {
				return
			}
		}
	}
}

// sorted returns the sink's results in Seq order.
func (s *memSink) sorted() []record.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.results)
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// TestStreamMatchesRun checks that Stream sends, times and records a
// schedule as Run does, stopped or not, while keeping no result itself.
func TestStreamMatchesRun(t *testing.T) {
	tests := []struct {
		name     string
		sends    []Send
		cancelAt time.Duration // 0: never
		want     map[string]int
		wantErr  error
	}{
		{name: "steady", sends: steady(10, 0, 100*ms), want: map[string]int{"response": 10}},
		{name: "two clients", sends: []Send{{At: 0}, {At: 0, Client: 1}, {At: 50 * ms}, {At: 50 * ms, Client: 1}},
			want: map[string]int{"response": 4}},
		{name: "interrupted", sends: steady(10, 0, 100*ms), cancelAt: 450 * ms,
			want: map[string]int{"response": 5, "not-sent:signal": 5}, wantErr: ErrInterrupted},
		{name: "many chunks", sends: steady(3*chunkSize+7, 0, ms/10), want: map[string]int{"response": 3*chunkSize + 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				run := func(stream bool) ([]record.Result, StreamCounts, error) {
					n := newPipeNet(okHandler(10 * ms))
					e := newTestEngine(t, n, Options{Agent: "a1", MaxRate: 1e6})
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					if tt.cancelAt > 0 {
						time.AfterFunc(tt.cancelAt, cancel)
					}
					zero := time.Now()
					sink := &memSink{}
					if !stream {
						_, err := e.Run(ctx, zero, zero, tt.sends, sink)
						return sink.sorted(), StreamCounts{}, err
					}
					c, err := e.Stream(ctx, zero, zero, seqOf(tt.sends), sink)
					return sink.sorted(), c, err
				}
				want, _, werr := run(false)
				got, counts, err := run(true)
				if !errors.Is(err, tt.wantErr) || !errors.Is(werr, tt.wantErr) {
					t.Fatalf("Stream error = %v, Run error = %v, want %v", err, werr, tt.wantErr)
				}
				checkOnePerSend(t, got, tt.sends, 0)
				if o := outcomes(got); !mapsEqual(o, tt.want) {
					t.Errorf("outcomes = %v, want %v", o, tt.want)
				}
				if !reflect.DeepEqual(got, want) {
					for i := range got {
						if !reflect.DeepEqual(got[i], want[i]) {
							t.Errorf("result %d: Stream %+v\nRun    %+v", i, got[i], want[i])
							break
						}
					}
				}
				if counts.Results != int64(len(tt.sends)) || counts.Responses != int64(tt.want["response"]) ||
					counts.NotSent != int64(len(tt.sends)-tt.want["response"]) {
					t.Errorf("counts = %+v, want %d results, %d responses", counts, len(tt.sends), tt.want["response"])
				}
			})
		})
	}
}

// TestStreamRefusesBadSends checks that a batch member or an invalid send
// aborts a Stream with a usage error, every send still recorded.
func TestStreamRefusesBadSends(t *testing.T) {
	tests := []struct {
		name string
		bad  Send
	}{
		{"batch", Send{At: 1500 * ms, Batch: 1}},
		{"negative client", Send{At: 1500 * ms, Client: -1}},
		{"negative offset", Send{At: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				e := newTestEngine(t, newPipeNet(okHandler(0)), Options{})
				// The bad send comes after the pre-dial look-ahead (the
				// first second): the sends before it go out.
				sends := append(steady(2, 0, 100*ms), steady(2, 1200*ms, 100*ms)...)
				sends = append(sends, tt.bad)
				sends = append(sends, steady(3, 1600*ms, 100*ms)...)
				sink := &memSink{}
				zero := time.Now()
				c, err := e.Stream(t.Context(), zero, zero, seqOf(sends), sink)
				if !errors.Is(err, ErrUsage) || !errors.Is(err, ErrAborted) {
					t.Fatalf("Stream error = %v, want ErrUsage and ErrAborted", err)
				}
				got := sink.sorted()
				checkOnePerSend(t, got, sends, 0)
				if c.Results != int64(len(sends)) || c.NotSent != 4 {
					t.Errorf("counts = %+v, want %d results, the bad send and the 3 after it not sent", c, len(sends))
				}
			})
		})
	}
}

// TestStreamSeqContinues checks that a Stream's Seqs follow a Run's and
// precede the next Run's.
func TestStreamSeqContinues(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		e := newTestEngine(t, newPipeNet(okHandler(0)), Options{})
		sink := &memSink{}
		now := time.Now()
		if _, err := e.Run(t.Context(), now, now, steady(2, 0, ms), sink); err != nil {
			t.Fatal(err)
		}
		now = time.Now()
		if _, err := e.Stream(t.Context(), now, now, seqOf(steady(3, 0, ms)), sink); err != nil {
			t.Fatal(err)
		}
		now = time.Now()
		if _, err := e.Run(t.Context(), now, now, steady(1, 0, ms), sink); err != nil {
			t.Fatal(err)
		}
		if got, want := sink.seqs(), []int64{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
			t.Errorf("seqs = %v, want %v", got, want)
		}
	})
}

// instantConn is an in-memory HTTP/1.1 server connection that answers
// every request written to it (each Write is one whole request) at once
// with a 200.
type instantConn struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pending  int // answers not read yet
	partial  int // bytes of the current answer already read
	closed   bool
	deadline time.Time
}

const instantAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func newInstantConn() *instantConn {
	c := &instantConn{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *instantConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.pending++
	c.cond.Signal()
	return len(b), nil
}

func (c *instantConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending == 0 && !c.closed && !c.expired() {
		c.cond.Wait()
	}
	switch {
	case c.closed:
		return 0, io.EOF
	case c.pending == 0:
		return 0, os.ErrDeadlineExceeded
	}
	n := 0
	for c.pending > 0 && n < len(b) {
		k := copy(b[n:], instantAnswer[c.partial:])
		n += k
		c.partial += k
		if c.partial == len(instantAnswer) {
			c.partial = 0
			c.pending--
		}
	}
	return n, nil
}

// expired reports whether the deadline has passed; a deadline in the
// future is not watched (the engine sets one per request, and the answer
// is immediate), only one already past (an abandoned read).
func (c *instantConn) expired() bool {
	return !c.deadline.IsZero() && time.Now().After(c.deadline)
}

func (c *instantConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.cond.Broadcast()
	return nil
}

func (c *instantConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	c.cond.Broadcast()
	return nil
}
func (c *instantConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *instantConn) SetWriteDeadline(t time.Time) error { return nil }
func (c *instantConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (c *instantConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
}

// countSink counts results by outcome and keeps nothing.
type countSink struct{ n, responses, late atomic.Int64 }

func (s *countSink) WriteResult(r record.Result) error {
	s.n.Add(1)
	if r.Outcome == record.OutcomeResponse {
		s.responses.Add(1)
	}
	if r.Sent-r.Sched > int64(LateThreshold) {
		s.late.Add(1)
	}
	return nil
}

// heapSampler samples the bytes of live heap objects (runtime/metrics)
// every interval and keeps the peak.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap(interval time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(h.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// end stops sampling and returns the peak in bytes.
func (h *heapSampler) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

// TestStreamHeapIsBounded drives a long streamed schedule through the
// scheduling loop over in-memory connections that answer at once, into a
// sink that only counts, and checks that the peak heap stays under 50 MB:
// the engine holds the sends in flight, not the schedule. 1 M sends by
// default (at 200k/s), 10 M with RLPROBE_SOAK=1.
func TestStreamHeapIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("long: skipped with -short")
	}
	n := 1_000_000
	if os.Getenv("RLPROBE_SOAK") == "1" {
		n = 10_000_000
	}
	const rate = 200_000.0 // sends per second
	const limit = 50 << 20
	e, err := New(Options{
		URLs:    []string{"http://a.test/"},
		MaxRate: 2 * rate,
		Dial: func(context.Context, string, string, netip.Addr) (net.Conn, error) {
			return newInstantConn(), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sends := func(yield func(Send) bool) {
		for i := range n {
			if !yield(Send{At: time.Duration(float64(i) * float64(time.Second) / rate), Phase: "steady"}) {
				return
			}
		}
	}
	runtime.GC()
	h := sampleHeap(5 * time.Millisecond)
	sink := &countSink{}
	start := time.Now()
	zero := time.Now()
	c, err := e.Stream(t.Context(), zero, zero.Add(50*ms), sends, sink)
	took := time.Since(start)
	peak := h.end()
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	t.Logf("%d sends in %v: %d responses, %d late; peak heap %.1f MB", n, took.Round(time.Millisecond),
		sink.responses.Load(), sink.late.Load(), float64(peak)/(1<<20))
	if c.Results != int64(n) || sink.n.Load() != int64(n) || c.Responses != int64(n) {
		t.Errorf("counts %+v, sink %d; want %d responses", c, sink.n.Load(), n)
	}
	if peak >= limit {
		t.Errorf("peak heap %.1f MB, want under %d MB", float64(peak)/(1<<20), limit>>20)
	}
}

// TestStreamOnBothSendPaths streams a schedule over real loopback sockets
// on the event loop (Linux) and on the net.Conn path, offering more than
// the server answers on the connections allowed (4 × 1/2ms = 2000/s of
// 10000/s): every send answered late, each result once, and never more
// than 4 connections.
func TestStreamOnBothSendPaths(t *testing.T) {
	for _, noLoop := range []bool{false, true} {
		srv := startServer(t, func(http.ResponseWriter, *http.Request) { time.Sleep(2 * ms) }, nil)
		e := newEngine(t, Options{URLs: []string{srv.URL}, MaxRate: 1e5, Connections: 4})
		e.noLoop = noLoop
		sends := steady(3000, 0, 100*time.Microsecond) // 10000/s
		sink := &memSink{}
		now := time.Now()
		c, err := e.Stream(t.Context(), now, now.Add(20*ms), seqOf(sends), sink)
		if err != nil {
			t.Fatalf("noLoop=%v: Stream: %v", noLoop, err)
		}
		if want := int64(0); !noLoop && runtime.GOOS == "linux" && e.loopRuns.Load() == want {
			t.Errorf("the event loop did not run the stream")
		}
		results := sink.sorted()
		checkOnePerSend(t, results, sends, results[0].Seq)
		if got := outcomes(results); got["response"] != len(sends) || c.Responses != int64(len(sends)) {
			t.Errorf("noLoop=%v: outcomes %v, counts %+v, want %d responses", noLoop, got, c, len(sends))
		}
		late := 0
		for i, r := range results {
			if r.Status != 200 || r.Sent == 0 || r.Sched != now.Add(20*ms+sends[i].At).Sub(now).Nanoseconds() {
				t.Fatalf("noLoop=%v: results[%d] = %+v", noLoop, i, r)
			}
			if r.Sent-r.Sched > int64(LateThreshold) {
				late++
			}
		}
		if n := srv.newConn.Load(); n > 4 || late < len(sends)/2 {
			t.Errorf("noLoop=%v: %d connections, %d of %d late; want at most 4 and most late", noLoop, n, late, len(sends))
		}
	}
}

// TestStreamBoundsSendsInFlight checks that a Stream offered more than
// the target answers keeps at most its bound of sends in flight: the
// rest wait, go out late and are answered, every one recorded.
func TestStreamBoundsSendsInFlight(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		var mu sync.Mutex
		cur, peak := 0, 0
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			cur++
			peak = max(peak, cur)
			mu.Unlock()
			time.Sleep(100 * ms)
			mu.Lock()
			cur--
			mu.Unlock()
		})
		e := newTestEngine(t, newPipeNet(h), Options{MaxRate: 1e6, Connections: 100})
		e.maxInFlight = 8
		sends := steady(40, 0, ms)
		sink := &memSink{}
		zero := time.Now()
		c, err := e.Stream(t.Context(), zero, zero, seqOf(sends), sink)
		if err != nil {
			t.Fatal(err)
		}
		got := sink.sorted()
		checkOnePerSend(t, got, sends, 0)
		if c.Responses != 40 || peak != 8 {
			t.Errorf("%d responses, %d at once at the server; want 40, at most 8", c.Responses, peak)
		}
		for i, r := range got {
			if want := int64(i/8) * int64(100*ms); i >= 8 && r.Sent < want {
				t.Errorf("result %d sent at %v, before %v: more than 8 in flight", i, time.Duration(r.Sent), time.Duration(want))
			}
		}
	})
}
