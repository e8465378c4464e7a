//go:build linux

package probe

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"runtime"
	"sync"
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

// sinkEvery and sinkBatch bound how long and how many finished sends wait
// in the loop before their batch goes to the sink: handing over each one
// as it finished woke the sink's thread thousands of times a second, and
// on a small machine each wake-up could preempt the loop's thread — the
// pacing tail. Before a wait longer than sinkEvery the loop hands over
// what it holds.
const (
	sinkEvery = 2 * time.Millisecond
	sinkBatch = 64
)

// loopConn is a keep-alive connection owned by the loop.
type loopConn struct {
	fd        int // the loop's own socket descriptor; closed by closeConn
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

// evloop is the event loop of one run (see above): every field but the
// inbox belongs to the loop's goroutine. Its counters, and what holds
// between them whenever the loop is between two events:
//
//   - Every connection in conns is in exactly one state: idle (send < 0,
//     in idle[c.p]), busy (send >= 0 and not away: its send is written,
//     being written, or, held, a race member's awaiting the release) or
//     away (c.away: out of the epoll set, read by a fallback goroutine).
//     Each is also counted in its pool's p.conns until closeConn.
//   - busy is the number of busy connections, held ones included; it
//     goes up in write and hold, and down in complete (the send's result
//     joins out), in failed's retry, in fallback (the connection goes
//     away) and in dropPending (a race called off).
//   - away is the number of away connections; it goes down when the
//     fallback goroutine's message brings the connection back (drainInbox).
//   - npend is the number of sends waiting in queues (the sum of their
//     len), race members waiting for their dedicated connection included
//     (each also in members, its slot counted in its race's open).
//     dropPending empties the queues and members; after it only a retry
//     (see failed) queues a send again. A waiting send has no connection
//     and holds no count of r.wg.
//   - ndial is the number of dials in progress for waiting sends (the sum
//     of the queues' dials), at most maxSendDials; each posts exactly one
//     message without slot to the inbox.
//   - rdials is the number of race members' dials in progress; each posts
//     exactly one message with its slot.
//   - r.wg: the loop holds one count from startLoop until run returns;
//     each busy connection's send holds one; each result in out, or in a
//     batch sent to the sink and not yet finished, holds one (the sink
//     releases it after run.finish); each fallback goroutine holds one
//     until it has finished its send, which may be after its connection
//     is back. So r.wg.Wait returns only after the loop has ended and
//     every send it took has been finished.
//
// The loop returns when no event is left to dispatch and busy, npend,
// ndial, away and rdials are 0 and no race is prepared: then nothing
// holds a count of r.wg for it and no goroutine will post to its inbox.
type evloop struct {
	r      *run
	ep     int                   // the epoll descriptor
	tfd    int                   // a timerfd in the epoll set: wakes the loop before a deadline
	efd    int                   // an eventfd in the epoll set: wakes the loop for the inbox
	conns  map[int]*loopConn     // by descriptor: every connection the loop owns
	idle   map[*pool][]*loopConn // idle connections per pool, LIFO
	queues map[*pool]*sendQueue  // sends waiting for a connection, and their dials
	npend  int                   // waiting sends, over all queues
	ndial  int                   // dials in progress for waiting sends
	busy   int                   // connections with a send in flight, held ones included
	away   int                   // connections read by a fallback goroutine
	k      int                   // next event
	stop   bool                  // dispatching has stopped (dctx done)
	races  []*loopRace           // prepared, not yet released
	// members are the race members waiting in queues for their dedicated
	// connections (Send.Conn), by send: counted in npend.
	members map[int]*raceSlot
	rdials  int        // race members' dials in progress
	out     []loopDone // finished sends, for the sink's next batch
	sinkCh  chan []loopDone
	free    chan []loopDone // batches the sink is done with
	evs     []unix.EpollEvent
	ts      unix.Timespec // epoll_pwait2's timeout (a field: no allocation per wait)
	// noPwait2: the kernel lacks epoll_pwait2: timerfd and epoll_wait.
	noPwait2 bool

	dispatched chan struct{} // closed when no event is left to dispatch
	closedDisp bool
	flushed    time.Time // when finished sends last went to the sink

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
		queues:     make(map[*pool]*sendQueue),
		members:    make(map[int]*raceSlot),
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
	for _, p := range r.sendPools() {
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
	defer loopStat()() // runs before the thread is unlocked
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
		if len(l.out) >= sinkBatch || now.Sub(l.flushed) >= sinkEvery {
			l.flush()
			l.flushed = now
		}
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
		if len(l.out) > 0 && (wait < 0 || wait > sinkEvery) {
			l.flush() // nothing waits in the loop while it sleeps
			l.flushed = now
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
	for {
		ev, ok := r.event(l.k)
		if !ok {
			break
		}
		at := r.begin.Add(ev.at)
		if at.After(now) {
			return at
		}
		if ev.race != nil {
			l.k++
			l.prepareRace(ev.race)
			continue
		}
		if d := r.d.guard.take(now, 1); d > 0 {
			return now.Add(d)
		}
		if r.crowded(l.k) {
			// A Stream with too many sends in flight: look again once
			// the answers there are have been read.
			return now.Add(crowdedPoll)
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
	p := l.r.bk.pool(i)
	if c := l.takeIdle(p, now); c != nil {
		l.write(c, i)
		return
	}
	l.queue(p).push(pendingSend{r: l.r, i: i})
	l.npend++
	l.maybeDial(p)
}

// queue returns p's queue of waiting sends, creating it.
func (l *evloop) queue(p *pool) *sendQueue {
	q := l.queues[p]
	if q == nil {
		q = new(sendQueue)
		l.queues[p] = q
	}
	return q
}

// waiting returns the number of p's waiting sends.
func (l *evloop) waiting(p *pool) int {
	if q := l.queues[p]; q != nil {
		return q.len()
	}
	return 0
}
