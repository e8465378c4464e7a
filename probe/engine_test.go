package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

const ms = time.Millisecond

// The tests in this file run inside synctest bubbles over pipeNet: time is
// fake and only advances when every goroutine is blocked, so a send due at
// t is stamped exactly t and a 30 ms handler answers exactly 30 ms later.

func TestRunSteadySendsAtDeadlines(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(30 * ms))
		e := newTestEngine(t, n, Options{Agent: "a1"})
		zero := time.Now()
		begin := zero.Add(50 * ms)
		sends := steady(10, 0, 100*ms)
		sink := &memSink{}
		results, err := e.Run(t.Context(), zero, begin, sends, sink)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkOnePerSend(t, results, sends, 0)
		for i, r := range results {
			sched := int64(50*ms + time.Duration(i)*100*ms)
			if r.Sched != sched || r.Sent != sched || r.Wrote != sched {
				t.Errorf("results[%d]: sched %d sent %d wrote %d, want all %d", i, r.Sched, r.Sent, r.Wrote, sched)
			}
			if r.TTFB != sched+int64(30*ms) || r.Done != sched+int64(30*ms) {
				t.Errorf("results[%d]: ttfb %d done %d, want %d", i, r.TTFB, r.Done, sched+int64(30*ms))
			}
			if r.Outcome != record.OutcomeResponse || r.Status != 200 {
				t.Errorf("results[%d] = %s %d, want response 200", i, r.Outcome, r.Status)
			}
			if r.Agent != "a1" || r.Phase != "steady" || r.Method != "GET" || r.URL != "http://a.test/" || r.Client != "0" {
				t.Errorf("results[%d] identity = %+v", i, r)
			}
		}
		if got := n.dialCount(); got != 1 {
			t.Errorf("dials = %d, want 1 (one keep-alive connection suffices)", got)
		}
		if got, want := sink.seqs(), []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
			t.Errorf("sink seqs = %v, want %v", got, want)
		}
	})
}

func TestRunOpenLoopWhateverTheLatency(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// 250 ms answers, one send every 100 ms: up to three in flight.
		n := newPipeNet(okHandler(250 * ms))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sends := steady(10, 0, 100*ms)
		results, err := e.Run(t.Context(), zero, zero.Add(ms), sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, r := range results {
			if r.Sent-r.Sched > 0 {
				t.Errorf("results[%d] sent %v late; an open-loop send never waits for an answer", i, time.Duration(r.Sent-r.Sched))
			}
			if r.Status != 200 {
				t.Errorf("results[%d].Status = %d", i, r.Status)
			}
		}
		if got := n.dialCount(); got != 3 {
			t.Errorf("dials = %d, want 3 (the most requests in flight)", got)
		}
		if s := Summarize(results); s.Late != 0 {
			t.Errorf("Summarize.Late = %d, want 0", s.Late)
		}
	})
}

func TestRunMaxRateGuardDelaysAndCountsLate(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{MaxRate: 10})
		zero := time.Now()
		sends := steady(15, 0, 0) // 15 at once; the guard passes 10, then 10/s
		results, err := e.Run(t.Context(), zero, zero.Add(ms), sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, r := range results {
			want := int64(0)
			if i >= 10 {
				want = int64(time.Duration(i-9) * 100 * ms)
			}
			if r.Sent-r.Sched != want {
				t.Errorf("results[%d] sent−sched = %v, want %v", i, time.Duration(r.Sent-r.Sched), time.Duration(want))
			}
		}
		s := Summarize(results)
		if s.Late != 5 {
			t.Errorf("Summarize.Late = %d, want 5", s.Late)
		}
		if s.Pacing.MaxUS < 499_000 || s.Pacing.MaxUS > 501_000 {
			t.Errorf("Summarize.Pacing.MaxUS = %d, want 500000 (3 significant digits)", s.Pacing.MaxUS)
		}
	})
}

