package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
)

// The soundness harness's plumbing: the probe engine adapter, a shared
// rand, and the in-memory link that delays and disorders bytes.

// soundEngine is a verify.Engine over a probe engine: offset 0 of an
// unanchored schedule is a little after now; Seqs are unique across the
// case's engines.
type soundEngine struct {
	p    *probe.Engine
	zero time.Time
	seq  *atomic.Int64
}

func (e *soundEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	begin := time.Now().Add(20 * time.Millisecond)
	if !s.Start.IsZero() {
		if s.Start.Before(time.Now()) {
			return nil, fmt.Errorf("schedule due %v ago", time.Since(s.Start))
		}
		begin = s.Start
	}
	sends := make([]probe.Send, len(s.Sends))
	for i, x := range s.Sends {
		sends[i] = probe.Send{At: x.At, Client: x.Client, Phase: x.Phase, Batch: x.Batch, Conn: x.Conn}
	}
	res, err := e.p.Run(ctx, e.zero, begin, sends, nil)
	for i := range res {
		res[i].Seq = e.seq.Add(1) - 1
	}
	return res, err
}

// lockedRand is a rand shared by the server's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// dur returns a duration in [0, d].
func (l *lockedRand) dur(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.r.Int64N(int64(d) + 1))
}

func (l *lockedRand) chance(p float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

// soundEpoch is when cases start (plus their phase).
var soundEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// linkDelay is the base one-way delay of the in-memory link: answers
// arrive a little after decisions, as on any network, so a decision's
// bounds [last byte written, first byte read] are never a single instant.
const linkDelay = time.Millisecond

// linkListener wraps the server's side of every connection in a link that
// delays the bytes each way (see linkConn).
type linkListener struct {
	net.Listener
	c   *soundCase
	rng *lockedRand
}

func (l *linkListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newLinkConn(conn, l.c, l.rng), nil
}

// chunk is bytes in flight, delivered at at.
type chunk struct {
	b  []byte
	at time.Time
}

// linkConn is the server's end of a link that delays what the server
// reads (the request in flight: the client has written it, the server has
// not yet received it) and what it writes (the answer in flight), in
// order: linkDelay, plus jitter up to jitterMax under disorder "jitter",
// plus, one answer in ten, up to lateMax under disorder "late".
//
// Both directions are buffered by pumps, so neither side's writes wait for
// the delays: a writer blocked on a net.Pipe while holding a lock (as the
// HTTP/2 client does) would stop a synctest bubble's clock, since waiting
// for a mutex is not durable blocking.
type linkConn struct {
	net.Conn
	c   *soundCase
	rng *lockedRand

	in   chan chunk // from the reader pump
	rerr error      // the pipe's read error, set before in is closed
	buf  []byte     // the rest of the chunk being read

	mu        sync.Mutex
	deadline  time.Time
	dlChanged chan struct{} // closed and replaced when the deadline changes
	out       chan chunk    // to the writer pump; nil once closed
	lastOut   time.Time
	closed    chan struct{}
}

func newLinkConn(conn net.Conn, c *soundCase, rng *lockedRand) *linkConn {
	l := &linkConn{Conn: conn, c: c, rng: rng, in: make(chan chunk, 1024), out: make(chan chunk, 1024),
		dlChanged: make(chan struct{}), closed: make(chan struct{})}
	go l.readPump()
	go l.writePump(l.out)
	return l
}

func (l *linkConn) delay(answer bool) time.Duration {
	d := linkDelay
	if l.c.disorder("jitter") {
		d += l.rng.dur(l.c.jitterMax)
	}
	if answer && l.c.disorder("late") && l.rng.chance(0.1) {
		d += l.rng.dur(l.c.lateMax)
	}
	return d
}

// readPump reads the pipe as fast as the client writes and queues the
// bytes with their delivery time.
func (l *linkConn) readPump() {
	var last time.Time
	for {
		b := make([]byte, 32<<10)
		n, err := l.Conn.Read(b)
		if n > 0 {
			at := time.Now().Add(l.delay(false))
			if at.Before(last) {
				at = last
			}
			last = at
			l.in <- chunk{b[:n], at}
		}
		if err != nil {
			l.rerr = err
			close(l.in)
			return
		}
	}
}

// writePump writes the queued answers into the pipe at their delivery
// time, then closes the pipe once the connection is closed.
func (l *linkConn) writePump(out chan chunk) {
	failed := false
	for ch := range out {
		if d := time.Until(ch.at); d > 0 {
			time.Sleep(d)
		}
		if !failed {
			if _, err := l.Conn.Write(ch.b); err != nil {
				failed = true
			}
		}
	}
	l.Conn.Close()
}

func (l *linkConn) Read(p []byte) (int, error) {
	for len(l.buf) == 0 {
		l.mu.Lock()
		dl, changed := l.deadline, l.dlChanged
		l.mu.Unlock()
		var expire <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expire = t.C
		}
		select {
		case ch, ok := <-l.in:
			if !ok {
				return 0, l.rerr
			}
			if d := time.Until(ch.at); d > 0 {
				time.Sleep(d)
			}
			l.buf = ch.b
		case <-expire:
			return 0, os.ErrDeadlineExceeded
		case <-changed:
		case <-l.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *linkConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == nil {
		return 0, net.ErrClosed
	}
	at := time.Now().Add(l.delay(true))
	if at.Before(l.lastOut) {
		at = l.lastOut
	}
	l.lastOut = at
	select {
	case l.out <- chunk{slices.Clone(p), at}:
		return len(p), nil
	case <-l.closed:
		return 0, net.ErrClosed
	}
}

// Close stops reads and writes; answers already written are still
// delivered before the pipe closes.
func (l *linkConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == nil {
		return net.ErrClosed
	}
	close(l.out)
	l.out = nil
	close(l.closed)
	return nil
}

func (l *linkConn) SetDeadline(t time.Time) error { return l.SetReadDeadline(t) }

func (l *linkConn) SetReadDeadline(t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = t
	close(l.dlChanged)
	l.dlChanged = make(chan struct{})
	return nil
}

// SetWriteDeadline does nothing: writes never block.
func (l *linkConn) SetWriteDeadline(time.Time) error { return nil }
