//go:build linux

package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rlprobe/rlprobe/record"
)

// The event loop: plain HTTP/1.1 over TCP on Linux, with the default
// dialer. One goroutine, locked to its OS thread, paces the sends (a
// timerfd in its epoll set wakes it loopSpin before each deadline, then it
// spins), writes the pre-built requests on non-blocking sockets, reads and
// parses the responses (leanHead) as epoll reports them, one read per
// readiness, and hands finished results in batches to a sink goroutine.
// No goroutine wakes per request. A response the lean parser declines goes
// to a goroutine that reads it with net/http's reader on the same
// connection (still a net.Conn, which owns the descriptor) and gives the
// connection back. Batches (races, barrier and last-byte) are prepared
// and released by the loop too (prepareRace, releaseRace).

// The loop reads and writes sockets with package syscall's Read and Write,
// which (like net.Conn's) tell the race detector that a write happens
// before the read of its bytes at the other end; x/sys/unix's do not
// share that synchronisation.

// loopSpin is how long before a deadline the loop stops sleeping and spins.
const loopSpin = 20 * time.Microsecond

// loopConn is a keep-alive connection owned by the loop.
type loopConn struct {
	nc        net.Conn // owns fd; closed by closeConn
	fd        int
	p         *pool
	src       string
	buf       []byte // unparsed response bytes: buf[:n]
	n         int
	bbr       bytes.Reader
	br        *bufio.Reader // leanHead's view of a complete head
	send      int           // the send in flight, or -1: idle
	res       record.Result
	gotFirst  bool
	headDone  bool
	remain    int64 // body bytes still to skip
	closeAft  bool  // the response said Connection: close
	wrest     []byte
	deadline  time.Time
	used      int
	idleSince time.Time
	away      bool      // read by a fallback goroutine
	held      bool      // a race member's connection, waiting for the release
	slot      *raceSlot // the race member it serves, until the release
}

// loopDone is a finished send for the sink goroutine; each holds a count
// of run.wg.
type loopDone struct {
	i   int
	res record.Result
	err error
}

// loopMsg is posted to the loop by another goroutine.
type loopMsg struct {
	p     *pool
	nc    net.Conn // a dial's connection, or nil with err
	err   error
	c     *loopConn // a connection back from its fallback reader
	reuse bool
	slot  *raceSlot // the race member a dial was for
}

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

type evloop struct {
	r        *run
	ep       int
	tfd      int
	efd      int
	conns    map[int]*loopConn
	idle     map[*pool][]*loopConn
	pend     map[*pool][]int
	npend    int
	dials    map[*pool]int
	ndial    int
	busy     int
	away     int
	k        int // next event
	stop     bool
	retry    map[int]bool
	races    []*loopRace // prepared, not yet released
	rdials   int         // race members' dials in progress
	out      []loopDone
	sinkCh   chan []loopDone
	free     chan []loopDone // batches the sink is done with
	evs      []unix.EpollEvent
	ts       unix.Timespec // epoll_pwait2's timeout (a field: no allocation per wait)
	noPwait2 bool          // the kernel lacks epoll_pwait2: timerfd and epoll_wait

	dispatched chan struct{} // closed when no event is left to dispatch
	closedDisp bool

	inMu  sync.Mutex
	inbox []loopMsg
}

// loopable reports whether run r uses the event loop.
func (r *run) loopable() bool {
	e := r.e
	if e.noLoop || e.opt.Dial != nil || e.opt.TimerPacing || r.capture || e.proxied() {
		return false
	}
	for _, t := range e.targets {
		if t.tls || t.h2c {
			return false
		}
	}
	return true
}

