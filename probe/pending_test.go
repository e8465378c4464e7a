package probe

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

func TestPredialCoversAnswersSlowerThanAMillisecond(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// Two sends a millisecond, answers in 15 ms, dials in 2 ms: a send
		// that had to dial would be late. The pool is dialled for every
		// send due within predialSlack (20 ms: 40), so none is.
		n := newPipeNet(okHandler(15 * ms))
		n.dialDelay = 2 * ms
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sends := steady(100, 0, 500*time.Microsecond)
		results, err := e.Run(t.Context(), zero, zero.Add(100*ms), sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkOnePerSend(t, results, sends, 0)
		for i, r := range results {
			if r.Sent != r.Sched || r.Status != 200 {
				t.Errorf("results[%d]: sent %v after its deadline, status %d; want on time, 200", i, time.Duration(r.Sent-r.Sched), r.Status)
			}
		}
		if got := n.dialCount(); got != 40 {
			t.Errorf("dials = %d, want 40 (the sends due within 20 ms)", got)
		}
	})
}

func TestPredialForABurstIsItsSize(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		n := newPipeNet(okHandler(10 * ms))
		e := newTestEngine(t, n, Options{})
		zero := time.Now()
		sends := make([]Send, 4)
		for i := range sends {
			sends[i] = Send{At: 0, Phase: "burst"}
		}
		sends = append(sends, Send{At: time.Second, Phase: "burst"})
		if _, err := e.Run(t.Context(), zero, zero.Add(100*ms), sends, nil); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := n.dialCount(); got != 4 {
			t.Errorf("dials = %d, want 4 (the burst; a second later they are free again)", got)
		}
	})
}

func TestWaitingSendsAreNotSentWhenTheRunStops(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// One dial slot: the second send dials (50 ms), the third to fifth
		// wait in the pool for a connection, which no answer frees before
		// the run is cancelled at 20 ms: they are not sent, while the
		// requests in flight complete within the grace period.
		n := newPipeNet(okHandler(100 * ms))
		n.dialDelay = 50 * ms
		e := newTestEngine(t, n, Options{})
		e.dialSem = make(chan struct{}, 1)
		zero := time.Now()
		begin := zero.Add(100 * ms)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(120*ms, cancel)
		sends := steady(5, 0, ms)
		results, err := e.Run(ctx, zero, begin, sends, nil)
		if err != ErrInterrupted {
			t.Fatalf("Run error = %v, want ErrInterrupted", err)
		}
		checkOnePerSend(t, results, sends, 0)
		want := []string{"response:", "response:", "not-sent:signal", "not-sent:signal", "not-sent:signal"}
		for i, r := range results {
			if got := string(r.Outcome) + ":" + r.Err; got != want[i] {
				t.Errorf("results[%d] = %s, want %s", i, got, want[i])
			}
		}
		if r := results[1]; r.Outcome == record.OutcomeResponse && time.Duration(r.Sent)-100*ms != 51*ms {
			t.Errorf("results[1] sent at %v, want 51ms (after its dial)", time.Duration(r.Sent)-100*ms)
		}
		if got := n.dialCount(); got != 2 {
			t.Errorf("dials = %d, want 2", got)
		}
		if len(e.pools) != 1 {
			t.Fatalf("%d pools, want 1", len(e.pools))
		}
		for _, p := range e.pools {
			if p.queue.len() != 0 {
				t.Errorf("%d sends still waiting in the pool", p.queue.len())
			}
		}
	})
}

func TestLateSendsShareThePoolsConnectionsAtItsCap(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// Answers take 10 ms, a send is due every millisecond, and the pool
		// may hold two connections: the second send dials the second
		// connection, the others wait for one to be freed.
		n := newPipeNet(okHandler(10 * ms))
		e := newTestEngine(t, n, Options{})
		e.maxConns = 2
		zero := time.Now()
		begin := zero.Add(100 * ms)
		sends := steady(6, 0, ms)
		results, err := e.Run(t.Context(), zero, begin, sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []time.Duration{0, ms, 10 * ms, 11 * ms, 20 * ms, 21 * ms}
		for i, r := range results {
			if got := time.Duration(r.Sent) - 100*ms; got != want[i] || r.Status != 200 {
				t.Errorf("results[%d]: sent at %v status %d, want %v 200", i, got, r.Status, want[i])
			}
		}
		if got := n.dialCount(); got != 2 {
			t.Errorf("dials = %d, want 2", got)
		}
		for _, p := range e.pools {
			if got := p.conns.Load(); got != 2 {
				t.Errorf("pool counts %d open connections, want 2", got)
			}
		}
	})
}

func TestAClosedConnectionMakesRoomForAWaitingSend(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// One connection allowed; every answer closes it (no keep-alive):
		// each closed connection lets the next waiting send dial.
		n := newPipeNet(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(10 * ms)
			w.Header().Set("Connection", "close")
		}))
		e := newTestEngine(t, n, Options{})
		e.maxConns = 1
		zero := time.Now()
		sends := steady(3, 0, ms)
		results, err := e.Run(t.Context(), zero, zero.Add(100*ms), sends, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []time.Duration{0, 10 * ms, 20 * ms}
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
