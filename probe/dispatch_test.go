package probe

import (
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The dispatch rules, each table a sequence of situations and the
// decision expected in each. Times are offsets from an arbitrary t0; the
// guard in every table refills 10 tokens a second (one every 100 ms) and
// holds 3.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestGuard() guard { return guard{lim: rate.NewLimiter(10, 3)} }

func TestGuardTakeSendsNowOrSaysHowLongToWait(t *testing.T) {
	g := newTestGuard()
	for _, step := range []struct {
		what string
		at   time.Duration
		n    int
		wait time.Duration
	}{
		{"a full bucket lets a burst of its size go at once", 0, 3, 0},
		{"then empty, the next send waits for the next token", 0, 1, 100 * ms},
		{"a send told to wait took nothing: the same wait", 0, 1, 100 * ms},
		{"at the refill the send goes", 100 * ms, 1, 0},
		{"two sends wait for two tokens", 100 * ms, 2, 200 * ms},
		{"a batch larger than the bucket goes unguarded", 100 * ms, 4, 0},
		{"and took nothing: a single send still waits one token", 100 * ms, 1, 100 * ms},
		{"a long pause refills the bucket, never beyond its size", 10 * time.Second, 3, 0},
		{"so the burst after it is the bucket's size", 10 * time.Second, 1, 100 * ms},
		{"half a token's time: half a token to wait", 10*time.Second + 50*ms, 1, 50 * ms},
	} {
		if got := g.take(t0.Add(step.at), step.n); got != step.wait {
			t.Errorf("%s: take(t0+%v, %d) = %v, want %v", step.what, step.at, step.n, got, step.wait)
		}
	}
}

func TestGuardReserveKeepsThePlaceInLine(t *testing.T) {
	g := newTestGuard()
	var last *rate.Reservation
	for _, step := range []struct {
		what    string
		at      time.Duration
		n       int
		cancel  bool // the caller of the previous step stopped waiting at at
		wait    time.Duration
		givable bool // a reservation to give back comes with the wait
	}{
		{what: "a full bucket lets a burst of its size go at once", n: 3},
		{what: "then empty, a send takes the next token, in debt", n: 1, wait: 100 * ms, givable: true},
		{what: "the one after it waits behind it", n: 1, wait: 200 * ms, givable: true},
		{what: "a wait given up gives its token back", cancel: true, n: 1, wait: 200 * ms, givable: true},
		{what: "a batch larger than the bucket goes unguarded, taking nothing", n: 4},
		{what: "once the debt is paid, a send goes at once", at: 500 * ms, n: 1},
	} {
		now := t0.Add(step.at)
		if step.cancel {
			last.CancelAt(now)
		}
		wait, rv := g.reserve(now, step.n)
		if wait != step.wait || (rv != nil) != step.givable {
			t.Errorf("%s: reserve(t0+%v, %d) = %v, reservation %t; want %v, %t", step.what, step.at, step.n, wait, rv != nil, step.wait, step.givable)
		}
		last = rv
	}
}

func TestRetryOnceRule(t *testing.T) {
	reset := os.NewSyscallError("read", syscall.ECONNRESET)
	closed := io.ErrUnexpectedEOF // the server closed the connection
	timeout := os.ErrDeadlineExceeded
	refused := os.NewSyscallError("connect", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		what    string
		method  string
		failed  failedSend
		earlier bool // the send was retried once already
		want    bool
	}{
		{"a GET reset on a reused connection goes again", "GET", failedSend{err: reset, reused: true}, false, true},
		{"so does one the server closed before answering", "GET", failedSend{err: closed, reused: true}, false, true},
		{"and a HEAD, OPTIONS, TRACE, PUT or DELETE", "DELETE", failedSend{err: reset, reused: true}, false, true},
		{"but never a POST, which is not idempotent", "POST", failedSend{err: reset, reused: true}, false, false},
		{"nor a PATCH", "PATCH", failedSend{err: reset, reused: true}, false, false},
		{"a fresh connection's failure is the target's", "GET", failedSend{err: reset}, false, false},
		{"a second failure is not retried", "GET", failedSend{err: reset, reused: true}, true, false},
		{"a response byte arrived: the server did answer", "GET", failedSend{err: reset, reused: true, answered: true}, false, false},
		{"a timeout is the target's slowness", "GET", failedSend{err: timeout, reused: true}, false, false},
		{"only a reset or close counts", "GET", failedSend{err: refused, reused: true}, false, false},
		{"a batch member goes on its own connection or not at all", "GET", failedSend{err: reset, reused: true, pinned: true}, false, false},
		{"after the grace period nothing goes again", "GET", failedSend{err: reset, reused: true, abandoned: true}, false, false},
	} {
		rr := retryRule{idempotent: idempotent(tc.method)}
		if tc.earlier {
			if !rr.once(7, failedSend{err: reset, reused: true}) {
				t.Fatalf("%s: the first retry was refused", tc.what)
			}
		}
		if got := rr.once(7, tc.failed); got != tc.want {
			t.Errorf("%s: once = %t, want %t", tc.what, got, tc.want)
		}
	}
}

func TestRetryOnceIsPerSend(t *testing.T) {
	rr := retryRule{idempotent: true}
	f := failedSend{err: io.ErrUnexpectedEOF, reused: true}
	for _, step := range []struct {
		i    int
		want bool
	}{{1, true}, {2, true}, {1, false}, {2, false}, {3, true}} {
		if got := rr.once(step.i, f); got != step.want {
			t.Errorf("once(send %d) = %t, want %t", step.i, got, step.want)
		}
	}
}

func TestSendQueueServesEachPoolInOrder(t *testing.T) {
	r := new(run)
	queues := map[string]*sendQueue{"a": {}, "b": {}}
	for _, step := range []struct {
		what string
		op   string // push, front (a retry), next (a connection freed)
		pool string
		i    int // push, front: the send; next: the send expected, -1 none
	}{
		{"a send due with no connection waits", "push", "a", 1},
		{"and one of another pool, in that pool", "push", "b", 2},
		{"a second one waits behind the first", "push", "a", 3},
		{"a freed connection serves the longest waiting", "next", "a", 1},
		{"a retry goes before the sends waiting", "front", "a", 4},
		{"it is served first", "next", "a", 4},
		{"then the rest, in order", "next", "a", 3},
		{"an empty queue has nothing to serve", "next", "a", -1},
		{"the other pool's send still waits for its own pool", "next", "b", 2},
	} {
		q := queues[step.pool]
		switch step.op {
		case "push":
			q.push(pendingSend{r: r, i: step.i})
		case "front":
			q.pushFront(pendingSend{r: r, i: step.i})
		case "next":
			first, _ := q.first()
			s, ok := q.next()
			got := -1
			if ok {
				got = s.i
			}
			if got != step.i || first != s {
				t.Errorf("%s: next on %s = %d (first said %d), want %d", step.what, step.pool, got, first.i, step.i)
			}
		}
	}
}

func TestSendQueueDialLimits(t *testing.T) {
	r := new(run)
	for _, tc := range []struct {
		what                    string
		waiting, dialing, conns int
		maxConns, slots         int
		wantDials               int
		wantMayDial             bool
	}{
		{"one dial per waiting send", 3, 0, 0, 10, 10, 3, true},
		{"a dial in progress serves a waiting send", 3, 2, 0, 10, 10, 1, true},
		{"as many dials as waiting sends: none more", 2, 2, 0, 10, 10, 0, true},
		{"no waiting send, no dial", 0, 0, 0, 10, 10, 0, true},
		{"the pool's cap counts its open connections", 5, 0, 8, 10, 10, 2, true},
		{"and the dials in progress", 5, 1, 8, 10, 10, 1, true},
		{"a pool at its cap dials nothing", 5, 0, 10, 10, 10, 0, false},
		{"dials in progress reach the cap", 5, 2, 8, 10, 10, 0, false},
		{"the free slots bound the dials", 5, 0, 0, 10, 2, 2, true},
		{"no free slot, no dial", 5, 0, 0, 10, 0, 0, true},
	} {
		q := &sendQueue{dialing: tc.dialing}
		for i := range tc.waiting {
			q.push(pendingSend{r: r, i: i})
		}
		if got := q.dialsToStart(tc.conns, tc.maxConns, tc.slots); got != tc.wantDials {
			t.Errorf("%s: dialsToStart = %d, want %d", tc.what, got, tc.wantDials)
		}
		if got := q.mayDial(tc.conns, tc.maxConns); got != tc.wantMayDial {
			t.Errorf("%s: mayDial = %t, want %t", tc.what, got, tc.wantMayDial)
		}
	}
}

func TestSendQueueCountsItsDials(t *testing.T) {
	q := &sendQueue{}
	q.push(pendingSend{i: 1})
	q.push(pendingSend{i: 2})
	for _, step := range []struct {
		what string
		op   func()
		want int
	}{
		{"two waiting sends want two dials", func() {}, 2},
		{"one started", q.dialStarted, 1},
		{"both started", q.dialStarted, 0},
		{"one ended (its connection serves a send)", func() { q.dialEnded(); q.next() }, 0},
		{"the other failed: its send is still waiting", q.dialEnded, 1},
	} {
		step.op()
		if got := q.dialsToStart(0, 10, 10); got != step.want {
			t.Errorf("%s: dialsToStart = %d, want %d", step.what, got, step.want)
		}
	}
}

func TestSendQueueDropsTheSendsOfAStoppedRun(t *testing.T) {
	stopped, other := new(run), new(run)
	q := &sendQueue{}
	for i, r := range []*run{stopped, other, stopped, other, stopped} {
		q.push(pendingSend{r: r, i: i})
	}
	if n := q.drop(stopped); n != 3 {
		t.Errorf("drop = %d, want 3 (the stopped run's sends)", n)
	}
	var left []int
	for s, ok := q.next(); ok; s, ok = q.next() {
		if s.r != other {
			t.Errorf("send %d of the stopped run left waiting", s.i)
		}
		left = append(left, s.i)
	}
	if want := []int{1, 3}; !slices.Equal(left, want) {
		t.Errorf("waiting after the drop: %v, want %v (in order)", left, want)
	}
	if n := q.drop(stopped); n != 0 {
		t.Errorf("drop on an empty queue = %d, want 0", n)
	}
}

func TestConnRule(t *testing.T) {
	e := &Engine{maxConns: 7}
	now := time.Unix(1000, 0)
	tests := []struct {
		conn     int
		idle     time.Duration // how long the connection was idle
		wantCap  int
		wantTrus bool
	}{
		{conn: 0, idle: 0, wantCap: 7, wantTrus: true},
		{conn: 0, idle: maxIdleAge - time.Nanosecond, wantCap: 7, wantTrus: true},
		{conn: 0, idle: maxIdleAge, wantCap: 7, wantTrus: false}, // the server may be closing it
		{conn: 1, idle: 0, wantCap: 1, wantTrus: true},
		{conn: 1, idle: maxIdleAge, wantCap: 1, wantTrus: true}, // kept alive until the server closes it
		{conn: 3, idle: time.Hour, wantCap: 1, wantTrus: true},
	}
	for _, tt := range tests {
		p := &pool{e: e, conn: tt.conn}
		if got := p.connCap(); got != tt.wantCap {
			t.Errorf("conn %d: connCap = %d, want %d", tt.conn, got, tt.wantCap)
		}
		if got := p.trusts(now.Add(-tt.idle), now); got != tt.wantTrus {
			t.Errorf("conn %d idle %v: trusts = %v, want %v", tt.conn, tt.idle, got, tt.wantTrus)
		}
	}
	// A dedicated pool's queue: one connection open or being dialled
	// leaves no room for a dial, whatever waits.
	var q sendQueue
	q.push(pendingSend{i: 1})
	q.push(pendingSend{i: 2, member: true})
	for _, c := range []struct{ conns, dialing, want int }{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}} {
		q.dialing = c.dialing
		if got := q.dialsToStart(c.conns, 1, 100); got != c.want {
			t.Errorf("cap 1, %d open, %d dialling: dialsToStart = %d, want %d", c.conns, c.dialing, got, c.want)
		}
		if got := q.mayDial(c.conns, 1); got != (c.want == 1) {
			t.Errorf("cap 1, %d open, %d dialling: mayDial = %v", c.conns, c.dialing, got)
		}
	}
}
