package probe

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rlprobe/rlprobe/record"
)

// The rules every send path applies (the net.Conn path of run.go and
// conn.go, and the event loop of evloop_linux.go) live here, as decisions
// over the time and the state their callers give them: they touch no
// socket, start no goroutine and never read the clock.

// dispatcher holds one run's dispatch rules: the MaxRate guard and the
// retry-once rule. The third rule, the queue of the sends that wait for a
// connection and the dials made for them, is a sendQueue per pool.
type dispatcher struct {
	guard guard
	retry retryRule
}

// newDispatcher returns the dispatch rules of a run of e.
func newDispatcher(e *Engine) *dispatcher {
	return &dispatcher{
		guard: guard{lim: e.lim},
		retry: retryRule{idempotent: idempotent(e.opt.Method)},
	}
}

// guard is the engine's MaxRate guard: a token bucket refilled at MaxRate
// tokens a second and holding at most its burst, from which every request
// takes one token as it goes out (a batch takes one per member, at its
// release). It carries over from one run of the engine to the next, and is
// safe for concurrent use.
type guard struct {
	lim *rate.Limiter
}

// take reports how long after now n sends must wait for the guard. When
// that is 0, the sends may go now and their tokens were taken; otherwise
// nothing was taken, and the caller asks again once the wait is over. A
// batch larger than the bucket (which checkSends refuses before a run)
// goes unguarded: 0, nothing taken. take does not allocate when the
// tokens are there.
func (g guard) take(now time.Time, n int) time.Duration {
	if g.lim.AllowN(now, n) { // (AllowN does not allocate; ReserveN does)
		return 0
	}
	rv := g.lim.ReserveN(now, n)
	if !rv.OK() {
		return 0
	}
	d := rv.DelayFrom(now)
	rv.CancelAt(now)
	return max(d, 0)
}

// reserve takes n tokens at now, into debt when the bucket lacks them,
// and returns how long after now the sends may go. When that is more than
// 0 it also returns the reservation, whose CancelAt gives the tokens back
// should the caller stop waiting. Takers on several goroutines (the
// net.Conn path's dispatcher and its races) reserve, so that a taker
// keeps its place in line while it waits. A batch larger than the bucket
// goes unguarded: 0, nothing taken.
func (g guard) reserve(now time.Time, n int) (time.Duration, *rate.Reservation) {
	rv := g.lim.ReserveN(now, n)
	if !rv.OK() {
		return 0, nil
	}
	if d := rv.DelayFrom(now); d > 0 {
		return d, rv
	}
	return 0, nil
}

// failedSend is what the retry-once rule knows of a send whose request
// failed on a connection.
type failedSend struct {
	err      error // the write's or the read's error
	reused   bool  // the connection had completed a request before
	answered bool  // a byte of the response arrived
	// pinned: the send goes on the connection prepared for it or not at
	// all: a batch member (on the net.Conn path always, in the event loop
	// until its release).
	pinned    bool
	abandoned bool // the grace period is over: the requests in flight were abandoned
}

// retryRule is the retry-once rule. A server may close a keep-alive
// connection while it is idle in the pool, and a request written into it
// then fails for no fault of the target: so a request that failed on a
// reused connection, reset before any response byte (not a timeout),
// goes again, once, on another connection, when its method is idempotent
// (RFC 9110, 9.2.2). It is safe for concurrent use.
type retryRule struct {
	idempotent bool // the run's method

	mu      sync.Mutex
	retried map[int]bool // by send index: retried already
}

