//go:build linux

package probe

import (
	"errors"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The event loop's batches: preparing every member's connection (and, for
// a last-byte race, all of its request but the final byte), and releasing
// the batch in one pass once it is ready and due.

// loopRace is a batch the loop prepares and releases: every member gets a
// connection of its own (last-byte: with all of its request written but
// the final byte); once every member is ready (or failed) and the release
// is due, one pass writes every final byte (last-byte) or every whole
// request (barrier), in member order.
type loopRace struct {
	at       time.Time
	lastByte bool
	slots    []*raceSlot
	open     int // members neither ready nor failed
	released bool
}

type raceSlot struct {
	lr  *loopRace
	i   int
	c   *loopConn // nil until ready; nil after a failure
	err error
}

// prepareRace gets every member of rc a connection: an idle one of its
// pool, or one dialled for it (races are not bound by the pool's cap, as
// on the net.Conn path). A member on a dedicated connection (Send.Conn)
// that is not idle waits in its pool's queue, like a late send, for the
// connection freed or dialled next (see release).
func (l *evloop) prepareRace(rc *race) {
	r := l.r
	lr := &loopRace{at: r.begin.Add(rc.at), lastByte: r.e.opt.RaceMode == RaceLastByte, open: len(rc.members)}
	l.races = append(l.races, lr)
	now := time.Now()
	for _, i := range rc.members {
		sl := &raceSlot{lr: lr, i: i}
		lr.slots = append(lr.slots, sl)
		p := r.bk.pool(i)
		if c := l.takeIdle(p, now); c != nil {
			l.hold(sl, c)
			continue
		}
		if p.dedicated() {
			l.members[i] = sl
			l.queue(p).push(pendingSend{r: r, i: i, member: true})
			l.npend++
			l.maybeDial(p)
			continue
		}
		l.rdials++
		go func() {
			nc, _, err := p.dialRaw(r.dctx, dialH1)
			l.post(loopMsg{p: p, nc: nc, err: err, slot: sl})
		}()
	}
}

// raceConn gives a dialled connection (or the dial's error) to a member.
func (l *evloop) raceConn(sl *raceSlot, p *pool, nc net.Conn, err error) {
	r := l.r
	if err == nil {
		p.conns.Add(1)
		r.connected.Store(true)
		c := l.newConn(p, nc, 0)
		if c == nil {
			p.conns.Add(-1)
			_ = nc.Close()
			err = errors.New("probe: connection not usable by the event loop")
		} else if l.stop || !slices.Contains(l.races, sl.lr) {
			l.release(c) // the race was called off
			return
		} else {
			l.hold(sl, c)
			return
		}
	}
	if !slices.Contains(l.races, sl.lr) {
		return // called off: not sent
	}
	sl.err = err
	sl.lr.open--
	if r.dialFailed(err) || r.dctx.Err() == nil {
		r.wg.Add(1)
		l.out = append(l.out, loopDone{i: sl.i, res: r.newResult(sl.i), err: err})
	}
}

// hold makes c member sl's connection; last-byte writes all of the request
// but its final byte now.
func (l *evloop) hold(sl *raceSlot, c *loopConn) {
	r := l.r
	lr := sl.lr
	sl.c = c
	lr.open--
	c.held = true
	c.slot = sl
	c.send = sl.i
	c.res = r.newResult(sl.i)
	c.res.Src = c.src
	c.gotFirst, c.headDone, c.remain, c.closeAft = false, false, 0, false
	c.deadline = lr.at.Add(r.e.opt.Timeout)
	r.wg.Add(1)
	l.busy++
	if !lr.lastByte {
		return
	}
	req := c.p.h1req
	c.res.Sent = r.stamp(time.Now())
	n, err := syscall.Write(c.fd, req[:len(req)-1])
	if err == syscall.EAGAIN {
		n, err = 0, nil
	}
	if err != nil {
		l.complete(c, os.NewSyscallError("write", err), false)
		return
	}
	if n < len(req)-1 { // the rest goes with the final byte
		c.wrest = req[n : len(req)-1]
	}
}

// releaseDue releases every prepared race that is due and ready, and
// returns the next release instant (zero: none waits for a time).
func (l *evloop) releaseDue(now time.Time) time.Time {
	var next time.Time
	keep := l.races[:0]
	for _, lr := range l.races {
		switch {
		case lr.open > 0: // members still dialling: released when ready
			keep = append(keep, lr)
		case lr.at.After(now):
			keep = append(keep, lr)
			if next.IsZero() || lr.at.Before(next) {
				next = lr.at
			}
		default:
			n := 0
			for _, sl := range lr.slots {
				if sl.c != nil {
					n++
				}
			}
			if n > 0 {
				if d := l.r.d.guard.take(now, n); d > 0 {
					lr.at = now.Add(d)
					keep = append(keep, lr)
					if next.IsZero() || lr.at.Before(next) {
						next = lr.at
					}
					continue
				}
			}
			l.releaseRace(lr)
		}
	}
	clear(l.races[len(keep):])
	l.races = keep
	return next
}

// releaseRace writes, in one pass and in member order, every member's
// final byte (last-byte) or whole request (barrier), stamping each write.
func (l *evloop) releaseRace(lr *loopRace) {
	r := l.r
	type failure struct {
		c   *loopConn
		err error
	}
	var fails []failure
	for _, sl := range lr.slots {
		c := sl.c
		if c == nil {
			continue
		}
		c.held, c.slot = false, nil
		req := c.p.h1req
		b := req[len(req)-1:]
		at := time.Now()
		if !lr.lastByte {
			b = req
			c.res.Sent = r.stamp(at)
		}
		if len(c.wrest) > 0 { // a prefix the socket held back
			c.wrest = append(slices.Clip(c.wrest), b...)
			_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLOUT, Fd: int32(c.fd)})
			continue
		}
		n, err := syscall.Write(c.fd, b)
		if err == syscall.EAGAIN {
			n, err = 0, nil
		}
		if err != nil {
			fails = append(fails, failure{c, os.NewSyscallError("write", err)})
			continue
		}
		if n < len(b) {
			c.wrest = b[n:]
			_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLOUT, Fd: int32(c.fd)})
			continue
		}
		c.res.Wrote = r.stamp(at)
		c.deadline = at.Add(r.e.opt.Timeout)
	}
	for _, f := range fails {
		l.complete(f.c, f.err, false)
	}
	lr.released = true
}

// member returns, and forgets, the slot of race member i, which waited in
// a queue for its dedicated connection.
func (l *evloop) member(i int) *raceSlot {
	sl := l.members[i]
	delete(l.members, i)
	return sl
}