func TestRunStopsOnCancel(t *testing.T) {
	tests := []struct {
		name      string
		handler   time.Duration // answer delay
		grace     time.Duration
		cancelAt  time.Duration
		deadline  bool // cancel by the context's deadline instead
		want      map[string]int
		wantErr   error
		abandoned int64 // Done of abandoned requests
	}{
		{
			name: "not-sent after the signal", handler: 0, cancelAt: 450 * ms,
			want:    map[string]int{"response": 5, "not-sent:signal": 5},
			wantErr: ErrInterrupted,
		},
		{
			name: "in flight answered within the grace period", handler: time.Second, grace: 2 * time.Second, cancelAt: 150 * ms,
			want:    map[string]int{"response": 2, "not-sent:signal": 8},
			wantErr: ErrInterrupted,
		},
		{
			name: "in flight abandoned after the grace period", handler: 5 * time.Second, grace: time.Second, cancelAt: 150 * ms,
			want:      map[string]int{"error:other": 2, "not-sent:signal": 8},
			wantErr:   ErrInterrupted,
			abandoned: int64(1150 * ms),
		},
		{
			name: "budget spent", handler: 0, cancelAt: 450 * ms, deadline: true,
			want:    map[string]int{"response": 5, "not-sent:cap": 5},
			wantErr: ErrBudget,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				n := newPipeNet(okHandler(tt.handler))
				e := newTestEngine(t, n, Options{Grace: tt.grace})
				var ctx context.Context
				var cancel context.CancelFunc
				if tt.deadline {
					ctx, cancel = context.WithTimeout(t.Context(), tt.cancelAt)
				} else {
					ctx, cancel = context.WithCancel(t.Context())
					time.AfterFunc(tt.cancelAt, cancel)
				}
				defer cancel()
				zero := time.Now()
				sends := steady(10, 0, 100*ms)
				sink := &memSink{}
				results, err := e.Run(ctx, zero, zero, sends, sink)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
				}
				checkOnePerSend(t, results, sends, 0)
				if got := outcomes(results); !mapsEqual(got, tt.want) {
					t.Errorf("outcomes = %v, want %v", got, tt.want)
				}
				if len(sink.results) != len(sends) {
					t.Errorf("sink got %d results, want %d", len(sink.results), len(sends))
				}
				for i, r := range results {
					if r.Outcome == record.OutcomeNotSent && (r.Sent != 0 || r.Done != 0) {
						t.Errorf("results[%d] not-sent with times %+v", i, r)
					}
					if r.Outcome == record.OutcomeError {
						if r.Done != tt.abandoned || !strings.Contains(r.ErrMsg, "abandoned") {
							t.Errorf("results[%d] = done %d %q, want abandoned at %d", i, r.Done, r.ErrMsg, tt.abandoned)
						}
					}
				}
				time.Sleep(tt.handler) // let the abandoned handlers end

			})
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
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

// dropEvery returns a handler that drops the connection of request k
// (from 1) when drop(k), and answers 200 otherwise, closing the connection
// (so that no request meets a dropped keep-alive connection and retries).
func dropEvery(drop func(k int) bool) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drop(int(n.Add(1))) {
			w.Header().Set(dropHeader, "1")
			return
		}
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, "ok")
	})
}