// startLoop starts the event loop for r's events, when it applies, and
// returns once the loop has dispatched every event or dispatching was
// stopped; the loop then goes on completing the sends in flight. It
// reports false when the loop does not apply (or could not start).
func (r *run) startLoop() bool {
	if !r.loopable() {
		return false
	}
	l := &evloop{
		r:          r,
		conns:      make(map[int]*loopConn),
		idle:       make(map[*pool][]*loopConn),
		pend:       make(map[*pool][]int),
		dials:      make(map[*pool]int),
		retry:      make(map[int]bool),
		sinkCh:     make(chan []loopDone, 1024),
		free:       make(chan []loopDone, 64),
		evs:        make([]unix.EpollEvent, 256),
		dispatched: make(chan struct{}),
	}
	var err error
	if l.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return false
	}
	if l.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		_ = unix.Close(l.ep)
		return false
	}
	if l.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		_ = unix.Close(l.ep)
		_ = unix.Close(l.tfd)
		return false
	}
	for _, fd := range []int{l.tfd, l.efd} {
		_ = unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	}
	// Adopt the idle connections of the run's pools that no reader
	// goroutine watches (those dialled ahead of the run).
	seen := make(map[*pool]bool)
	for _, ev := range r.events {
		if ev.race != nil {
			continue
		}
		p := r.items[ev.idx].pool
		if seen[p] {
			continue
		}
		seen[p] = true
		for _, h := range p.adoptIdle() {
			c := l.newConn(p, h.sc.Conn, h.used)
			if c == nil {
				p.conns.Add(-1)
				_ = h.sc.Conn.Close()
				continue
			}
			c.idleSince = h.idleSince
			l.idle[p] = append(l.idle[p], c)
		}
	}
	r.e.loopRuns.Add(1)
	r.wg.Add(1)
	go l.sink()
	go l.run()
	<-l.dispatched
	return true
}

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

// newConn registers nc (counted in p.conns) with the loop; nil when it
// cannot (not a TCP socket).
func (l *evloop) newConn(p *pool, nc net.Conn, used int) *loopConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	if raw.Control(func(f uintptr) { fd = int(f) }) != nil || fd < 0 {
		return nil
	}
	c := &loopConn{nc: nc, fd: fd, p: p, src: localAddr(nc), buf: make([]byte, 4096), send: -1, used: used, idleSince: time.Now()}
	c.br = bufio.NewReaderSize(&c.bbr, 4096)
	if unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}) != nil {
		return nil
	}
	l.conns[fd] = c
	return c
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

func (l *evloop) closeDispatch() {
	if !l.closedDisp {
		l.closedDisp = true
		close(l.dispatched)
	}
}

// run is the loop. It holds one count of r.wg until it ends.
func (l *evloop) run() {
	r := l.r
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0)
	stopD := context.AfterFunc(r.dctx, l.wake)
	stopR := context.AfterFunc(r.rctx, l.wake)
	defer func() {
		stopD()
		stopR()
		l.finishUp()
		close(l.sinkCh)
		r.wg.Done()
	}()
	abandoned := false
	var nextScan time.Time
	for {
		now := time.Now()
		if !l.stop && r.dctx.Err() != nil {
			l.stop = true
			l.dropPending()
			l.closeDispatch()
		}
		if !abandoned && r.rctx.Err() != nil {
			abandoned = true
			l.abandon()
		}
		var next time.Time // the next deadline, if any
		if !l.stop {
			next = l.dispatchDue(now)
			if next.IsZero() && len(l.races) == 0 {
				l.closeDispatch()
			}
			if rn := l.releaseDue(time.Now()); !rn.IsZero() && (next.IsZero() || rn.Before(next)) {
				next = rn
			}
		}
		if l.busy > 0 && !now.Before(nextScan) {
			l.scanTimeouts(now)
			nextScan = now.Add(time.Millisecond)
		}
		l.flush()
		if next.IsZero() && l.busy == 0 && l.npend == 0 && l.ndial == 0 && l.away == 0 && l.rdials == 0 && len(l.races) == 0 {
			return
		}
		wait := time.Duration(-1) // until something happens
		spin := false
		if !next.IsZero() {
			d := next.Sub(time.Now())
			if d <= loopSpin {
				// Close to the deadline: take what is ready (without
				// waiting) and spin only when nothing is, so that sends
				// due every few µs do not starve the reads.
				wait, spin = 0, true
			} else {
				wait = d - loopSpin
			}
		}
		if l.busy > 0 || l.away > 0 || l.ndial > 0 || l.rdials > 0 {
			// Timeouts and abandons are checked at least this often.
			wait = time.Duration(min(uint64(wait), uint64(5*time.Millisecond)))
		}
		n, err := l.wait(wait)
		if spin && n <= 0 {
			for time.Now().Before(next) {
			}
			continue
		}
		if err != nil && err != unix.EINTR {
			// Cannot happen with valid descriptors; fail what is in flight.
			l.abandon()
			l.stop = true
			l.dropPending()
			l.closeDispatch()
			continue
		}
		l.handle(n)
	}
}

