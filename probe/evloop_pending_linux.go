//go:build linux

package probe

import (
	"net"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// The event loop's traffic with other goroutines: connections adopted from
// and returned to the pools, the sink of finished sends, dials for waiting
// sends and their inbox, and the fallback reader for responses the lean
// parser declines.

// adoptIdle takes the pool's idle connections for the event loop: the
// reader goroutine watching one lets go of it first. A connection that
// received something unasked meanwhile is closed.
func (p *pool) adoptIdle() []*h1Conn {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	got := idle[:0]
	for _, c := range idle {
		if c.reader {
			close(c.adoptReq)
			_ = c.sc.SetReadDeadline(aLongTimeAgo)
			<-c.adopted
			if c.sc.SetDeadline(time.Time{}) != nil || c.br.Buffered() > 0 {
				c.close()
				continue
			}
		}
		got = append(got, c)
	}
	return got
}

// post hands m to the loop from another goroutine.
func (l *evloop) post(m loopMsg) {
	l.inMu.Lock()
	l.inbox = append(l.inbox, m)
	l.inMu.Unlock()
	l.wake()
}

func (l *evloop) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(l.efd, one[:])
}

// sink finishes the loop's results, in batches, off the loop's thread.
// The batches go back to the loop for reuse: the loop does not allocate
// in the steady state, so that it never pays for the garbage collector's
// assists (a stall of milliseconds) while pacing.
func (l *evloop) sink() {
	for batch := range l.sinkCh {
		for _, d := range batch {
			l.r.finish(d.i, d.res, d.err)
			l.r.wg.Done()
		}
		clear(batch)
		select {
		case l.free <- batch[:0]:
		default:
		}
	}
}

// flush hands the finished sends in out to the sink as one batch, and
// takes a batch the sink is done with (or a new one) for the next.
func (l *evloop) flush() {
	if len(l.out) > 0 {
		l.sinkCh <- l.out
		select {
		case l.out = <-l.free:
		default:
			l.out = make([]loopDone, 0, 64)
		}
	}
}

// maybeDial dials for p's waiting sends, within the pool's and the
// engine's bounds; the connection is posted back to the loop.
func (l *evloop) maybeDial(p *pool) {
	r := l.r
	q := l.queues[p]
	if q == nil || l.stop {
		return
	}
	for range q.dialsToStart(int(p.conns.Load()), p.connCap(), maxSendDials-l.ndial) {
		q.dialStarted()
		l.ndial++
		go func() {
			nc, _, err := p.dialRaw(r.dctx, dialH1)
			l.post(loopMsg{p: p, nc: nc, err: err})
		}()
	}
}

// drainInbox handles what other goroutines posted.
func (l *evloop) drainInbox() {
	l.inMu.Lock()
	msgs := l.inbox
	l.inbox = nil
	l.inMu.Unlock()
	r := l.r
	for _, m := range msgs {
		if m.c != nil { // back from a fallback reader
			c := m.c
			l.away--
			c.away = false
			if !m.reuse {
				l.closeConn(c)
				continue
			}
			c.used++
			if unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}) != nil {
				l.closeConn(c)
				continue
			}
			l.release(c)
			continue
		}
		if m.slot != nil {
			l.rdials--
			l.raceConn(m.slot, m.p, m.nc, m.err)
			continue
		}
		p := m.p
		l.queues[p].dialEnded()
		l.ndial--
		if m.err != nil {
			if l.waiting(p) > 0 && !l.stop {
				ps, _ := l.queues[p].next()
				i := ps.i
				l.npend--
				if ps.member {
					l.raceConn(l.member(i), p, nil, m.err)
					l.maybeDial(p)
					continue
				}
				r.dialFailed(m.err)
				r.wg.Add(1)
				l.out = append(l.out, loopDone{i: i, res: r.newResult(i), err: m.err})
			}
			l.maybeDial(p) // for the sends still waiting
			continue
		}
		p.conns.Add(1)
		r.connected.Store(true)
		if c := l.newConn(p, m.nc, 0); c != nil {
			l.release(c)
		} else {
			p.conns.Add(-1)
			_ = m.nc.Close()
		}
		l.maybeDial(p)
	}
}

// prefixConn reads pre before the connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// fallback hands c, whose response the lean parser declined, to a
// goroutine that reads it with net/http's reader and gives c back.
func (l *evloop) fallback(c *loopConn) {
	r := l.r
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	l.busy--
	l.away++
	c.away = true
	pre := slices.Clone(c.buf[:c.n])
	c.n = 0
	i, res, deadline := c.send, c.res, c.deadline
	c.send = -1
	go func() {
		nc, err := goConn(c.fd)
		if err != nil {
			l.post(loopMsg{c: c})
			r.finish(i, res, err)
			r.wg.Done()
			return
		}
		_ = nc.SetDeadline(deadline)
		pc := &prefixConn{Conn: nc, pre: pre}
		h := newH1Conn(pc)
		ttfb := res.TTFB
		reuse, err := r.readH1(i, h, &res)
		if ttfb != 0 {
			res.TTFB = ttfb
		}
		reuse = err == nil && reuse && len(pc.pre) == 0 && h.br.Buffered() == 0
		_ = nc.Close()                      // its duplicate: the loop's descriptor stays open
		l.post(loopMsg{c: c, reuse: reuse}) // first: the connection may be due
		r.finish(i, res, err)
		r.wg.Done()
	}()
}

// dropPending forgets the waiting sends: they were never sent.
func (l *evloop) dropPending() {
	for _, q := range l.queues {
		q.drop(l.r)
	}
	l.npend = 0
	clear(l.members)
	for _, lr := range l.races { // called off: not sent
		for _, sl := range lr.slots {
			if c := sl.c; c != nil {
				sl.c = nil
				c.held, c.slot = false, nil
				l.busy--
				l.r.wg.Done()
				c.send = -1
				l.closeConn(c) // it may hold an incomplete request
			}
		}
	}
	l.races = nil
}

// finishUp returns the idle connections to their pools, for the next run
// (or race) of the engine, and closes the loop's descriptors.
func (l *evloop) finishUp() {
	l.flush()
	for p, idle := range l.idle {
		for _, c := range idle {
			_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
			delete(l.conns, c.fd)
			nc, err := goConn(c.fd)
			_ = unix.Close(c.fd)
			if err != nil {
				p.conns.Add(-1)
				continue
			}
			h := newH1Conn(nc)
			h.pool = p
			h.used = c.used
			h.reader = true // it watches the idle connection, as on the net.Conn path
			p.putIdle(h, c.idleSince)
			go p.readLoop(h)
		}
	}
	for _, c := range l.conns { // cannot happen: the loop ends with none busy
		_ = unix.Close(c.fd)
		c.p.conns.Add(-1)
	}
	_ = unix.Close(l.ep)
	_ = unix.Close(l.tfd)
	_ = unix.Close(l.efd)
}

// putIdle returns an idle connection to the pool's idle list.
func (p *pool) putIdle(c *h1Conn, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.idleSince = since
	if len(p.idle) >= maxIdlePerPool {
		c.close()
		return
	}
	p.idle = append(p.idle, c)
}