func TestRunAbortsAfterConsecutiveErrors(t *testing.T) {
	tests := []struct {
		name    string
		drop    func(k int) bool
		limit   int
		want    map[string]int
		aborted bool
	}{
		{"every request fails", func(int) bool { return true }, 3,
			map[string]int{"error:reset": 3, "not-sent:abort": 7}, true},
		{"a success resets the count", func(k int) bool { return k%3 != 0 }, 3,
			map[string]int{"error:reset": 7, "response": 3}, false},
		{"negative never aborts", func(int) bool { return true }, -1,
			map[string]int{"error:reset": 10}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				n := newPipeNet(dropEvery(tt.drop))
				e := newTestEngine(t, n, Options{AbortAfterErrors: tt.limit})
				zero := time.Now()
				sends := steady(10, 0, 100*ms)
				results, err := e.Run(t.Context(), zero, zero, sends, nil)
				if got := errors.Is(err, ErrAborted); got != tt.aborted {
					t.Fatalf("Run error = %v, aborted = %v, want %v", err, got, tt.aborted)
				}
				checkOnePerSend(t, results, sends, 0)
				if got := outcomes(results); !mapsEqual(got, tt.want) {
					t.Errorf("outcomes = %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// refusedErr is what a dial to a closed port returns.
var refusedErr = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func TestRunAbortsWhenFirstConnectionFails(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		n.fail = func(int) error { return refusedErr }
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sends := steady(5, 0, 100*ms)
		results, err := e.Run(t.Context(), zero, zero, sends, nil)
		if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "first connection failed") {
			t.Fatalf("Run error = %v, want ErrAborted (first connection failed)", err)
		}
		checkOnePerSend(t, results, sends, 0)
		if r := results[0]; r.Outcome != record.OutcomeError || r.Err != record.ErrRefused || r.Sent != 0 {
			t.Errorf("results[0] = %s %s sent %d, want error refused, never sent", r.Outcome, r.Err, r.Sent)
		}
		if got, want := outcomes(results), map[string]int{"error:refused": 1, "not-sent:abort": 4}; !mapsEqual(got, want) {
			t.Errorf("outcomes = %v, want %v", got, want)
		}
		if got := n.dialCount(); got != 1 {
			t.Errorf("dials = %d, want 1", got)
		}
	})
}

func TestRunLaterDialFailuresAreData(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// Slow answers force new connections; all but the first fail.
		n := newPipeNet(okHandler(250 * ms))
		n.fail = func(k int) error {
			if k > 1 {
				return refusedErr
			}
			return nil
		}
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sends := steady(4, 0, 100*ms)
		sends = append(sends, Send{At: 600 * ms})
		results, err := e.Run(t.Context(), zero, zero, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		// 0: response (done 250); 100, 200: refused; 300 and 600 reuse the
		// first connection.
		want := []string{"response", "error:refused", "error:refused", "response", "response"}
		for i, r := range results {
			got := string(r.Outcome)
			if r.Err != "" {
				got += ":" + r.Err
			}
			if got != want[i] {
				t.Errorf("results[%d] = %s, want %s", i, got, want[i])
			}
		}
	})
}

func TestRunTimeoutIsClassified(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(2 * time.Second))
		e := newTestEngine(t, n, Options{Timeout: time.Second})
		zero := time.Now()
		results, err := e.Run(t.Context(), zero, zero.Add(ms), steady(1, 0, 0), nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		r := results[0]
		if r.Outcome != record.OutcomeError || r.Err != record.ErrTimeout {
			t.Fatalf("result = %s %s (%s), want error timeout", r.Outcome, r.Err, r.ErrMsg)
		}
		if d := time.Duration(r.Done - r.Sent); d != time.Second {
			t.Errorf("done − sent = %v, want the 1s timeout", d)
		}
		time.Sleep(2 * time.Second) // let the handler end
	})
}

func TestRunRetriesAConnectionTheServerClosed(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// Every answer closes its connection without a Connection: close.
		n := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(closeAfterHeader, "1")
		}))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		results, err := e.Run(t.Context(), zero, zero, steady(3, 0, 100*ms), nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		for i, r := range results {
			if r.Outcome != record.OutcomeResponse {
				t.Errorf("results[%d] = %s %s %s, want a response after one retry", i, r.Outcome, r.Err, r.ErrMsg)
			}
		}
		if got := n.dialCount(); got != 3 {
			t.Errorf("dials = %d, want 3", got)
		}
	})
}

func TestRunSeqContinuesAcrossCalls(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		var got []int64
		for _, k := range []int{3, 2} {
			sends := steady(k, 0, 10*ms)
			results, err := e.Run(t.Context(), zero, time.Now(), sends, nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, r := range results {
				got = append(got, r.Seq)
			}
		}
		pre, _, err := e.Preflight(t.Context(), zero)
		if err != nil {
			t.Fatalf("Preflight: %v", err)
		}
		got = append(got, pre.Seq)
		results, err := e.Run(t.Context(), zero, time.Now(), steady(1, 0, 0), nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		got = append(got, results[0].Seq)
		if want := []int64{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
			t.Errorf("seqs = %v, want %v", got, want)
		}
	})
}

func TestRunSinkFailureAborts(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sink := &memSink{failAt: 3}
		sends := steady(6, 0, 100*ms)
		results, err := e.Run(t.Context(), zero, zero, sends, sink)
		if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Run error = %v, want ErrAborted with the sink's error", err)
		}
		checkOnePerSend(t, results, sends, 0)
		if got, want := outcomes(results), map[string]int{"response": 3, "not-sent:abort": 3}; !mapsEqual(got, want) {
			t.Errorf("outcomes = %v, want %v", got, want)
		}
	})
}