// handle processes the first n events of l.evs.
func (l *evloop) handle(n int) {
	for _, ev := range l.evs[:max(n, 0)] {
		fd := int(ev.Fd)
		switch fd {
		case l.tfd, l.efd:
			var b [8]byte
			_, _ = unix.Read(fd, b[:])
			if fd == l.efd {
				l.drainInbox()
			}
			continue
		}
		c := l.conns[fd]
		if c == nil || c.away {
			continue
		}
		if ev.Events&unix.EPOLLOUT != 0 && len(c.wrest) > 0 {
			l.writeRest(c)
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && l.conns[fd] == c {
			l.onReadable(c)
		}
	}
}

// wait waits up to d (forever when negative) for events into l.evs. It
// uses epoll_pwait2, whose timeout has nanosecond resolution (one system
// call per wait), or, on kernels before 5.11, a timerfd armed for d in the
// epoll set (epoll_wait's own timeout is in milliseconds).
func (l *evloop) wait(d time.Duration) (int, error) {
	if !l.noPwait2 {
		tsp := uintptr(0)
		if d >= 0 {
			l.ts = unix.NsecToTimespec(int64(d))
			tsp = uintptr(unsafe.Pointer(&l.ts))
		}
		n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.ep), uintptr(unsafe.Pointer(&l.evs[0])), uintptr(len(l.evs)), tsp, 0, 0)
		if e != unix.ENOSYS {
			if e != 0 {
				return 0, e
			}
			return int(n), nil
		}
		l.noPwait2 = true
	}
	timeout := -1
	if d >= 0 {
		if d < time.Millisecond {
			its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
			_ = unix.TimerfdSettime(l.tfd, 0, &its, nil)
		} else {
			timeout = int(d / time.Millisecond)
		}
	}
	return unix.EpollWait(l.ep, l.evs, timeout)
}

// dispatchDue sends every event due by now and returns the next deadline
// (zero: no event left).
func (l *evloop) dispatchDue(now time.Time) time.Time {
	r := l.r
	sent := 0
	for l.k < len(r.events) {
		ev := r.events[l.k]
		at := r.begin.Add(ev.at)
		if at.After(now) {
			return at
		}
		if ev.race != nil {
			l.k++
			l.prepareRace(ev.race)
			continue
		}
		if !r.e.lim.AllowN(now, 1) { // (AllowN does not allocate; ReserveN does)
			rv := r.e.lim.ReserveN(now, 1)
			d := rv.DelayFrom(now)
			rv.CancelAt(now)
			if d > 0 {
				return now.Add(d)
			}
		}
		l.k++
		l.send(ev.idx, now)
		now = time.Now()
		if sent++; sent%readEvery == 0 && l.busy > 0 {
			// A long burst: take the answers already there, so that their
			// times are not stamped only after the last write.
			n, _ := l.wait(0)
			l.handle(n)
		}
	}
	return time.Time{}
}

// readEvery is how many sends in a row the loop writes before it reads
// what has arrived meanwhile.
const readEvery = 16

