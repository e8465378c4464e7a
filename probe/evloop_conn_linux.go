//go:build linux

package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The event loop's connections: registering a socket, writing a request,
// reading and parsing its response, completing or retrying the send, and
// freeing, closing or timing out the connection.

// newConn registers nc (counted in p.conns) with the loop, which owns it
// from then on (nc itself is closed); nil when it cannot (not a TCP
// socket), nc then untouched.
func (l *evloop) newConn(p *pool, nc net.Conn, used int) *loopConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	// The loop keeps a duplicate of the socket and closes nc: Go's
	// netpoller then forgets the socket (it registered nc's descriptor,
	// edge-triggered, and would wake on every response the loop reads,
	// one epoll_pwait of the runtime's per response).
	fd := -1
	if raw.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }) != nil || err != nil || fd < 0 {
		return nil
	}
	src := localAddr(nc)
	if unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}) != nil {
		_ = unix.Close(fd)
		return nil
	}
	_ = nc.Close() // the duplicate keeps the socket open
	c := &loopConn{fd: fd, p: p, src: src, buf: make([]byte, 4096), send: -1, used: used, idleSince: time.Now()}
	c.br = bufio.NewReaderSize(&c.bbr, 4096)
	l.conns[fd] = c
	return c
}

func (l *evloop) takeIdle(p *pool, now time.Time) *loopConn {
	for {
		idle := l.idle[p]
		if len(idle) == 0 {
			return nil
		}
		c := idle[len(idle)-1]
		l.idle[p] = idle[:len(idle)-1]
		if p.trusts(c.idleSince, now) {
			return c
		}
		l.closeConn(c)
	}
}

// write writes the request of send i on idle connection c.
func (l *evloop) write(c *loopConn, i int) {
	r := l.r
	req := c.p.h1req
	now := time.Now()
	c.send = i
	c.res = r.newResult(i)
	c.res.Src = c.src
	c.res.Sent = r.stamp(now)
	c.gotFirst, c.headDone, c.remain, c.closeAft = false, false, 0, false
	c.deadline = now.Add(r.e.opt.Timeout)
	r.wg.Add(1)
	l.busy++
	n, err := syscall.Write(c.fd, req)
	if err == unix.EAGAIN {
		n, err = 0, nil
	}
	if err != nil {
		l.failed(c, os.NewSyscallError("write", err))
		return
	}
	if n < len(req) {
		c.wrest = req[n:]
		_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLOUT, Fd: int32(c.fd)})
		return
	}
	c.res.Wrote = c.res.Sent
}

// writeRest writes more of a request a full socket buffer held back,
// stamping Wrote before the write that may carry its last byte.
func (l *evloop) writeRest(c *loopConn) {
	at := time.Now()
	n, err := syscall.Write(c.fd, c.wrest)
	if err == unix.EAGAIN {
		return
	}
	if err != nil {
		c.wrest = nil
		l.failed(c, os.NewSyscallError("write", err))
		return
	}
	c.wrest = c.wrest[n:]
	if len(c.wrest) == 0 {
		c.wrest = nil
		c.res.Wrote = l.r.stamp(at)
		_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)})
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// onReadable reads once from c and parses what arrived.
func (l *evloop) onReadable(c *loopConn) {
	if c.send < 0 { // idle: the server closed it, or sent something unasked
		l.closeConn(c)
		return
	}
	n, err := syscall.Read(c.fd, c.buf[c.n:])
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	now := time.Now()
	switch {
	case err != nil:
		l.failed(c, os.NewSyscallError("read", err))
		return
	case n == 0:
		l.failed(c, io.ErrUnexpectedEOF)
		return
	}
	if !c.gotFirst {
		c.gotFirst = true
		c.res.TTFB = l.r.stamp(now)
	}
	c.n += n
	l.parse(c, now)
}