func TestRunRefusesInvalidSchedules(t *testing.T) {
	tests := []struct {
		name  string
		opt   Options
		sends []Send
		want  string
	}{
		{"negative offset", Options{}, []Send{{At: -ms}}, "negative offset"},
		{"negative client", Options{}, []Send{{Client: -1}}, "negative client"},
		{"client without a value", Options{ClientHeader: "X-Key", ClientValues: []string{"a"}}, []Send{{Client: 1}}, "client 1 has no value"},
		{"batch at two instants", Options{}, []Send{{Batch: 1}, {At: ms, Batch: 1}}, "released at one instant"},
		{"batch larger than the guard", Options{MaxRate: 2}, []Send{{Batch: 1}, {Batch: 1}, {Batch: 1}}, "exceed the max-rate guard"},
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
}

// recorder is a handler that remembers what it saw.
type recorder struct {
	mu    sync.Mutex
	seen  []string // one entry per request, from key(r)
	key   func(r *http.Request) string
	reply func(w http.ResponseWriter, r *http.Request)
}

func (h *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, h.key(r))
	h.mu.Unlock()
	if h.reply != nil {
		h.reply(w, r)
	}
}

func (h *recorder) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

func TestClientIdentityByHeader(t *testing.T) {
	tests := []struct {
		name      string
		header    string
		values    []string
		wantSeen  []string
		wantLabel []string
	}{
		{"synthetic values of a secret header", "X-API-Key", nil,
			[]string{"k1", "k2", "k3"},
			[]string{record.Fingerprint("k1"), record.Fingerprint("k2"), record.Fingerprint("k3")}},
		{"given values of a plain header", "X-Client", []string{"alice", "bob", "carol"},
			[]string{"alice", "bob", "carol"}, []string{"alice", "bob", "carol"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				h := &recorder{key: func(r *http.Request) string { return r.Header.Get(tt.header) }}
				n := newPipeNet(h)
				e := newTestEngine(t, n, Options{ClientHeader: tt.header, ClientValues: tt.values})
				zero := time.Now()
				sends := []Send{{At: 0, Client: 0}, {At: 10 * ms, Client: 1}, {At: 20 * ms, Client: 2}}
				results, err := e.Run(t.Context(), zero, zero, sends, nil)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if got := h.got(); !slices.Equal(got, tt.wantSeen) {
					t.Errorf("server saw %v, want %v", got, tt.wantSeen)
				}
				for i, r := range results {
					if r.Client != tt.wantLabel[i] {
						t.Errorf("results[%d].Client = %q, want %q", i, r.Client, tt.wantLabel[i])
					}
				}
			})
		})
	}
}

func TestClientIdentityBySourceAddress(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h := &recorder{key: func(r *http.Request) string { return r.RemoteAddr }}
		n := newPipeNet(h)
		ips := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
		e := newTestEngine(t, n, Options{SourceIPs: ips})
		zero := time.Now()
		sends := []Send{{At: 0, Client: 0}, {At: 10 * ms, Client: 1}, {At: 20 * ms, Client: 2}}
		results, err := e.Run(t.Context(), zero, zero, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{"127.0.0.2:40000", "127.0.0.3:40000", "127.0.0.2:40000"}
		if got := h.got(); !slices.Equal(got, want) {
			t.Errorf("server saw %v, want %v", got, want)
		}
		for i, r := range results {
			if w := ips[i%2].String(); r.Client != w {
				t.Errorf("results[%d].Client = %q, want %q", i, r.Client, w)
			}
		}
	})
}

func TestReplicasRoundRobinPerClient(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		handler := func(name string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("X-Client")+"@"+name)
				mu.Unlock()
			})
		}
		n := &pipeNet{handlers: map[string]http.Handler{"a.test:80": handler("a"), "b.test:80": handler("b")}}
		e := newTestEngine(t, n, Options{
			URLs:         []string{"http://a.test/", "http://b.test/"},
			ClientHeader: "X-Client",
		})
		zero := time.Now()
		sends := []Send{
			{At: 0, Client: 0}, {At: 10 * ms, Client: 1}, {At: 20 * ms, Client: 0},
			{At: 30 * ms, Client: 0}, {At: 40 * ms, Client: 1}, {At: 50 * ms, Client: 0},
		}
		results, err := e.Run(t.Context(), zero, zero, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{"k1@a", "k2@a", "k1@b", "k1@a", "k2@b", "k1@b"}
		if !slices.Equal(seen, want) {
			t.Errorf("server saw %v, want %v", seen, want)
		}
		for i, r := range results {
			if w := "http://" + want[i][len(want[i])-1:] + ".test/"; r.URL != w {
				t.Errorf("results[%d].URL = %q, want %q", i, r.URL, w)
			}
		}
	})
}