// send runs send i on an idle connection of its pool, or queues it for
// the next one freed or dialled.
func (l *evloop) send(i int, now time.Time) {
	p := l.r.items[i].pool
	if c := l.takeIdle(p, now); c != nil {
		l.write(c, i)
		return
	}
	l.pend[p] = append(l.pend[p], i)
	l.npend++
	l.maybeDial(p)
}

func (l *evloop) takeIdle(p *pool, now time.Time) *loopConn {
	for {
		idle := l.idle[p]
		if len(idle) == 0 {
			return nil
		}
		c := idle[len(idle)-1]
		l.idle[p] = idle[:len(idle)-1]
		if now.Sub(c.idleSince) < maxIdleAge {
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
	if c.slot == nil && !c.gotFirst && c.used > 0 && !l.retry[i] && l.r.retryable(err) {
		l.retry[i] = true
		l.busy--
		l.r.wg.Done()
		c.send = -1
		p := c.p
		l.closeConn(c)
		if c := l.takeIdle(p, time.Now()); c != nil {
			l.write(c, i)
			return
		}
		l.pend[p] = slices.Insert(l.pend[p], 0, i)
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
	if q := l.pend[p]; len(q) > 0 && !l.stop {
		i := q[0]
		l.pend[p] = q[1:]
		l.npend--
		l.write(c, i)
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
	_ = c.nc.Close()
	c.p.conns.Add(-1)
	if len(l.pend[c.p]) > 0 {
		l.maybeDial(c.p)
	}
}

// maybeDial dials for p's waiting sends, within the pool's and the
// engine's bounds; the connection is posted back to the loop.
func (l *evloop) maybeDial(p *pool) {
	r := l.r
	for len(l.pend[p]) > l.dials[p] && int(p.conns.Load())+l.dials[p] < r.e.maxConns && l.ndial < maxSendDials && !l.stop {
		l.dials[p]++
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
		l.dials[p]--
		l.ndial--
		if m.err != nil {
			if q := l.pend[p]; len(q) > 0 && !l.stop {
				i := q[0]
				l.pend[p] = q[1:]
				l.npend--
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
		_ = c.nc.SetDeadline(deadline)
		pc := &prefixConn{Conn: c.nc, pre: pre}
		h := newH1Conn(pc)
		ttfb := res.TTFB
		reuse, err := r.readH1(i, h, &res)
		if ttfb != 0 {
			res.TTFB = ttfb
		}
		reuse = err == nil && reuse && len(pc.pre) == 0 && h.br.Buffered() == 0
		if reuse {
			reuse = c.nc.SetDeadline(time.Time{}) == nil
		}
		l.post(loopMsg{c: c, reuse: reuse}) // first: the connection may be due
		r.finish(i, res, err)
		r.wg.Done()
	}()
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

// dropPending forgets the waiting sends: they were never sent.
func (l *evloop) dropPending() {
	clear(l.pend)
	l.npend = 0
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
			h := newH1Conn(c.nc)
			h.pool = p
			h.used = c.used
			h.reader = true // it watches the idle connection, as on the net.Conn path
			p.putIdle(h, c.idleSince)
			go p.readLoop(h)
		}
	}
	for _, c := range l.conns { // cannot happen: the loop ends with none busy
		_ = c.nc.Close()
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

// prepareRace gets every member of rc a connection: an idle one of its
// pool, or one dialled for it (races are not bound by the pool's cap, as
// on the net.Conn path).
func (l *evloop) prepareRace(rc *race) {
	r := l.r
	lr := &loopRace{at: r.begin.Add(rc.at), lastByte: r.e.opt.RaceMode == RaceLastByte, open: len(rc.members)}
	l.races = append(l.races, lr)
	now := time.Now()
	for _, i := range rc.members {
		sl := &raceSlot{lr: lr, i: i}
		lr.slots = append(lr.slots, sl)
		p := r.items[i].pool
		if c := l.takeIdle(p, now); c != nil {
			l.hold(sl, c)
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
				rv := l.r.e.lim.ReserveN(now, n)
				if d := rv.DelayFrom(now); rv.OK() && d > 0 {
					rv.CancelAt(now)
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