// parse completes what it can of c's response.
func (l *evloop) parse(c *loopConn, now time.Time) {
	r := l.r
	if !c.headDone {
		end := bytes.Index(c.buf[:c.n], crlfcrlf)
		if end < 0 {
			if c.n == len(c.buf) || bytes.Contains(c.buf[:c.n], []byte("\n\n")) {
				l.fallback(c)
			}
			return
		}
		end += len(crlfcrlf)
		c.bbr.Reset(c.buf[:end])
		c.br.Reset(&c.bbr)
		h, err := leanHead(c.br, r.e.opt.Captured, r.e.opt.Method, r.e.opt.MaxHeaderBytes, r.e.opt.MaxBodyBytes)
		if err != nil {
			l.fallback(c)
			return
		}
		c.res.Status = h.status
		if h.header != nil {
			c.res.Headers = r.e.opt.Redactor.Header(h.header)
		}
		if h.arrival != nil {
			r.setArrival(&c.res, string(h.arrival))
		}
		if h.decision != nil {
			setDecision(&c.res, string(h.decision))
		}
		c.headDone, c.remain, c.closeAft = true, h.length, h.close
		c.n = copy(c.buf, c.buf[end:c.n])
	}
	take := min(c.remain, int64(c.n))
	c.remain -= take
	c.n = copy(c.buf, c.buf[take:c.n])
	if c.remain > 0 {
		return
	}
	c.res.Done = r.stamp(now)
	l.complete(c, nil, !c.closeAft && c.n == 0)
}

// complete finishes c's send with err and frees or closes c.
func (l *evloop) complete(c *loopConn, err error, reuse bool) {
	if sl := c.slot; sl != nil { // a race member that failed before its release
		sl.c, c.slot, c.held = nil, nil, false
	}
	l.busy--
	l.out = append(l.out, loopDone{i: c.send, res: c.res, err: err})
	c.send = -1
	if err != nil || !reuse {
		l.closeConn(c)
		return
	}
	c.used++
	l.release(c)
}

// failed ends c's send on a transport error: a request that met a
// connection the server had closed (reused, no response byte) goes again,
// once, on another connection.
func (l *evloop) failed(c *loopConn, err error) {
	i := c.send
	if l.r.d.retry.once(i, failedSend{
		err:       err,
		reused:    c.used > 0,
		answered:  c.gotFirst,
		pinned:    c.slot != nil,
		abandoned: l.r.killed.Load(),
	}) {
		l.busy--
		l.r.wg.Done()
		c.send = -1
		p := c.p
		l.closeConn(c)
		if c := l.takeIdle(p, time.Now()); c != nil {
			l.write(c, i)
			return
		}
		l.queue(p).pushFront(pendingSend{r: l.r, i: i})
		l.npend++
		l.maybeDial(p)
		return
	}
	c.res.Done = 0
	l.complete(c, err, false)
}

// release gives a free connection to its pool's longest waiting send, or
// makes it idle.
func (l *evloop) release(c *loopConn) {
	p := c.p
	if l.waiting(p) > 0 && !l.stop {
		ps, _ := l.queues[p].next()
		l.npend--
		if ps.member {
			l.hold(l.member(ps.i), c)
			return
		}
		l.write(c, ps.i)
		return
	}
	if len(l.idle[p]) >= maxIdlePerPool {
		l.closeConn(c)
		return
	}
	c.idleSince = time.Now()
	l.idle[p] = append(l.idle[p], c)
}

// closeConn closes c and forgets it.
func (l *evloop) closeConn(c *loopConn) {
	if l.conns[c.fd] != c {
		return
	}
	_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	delete(l.conns, c.fd)
	if idle := l.idle[c.p]; len(idle) > 0 {
		if k := slices.Index(idle, c); k >= 0 {
			l.idle[c.p] = slices.Delete(idle, k, k+1)
		}
	}
	_ = unix.Close(c.fd)
	c.p.conns.Add(-1)
	if l.waiting(c.p) > 0 {
		l.maybeDial(c.p)
	}
}

// scanTimeouts fails the sends in flight past their deadline.
func (l *evloop) scanTimeouts(now time.Time) {
	for _, c := range l.conns {
		if c.send >= 0 && !c.away && !c.held && now.After(c.deadline) {
			l.complete(c, fmt.Errorf("read tcp %s: %w", c.src, os.ErrDeadlineExceeded), false)
		}
	}
}

// abandon fails every send in flight (the grace period is over).
func (l *evloop) abandon() {
	for _, c := range l.conns {
		if c.send >= 0 && !c.away {
			l.complete(c, errors.New("request abandoned"), false)
		}
	}
	l.dropPending()
}

// goConn returns a net.Conn on the socket of fd, registered with Go's
// netpoller, for code that reads with net/http's reader; fd stays the
// loop's (the conn holds a duplicate, closed with it).
func goConn(fd int) (net.Conn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(dup), "evloop")
	defer f.Close()
	return net.FileConn(f)
}