func TestSecretsNeverInResults(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		var gotAuth, gotQuery string
		n := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotAuth, gotQuery = r.Header.Get("Authorization"), r.URL.Query().Get("sig")
			w.Header().Set("Set-Cookie", "sid=topsecret")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
		}))
		e := newTestEngine(t, n, Options{
			URLs:         []string{"http://a.test/x?sig=s3cr3t&q=1"},
			Header:       http.Header{"Authorization": {"Bearer tok-XYZ"}},
			ClientHeader: "X-Auth-Token",
			ClientValues: []string{"my-api-token"},
			Captured:     []string{"Set-Cookie", "Retry-After"},
			Redactor:     record.NewRedactor(nil, []string{"sig"}),
		})
		zero := time.Now()
		results, err := e.Run(t.Context(), zero, zero, steady(1, 0, 0), nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if gotAuth != "Bearer tok-XYZ" || gotQuery != "s3cr3t" {
			t.Fatalf("server got Authorization %q, sig %q: the secrets must still be sent", gotAuth, gotQuery)
		}
		b, _ := json.Marshal(results)
		for _, secret := range []string{"s3cr3t", "tok-XYZ", "topsecret", "my-api-token"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("results contain %q: %s", secret, b)
			}
		}
		r := results[0]
		if want := "http://a.test/x?sig=" + record.Fingerprint("s3cr3t") + "&q=1"; r.URL != want {
			t.Errorf("URL = %q, want %q", r.URL, want)
		}
		if got := r.Headers.Get("Retry-After"); got != "3" {
			t.Errorf("captured Retry-After = %q, want 3 verbatim", got)
		}
		if got := r.Headers.Get("Set-Cookie"); got != record.Fingerprint("sid=topsecret") {
			t.Errorf("captured Set-Cookie = %q, want its fingerprint", got)
		}
	})
}

func TestArrivalEcho(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(headers.ArrivalHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
			w.Header().Set(headers.DecisionHeader, "7")
		}))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		results, err := e.Run(t.Context(), zero, zero.Add(70*ms), steady(1, 0, 0), nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if a := results[0].Arrival; a == nil || *a != int64(70*ms) {
			t.Errorf("Arrival = %v, want %d (the server's clock minus zero)", a, int64(70*ms))
		}
		if d := results[0].Decision; d == nil || *d != 7 {
			t.Errorf("Decision = %v, want 7 (the server's decision number)", d)
		}
	})
}

func TestPreflight(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, strings.Repeat("x", 300))
		}))
		e := newTestEngine(t, n, Options{})
		res, body, err := e.Preflight(t.Context(), time.Now())
		if err != nil {
			t.Fatalf("Preflight: %v", err)
		}
		if res.Status != 404 || res.Phase != PhasePreflight || res.Outcome != record.OutcomeResponse {
			t.Errorf("Preflight result = %+v, want a 404 response", res)
		}
		if len(body) != PreflightBodyBytes {
			t.Errorf("Preflight body has %d bytes, want %d", len(body), PreflightBodyBytes)
		}

		n.fail = func(int) error { return refusedErr }
		e2 := newTestEngine(t, n, Options{})
		res, _, err = e2.Preflight(t.Context(), time.Now())
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || res.Err != record.ErrRefused {
			t.Errorf("Preflight to a closed port = %v (%s), want refused", err, res.Err)
		}
	})
}

func TestRaceModesInMemory(t *testing.T) {
	// A batch of 4 due at 500 ms among steady sends: barrier writes every
	// request at the release, last-byte writes all but the final byte
	// RaceHold earlier and the final byte at the release.
	for _, mode := range []string{RaceBarrier, RaceLastByte} {
		t.Run(mode, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				h := &recorder{key: func(r *http.Request) string { return r.Header.Get("X-Client") }}
				n := newPipeNet(h)
				e := newTestEngine(t, n, Options{RaceMode: mode, RaceHold: 200 * ms, ClientHeader: "X-Client"})
				zero := time.Now()
				sends := steady(3, 0, 300*ms) // 0, 300, 600
				for c := range 4 {
					sends = append(sends, Send{At: 500 * ms, Client: c + 1, Batch: 7, Phase: "race"})
				}
				sink := &memSink{}
				results, err := e.Run(t.Context(), zero, zero, sends, sink)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				checkOnePerSend(t, results, sends, 0)
				if len(sink.results) != len(sends) {
					t.Errorf("sink got %d results, want %d", len(sink.results), len(sends))
				}
				for i, r := range results[3:] {
					wantSent := int64(500 * ms)
					if mode == RaceLastByte {
						wantSent = int64(300 * ms)
					}
					if r.Outcome != record.OutcomeResponse || r.Sched != int64(500*ms) || r.Sent != wantSent || r.Wrote != int64(500*ms) {
						t.Errorf("member %d: %s sched %d sent %d wrote %d, want response sched 500ms sent %v wrote 500ms",
							i, r.Outcome, r.Sched, r.Sent, r.Wrote, time.Duration(wantSent))
					}
				}
				s := Summarize(results)
				if s.Late != 0 || s.Races != 1 || s.RaceWroteSpread.MaxUS != 0 {
					t.Errorf("Summarize: late %d races %d wrote spread %+v, want 0, 1, 0", s.Late, s.Races, s.RaceWroteSpread)
				}
				if got := len(h.got()); got != 7 {
					t.Errorf("server saw %d requests, want 7", got)
				}
			})
		})
	}
}