// idempotent reports whether a request with method may be sent twice.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// once reports whether send i, which failed as f says, goes again; a
// send it said yes to once is not retried a second time.
func (rr *retryRule) once(i int, f failedSend) bool {
	if !rr.idempotent || f.pinned || !f.reused || f.answered || f.abandoned ||
		isTimeout(f.err) || classify(f.err) != record.ErrReset {
		return false
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.retried[i] {
		return false
	}
	if rr.retried == nil {
		rr.retried = make(map[int]bool)
	}
	rr.retried[i] = true
	return true
}

// pendingSend is a late send waiting in a pool for a connection, or a
// race member waiting for its dedicated connection (Send.Conn), busy when
// the batch was prepared.
type pendingSend struct {
	r *run
	i int
	// member: the send is a race member, which prepares the connection
	// itself: the connection freed or dialled for it is handed to the
	// member (on the net.Conn path through ready), not written on. A
	// member holds no count of r.wg for its place in the queue.
	member bool
	ready  chan<- memberConn
}

// sendQueue is one pool's late sends waiting for a connection, longest
// waiting first, and the count of the dials in progress for the pool's
// late sends. A connection the pool frees goes to the first waiting send
// (next); a dial may start while the pool's connections, open or being
// dialled, are under the pool's cap (mayDial, dialsToStart). It is not
// safe for concurrent use: the net.Conn path guards each pool's queue
// with the pool's mutex, and the event loop keeps queues of its own.
type sendQueue struct {
	sends   []pendingSend
	dialing int // dials in progress for the pool's late sends
}

// len returns the number of waiting sends.
func (q *sendQueue) len() int { return len(q.sends) }

// push queues s behind the sends waiting already.
func (q *sendQueue) push(s pendingSend) { q.sends = append(q.sends, s) }

// pushFront queues s before every waiting send: a retry, due before them.
func (q *sendQueue) pushFront(s pendingSend) {
	q.sends = append(q.sends, pendingSend{})
	copy(q.sends[1:], q.sends)
	q.sends[0] = s
}

// first returns the longest waiting send without removing it.
func (q *sendQueue) first() (pendingSend, bool) {
	if len(q.sends) == 0 {
		return pendingSend{}, false
	}
	return q.sends[0], true
}

// next removes and returns the longest waiting send: the one a freed or
// new connection serves.
func (q *sendQueue) next() (pendingSend, bool) {
	if len(q.sends) == 0 {
		return pendingSend{}, false
	}
	s := q.sends[0]
	q.sends[0] = pendingSend{}
	q.sends = q.sends[1:]
	return s, true
}

// drop removes r's waiting sends (r stopped: they are not sent), keeping
// the order of the others, and returns how many it removed.
func (q *sendQueue) drop(r *run) int {
	keep := q.sends[:0]
	for _, s := range q.sends {
		if s.r != r {
			keep = append(keep, s)
		}
	}
	n := len(q.sends) - len(keep)
	clear(q.sends[len(keep):])
	q.sends = keep
	return n
}

// mayDial reports whether a late send may dial for a pool with conns
// connections open: whether those and the dials in progress are fewer
// than maxConns.
func (q *sendQueue) mayDial(conns, maxConns int) bool {
	return conns+q.dialing < maxConns
}

// dialsToStart returns how many dials may start now for the waiting sends
// of a pool with conns connections open, when slots more dials may start
// in all: one per waiting send that no dial in progress serves, within
// the pool's cap of maxConns connections open or being dialled.
func (q *sendQueue) dialsToStart(conns, maxConns, slots int) int {
	return max(0, min(len(q.sends)-q.dialing, maxConns-conns-q.dialing, slots))
}

// dialStarted counts a dial started for the pool's late sends.
func (q *sendQueue) dialStarted() { q.dialing++ }

// dialEnded counts the end of such a dial, successful or not.
func (q *sendQueue) dialEnded() { q.dialing-- }

// The Send.Conn rule: a pool is either a client's shared connections to a
// target (conn 0), as many as Options.Connections, or one of its
// dedicated connections there (conn n ≥ 1). A dedicated pool holds at most
// one connection, open or being dialled: its sends go one after another,
// a send due while the connection is busy waits in the pool's queue like
// any late send, and a send due while none is open dials it. Its idle
// connection is trusted however long it was idle: it is closed only when
// the server closed it (the pool's reader, or the event loop, sees the
// end of the stream) or a request on it failed, and the next send dials
// it anew. Both send paths ask these two questions of the pool.

// dedicated reports whether p is a dedicated connection (Send.Conn ≥ 1).
func (p *pool) dedicated() bool { return p.conn > 0 }

// connCap returns how many HTTP/1.1 connections p may have open or being
// dialled: one for a dedicated connection, else Options.Connections.
func (p *pool) connCap() int {
	if p.dedicated() {
		return 1
	}
	return p.e.maxConns
}

// trusts reports whether an idle connection of p, idle since since, may
// carry a request at now: for at most maxIdleAge (the server may be
// closing it), or for ever when p is a dedicated connection (which is
// kept alive until the server closes it).
func (p *pool) trusts(since, now time.Time) bool {
	return p.dedicated() || now.Sub(since) < maxIdleAge
}