func TestRaceCalledOffBeforeRelease(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{RaceMode: RaceLastByte, RaceHold: 200 * ms})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(400*ms, cancel) // after the heads went out at 300, before the release at 500
		zero := time.Now()
		var sends []Send
		for c := range 3 {
			sends = append(sends, Send{At: 500 * ms, Client: c, Batch: 1})
		}
		results, err := e.Run(ctx, zero, zero, sends, nil)
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("Run error = %v, want ErrInterrupted", err)
		}
		if got, want := outcomes(results), map[string]int{"not-sent:signal": 3}; !mapsEqual(got, want) {
			t.Errorf("outcomes = %v, want %v", got, want)
		}
	})
}

func TestRaceAgainstAClosedPortAborts(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		n.fail = func(int) error { return refusedErr }
		e := newTestEngine(t, n, Options{RaceMode: RaceLastByte})
		zero := time.Now()
		var sends []Send
		for c := range 4 {
			sends = append(sends, Send{At: 500 * ms, Client: c, Batch: 1})
		}
		results, err := e.Run(t.Context(), zero, zero, sends, nil)
		if !errors.Is(err, ErrAborted) {
			t.Fatalf("Run error = %v, want ErrAborted", err)
		}
		checkOnePerSend(t, results, sends, 0)
		// The members dial at once; the first failure aborts, and the
		// members whose dial failed because of it are not-sent.
		got := outcomes(results)
		if got["error:refused"] < 1 || got["error:refused"]+got["not-sent:abort"] != 4 {
			t.Errorf("outcomes = %v, want at least one refused error, the rest not-sent", got)
		}
	})
}

func TestLateSendsWaitForAFreedConnectionOrADialSlot(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// Answers take 10 ms, dials 50 ms, and late sends may dial two at a
		// time: the third and later sends of a quick succession take the
		// connection the first one frees, in order.
		n := newPipeNet(okHandler(10 * ms))
		n.dialDelay = 50 * ms
		e := newTestEngine(t, n, Options{})
		e.dialSem = make(chan struct{}, 2)
		zero := time.Now()
		begin := zero.Add(100 * ms) // after the pre-dialled connection
		sends := steady(6, 0, ms)
		results, err := e.Run(t.Context(), zero, begin, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []time.Duration{0, 51 * ms, 52 * ms, 10 * ms, 20 * ms, 30 * ms}
		for i, r := range results {
			if got := time.Duration(r.Sent) - 100*ms; got != want[i] || r.Status != 200 {
				t.Errorf("results[%d]: sent at %v status %d, want %v 200", i, got, r.Status, want[i])
			}
		}
		if got := n.dialCount(); got != 3 {
			t.Errorf("dials = %d, want 3", got)
		}
	})
}

func TestEmptyScheduleAndClosedEngine(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(0))
		e := newTestEngine(t, n, Options{})
		results, err := e.Run(t.Context(), time.Now(), time.Now(), nil, nil)
		if err != nil || len(results) != 0 || n.dialCount() != 0 {
			t.Errorf("Run(empty) = %d results, %v, %d dials; want nothing at all", len(results), err, n.dialCount())
		}
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := e.Run(t.Context(), time.Now(), time.Now(), steady(1, 0, 0), nil); !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close = %v, want ErrClosed", err)
		}
		if _, _, err := e.Preflight(t.Context(), time.Now()); !errors.Is(err, ErrClosed) {
			t.Errorf("Preflight after Close = %v, want ErrClosed", err)
		}
	})
}
