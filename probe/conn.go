package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/rlprobe/rlprobe/record"
)

const (
	// maxIdleAge is how long an idle keep-alive connection is trusted: an
	// older one is closed rather than reused, since servers close idle
	// connections (Apache and Node after 5 s) and a request written into a
	// connection the server is closing fails for no fault of the target.
	maxIdleAge = 4 * time.Second
	// maxIdlePerPool bounds the idle connections a pool keeps.
	maxIdlePerPool = 512
	// maxPredialPerPool bounds the connections dialled ahead of a run.
	maxPredialPerPool = 256
	// predialSlack is the latency a steady stream's pre-dialled connections
	// absorb: a pool with two or more sends due within a millisecond (at
	// distinct instants) gets as many connections as it has sends due
	// within any predialSlack (at most maxPredialPerPool), so that answers
	// slower than usual (a loaded machine's hiccups of several ms) do not
	// leave sends without a connection at their deadline, to dial one
	// late, which costs more CPU than a request and makes the hiccup
	// longer.
	predialSlack = 20 * time.Millisecond
	// predialParallel is how many connections are dialled at once before a
	// run.
	predialParallel = 64
	// maxSendDials is how many connections late sends may be dialling at
	// once (see pool.take).
	maxSendDials = 256
)

// dialMode says which protocols a new connection may speak.
type dialMode int

const (
	dialAny dialMode = iota // HTTP/2 when the target offers it (ALPN) or H2C is set
	dialH1                  // HTTP/1.1 only
	dialH2                  // HTTP/2 only: TLS with ALPN h2, or prior knowledge
)

// defaultDial dials with a net.Dialer bound to src.
func defaultDial(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error) {
	var d net.Dialer
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice(), Zone: src.Zone()}
	}
	return d.DialContext(ctx, network, addr)
}

// stampConn remembers when a Read first returned data since the last
// reset: the time to first byte. The connection's reader sets it and the
// goroutine writing the next request resets it, before that write.
type stampConn struct {
	net.Conn
	base  time.Time    // when the connection was made: origin of first
	first atomic.Int64 // since base (so that the reset is race-free); 0: none since the reset
}

func (c *stampConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.first.Load() == 0 {
		c.first.Store(max(int64(time.Since(c.base)), 1))
	}
	return n, err
}

// resetFirst forgets the first-byte time, before a request is written.
func (c *stampConn) resetFirst() { c.first.Store(0) }

// firstByte returns the first-byte time, or the zero Time.
func (c *stampConn) firstByte() time.Time {
	if d := c.first.Load(); d != 0 {
		return c.base.Add(time.Duration(d))
	}
	return time.Time{}
}

// h1Conn is an HTTP/1.1 connection, owned by one request at a time. Once
// a request has been handed to it (run.handOff), a reader goroutine of its
// own reads every response; until then its owner reads.
type h1Conn struct {
	sc        *stampConn // outermost: above TLS, so TTFB counts application data
	br        *bufio.Reader
	src       string // local address
	used      int    // requests completed on it
	idleSince time.Time
	pool      *pool         // counts it in conns; nil for a connection of no pool
	reader    bool          // the reader goroutine runs; set by the owner
	jobs      chan h1Job    // to the reader: one request written, cap 1
	done      chan struct{} // closed by close
	closeOnce sync.Once
	adoptReq  chan struct{} // closed: the event loop takes c over (see pool.adoptIdle)
	adopted   chan struct{} // closed by the reader when it has let go of c
}

// h1Job is a request written on an h1Conn, for its reader to complete.
type h1Job struct {
	r     *run
	i     int
	p     *pool
	res   record.Result
	werr  error // the write's error: nothing to read
	retry bool  // see completeH1
}

func newH1Conn(c net.Conn) *h1Conn {
	sc := &stampConn{Conn: c, base: time.Now()}
	return &h1Conn{
		sc:       sc,
		br:       bufio.NewReaderSize(sc, 4096),
		src:      localAddr(c),
		jobs:     make(chan h1Job, 1),
		done:     make(chan struct{}),
		adoptReq: make(chan struct{}),
		adopted:  make(chan struct{}),
	}
}

// close closes the connection; its reader, if any, then ends.
func (c *h1Conn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.sc.Close()
		if p := c.pool; p != nil {
			p.conns.Add(-1)
			if p.npending.Load() > 0 {
				go p.dialForPending() // room for a new connection
			}
		}
	})
}

// readLoop is the reader goroutine of c: it waits, blocked in a read, for
// the response to the request its owner writes (which wakes it straight
// from the network poller, without a goroutine hand-off), completes it,
// writes the request of the send waiting in the pool if any (see
// pool.take), and waits for the next. It ends when c is closed, or when c
// breaks while idle in the pool (the server closed it, or sent something
// unasked).
func (p *pool) readLoop(c *h1Conn) {
	for {
		_, err := c.br.Peek(1) // bufio forgets err: the reader meets it again
		var j h1Job
		select {
		case j = <-c.jobs:
		case <-c.done:
			return
		case <-c.adoptReq:
			close(c.adopted)
			return
		default:
			if err != nil && isTimeout(err) && p.clearIdleDeadline(c) {
				continue // the last request's deadline, passed while idle
			}
			if p.removeIdle(c) {
				c.close()
				return
			}
			select { // the owner hands over a request, or closes c
			case j = <-c.jobs:
			case <-c.done:
				return
			case <-c.adoptReq:
				close(c.adopted)
				return
			}
		}
		for {
			keep, ps, more := j.r.completeH1(j.i, j.p, c, j.res, j.werr, j.retry)
			j.r.wg.Done()
			if !keep {
				return
			}
			if !more {
				break
			}
			// A send waiting in the pool goes out on c from here, without
			// a goroutine hand-off.
			if ps.member { // c is the member's now; this reader stays c's
				ps.give(conn{h1: c}, nil)
				break
			}
			var ok bool
			if j, ok = ps.r.writePending(ps.i, p, c); !ok {
				p.putH1(c)
				break
			}
		}
	}
}

// startReader starts c's reader goroutine unless it runs; only c's owner
// calls it.
func (p *pool) startReader(c *h1Conn) {
	if !c.reader {
		c.reader = true
		go p.readLoop(c)
	}
}

// removeIdle takes c off the idle list and reports whether it was there.
func (p *pool) removeIdle(c *h1Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.idle, c); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1)
		return true
	}
	return false
}

// clearIdleDeadline removes c's deadline when c is idle, and reports
// whether it did.
func (p *pool) clearIdleDeadline(c *h1Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Contains(p.idle, c) {
		_ = c.sc.SetDeadline(time.Time{})
		return true
	}
	return false
}

// h2Conn is a multiplexed HTTP/2 connection shared by a pool.
type h2Conn struct {
	cc  *http2.ClientConn
	src string
}

func localAddr(c net.Conn) string {
	if a := c.LocalAddr(); a != nil {
		return a.String()
	}
	return ""
}

// pool holds the connections of one client to one target, and the request
// that client sends there. It is safe for concurrent use.
type pool struct {
	e      *Engine
	t      *target
	client int
	conn   int // Send.Conn: 0 for the shared pool, n ≥ 1 for dedicated connection n
	src    netip.Addr
	label  string      // Result.Client
	h1req  []byte      // the whole HTTP/1.1 request
	header http.Header // request headers for the HTTP/2 path

	conns atomic.Int32 // open HTTP/1.1 connections

	mu       sync.Mutex
	idle     []*h1Conn // LIFO
	h2       []*h2Conn
	queue    sendQueue    // late sends waiting for a connection, and late sends' dials (see take)
	npending atomic.Int32 // queue.len(), read without mu
}

// getH1 returns an idle HTTP/1.1 connection, or nil.
func (p *pool) getH1(now time.Time) *h1Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.getH1Locked(now)
}

func (p *pool) getH1Locked(now time.Time) *h1Conn {
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if p.trusts(c.idleSince, now) {
			return c
		}
		c.close()
	}
	return nil
}

// takeResult says what take found for a send.
type takeResult int

const (
	tookConn    takeResult = iota // an idle HTTP/1.1 connection
	tookSlot                      // a dial slot, released with pool.slotDone
	tookH2                        // nothing: the pool speaks HTTP/2
	tookPending                   // nothing: the send waits in the pool
)

// take finds a way to run send i of r now: an idle HTTP/1.1 connection, or
// (the pool speaking HTTP/2, and h2 set) nothing, or one of the engine's
// dial slots. When every slot is taken, or the pool has maxConns
// connections, it queues the send: the next connection the pool frees
// (putH1), or the next slot released (slotDone) or connection closed while
// the pool is under its cap, whichever comes first, runs it; no goroutine
// waits for it. This keeps an overloaded run (sends due faster than
// answers come back) from turning into a storm of connection attempts, and
// makes the readers of its connections send the backlog themselves. A
// queued send holds its count of r.wg.
func (p *pool) take(r *run, i int, now time.Time, h2 bool) (*h1Conn, takeResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.getH1Locked(now); c != nil {
		return c, tookConn
	}
	if h2 && len(p.h2) > 0 {
		return nil, tookH2
	}
	if p.takeSlotLocked() {
		return nil, tookSlot
	}
	p.queue.push(pendingSend{r: r, i: i})
	p.npending.Store(int32(p.queue.len()))
	return nil, tookPending
}

// takeSlotLocked takes one of the engine's dial slots for a late send of
// p, unless p has maxConns connections open or being dialled.
func (p *pool) takeSlotLocked() bool {
	if !p.queue.mayDial(int(p.conns.Load()), p.connCap()) {
		return false
	}
	select {
	case p.e.dialSem <- struct{}{}:
		p.queue.dialStarted()
		return true
	default:
		return false
	}
}

// slotDone ends a late send's dial (see take) and gives the free slot to
// the sends waiting in any pool.
func (p *pool) slotDone() {
	p.mu.Lock()
	p.queue.dialEnded()
	p.mu.Unlock()
	p.e.dialDone()
}

// putH1 gives a free connection to the longest waiting send, which is
// written on it at once, or returns it to the idle list. The caller owns c
// and gives it up.
func (p *pool) putH1(c *h1Conn) {
	for {
		ps, ok := p.putOrNext(c)
		if !ok {
			return
		}
		if ps.member {
			ps.give(conn{h1: c}, nil)
			return
		}
		if ps.r.startPending(ps.i, p, c) {
			return
		}
	}
}

// putOrNext returns the longest waiting send, for which the caller (owning
// c) is to write its request on c, or returns c to the idle list (ok
// false).
func (p *pool) putOrNext(c *h1Conn) (ps pendingSend, ok bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queue.len() > 0 {
		ps = p.popPendingLocked()
		return ps, true
	}
	c.idleSince = now
	if len(p.idle) >= maxIdlePerPool {
		c.close()
		return ps, false
	}
	p.idle = append(p.idle, c)
	return ps, false
}

// dialForPending gives the engine's free dial slots to the sends waiting
// in p, longest waiting first.
func (p *pool) dialForPending() {
	for {
		p.mu.Lock()
		ps, ok := p.queue.first()
		if !ok {
			p.mu.Unlock()
			return
		}
		stopped := ps.r.dctx.Err() != nil
		if !stopped && !p.takeSlotLocked() {
			p.mu.Unlock()
			return
		}
		p.popPendingLocked()
		p.mu.Unlock()
		switch {
		case ps.member && stopped:
			ps.give(conn{}, context.Cause(ps.r.dctx))
		case ps.member:
			go ps.dialFor(p)
		case stopped:
			ps.r.wg.Done() // not sent: left to the sweep
		default:
			go ps.r.sendNew(ps.i, true)
		}
	}
}

// popPendingLocked removes and returns the longest waiting send.
func (p *pool) popPendingLocked() pendingSend {
	ps, _ := p.queue.next()
	p.npending.Store(int32(p.queue.len()))
	return ps
}

// dropPending removes r's waiting sends from p (the run stopped: they are
// not sent) and returns how many there were.
func (p *pool) dropPending(r *run) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	members := 0
	for _, ps := range p.queue.sends {
		if ps.r == r && ps.member {
			ps.give(conn{}, context.Cause(r.dctx))
			members++
		}
	}
	n := p.queue.drop(r)
	p.npending.Store(int32(p.queue.len()))
	return n - members
}

// idleCount returns the number of idle HTTP/1.1 connections.
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// getH2 reserves a stream on a live HTTP/2 connection, or returns nil.
func (p *pool) getH2() *h2Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.h2[:0]
	var got *h2Conn
	for _, c := range p.h2 {
		st := c.cc.State()
		if st.Closed || st.Closing {
			_ = c.cc.Close()
			continue
		}
		live = append(live, c)
		if got == nil && c.cc.ReserveNewRequest() {
			got = c
		}
	}
	clear(p.h2[len(live):])
	p.h2 = live
	return got
}

func (p *pool) addH2(c *h2Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.h2 = append(p.h2, c)
}

// hasH2 reports whether the pool holds an HTTP/2 connection.
func (p *pool) hasH2() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.h2) > 0
}

// closeAll closes every pooled connection.
func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.close()
	}
	for _, c := range p.h2 {
		_ = c.cc.Close()
	}
	p.idle, p.h2 = nil, nil
}

// dialRaw dials the target from the pool's source address and completes
// the TLS handshake; it returns the connection and whether it speaks
// HTTP/2.
func (p *pool) dialRaw(ctx context.Context, mode dialMode) (net.Conn, bool, error) {
	t := p.t
	ctx, cancel := context.WithTimeout(ctx, p.e.opt.Timeout)
	defer cancel()
	c, err := p.e.dialTarget(ctx, t, p.src)
	if err != nil {
		return nil, false, err
	}
	if !t.tls {
		return c, mode == dialH2 || (mode == dialAny && t.h2c), nil
	}
	cfg := t.tlsAny
	switch mode {
	case dialH1:
		cfg = t.tlsH1
	case dialH2:
		cfg = t.tlsH2
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, false, withClass(record.ErrTLS, fmt.Errorf("tls handshake: %w", err))
	}
	h2 := tc.ConnectionState().NegotiatedProtocol == "h2"
	if mode == dialH2 && !h2 {
		_ = tc.Close()
		return nil, false, withClass(record.ErrTLS, errors.New("server did not negotiate HTTP/2 (ALPN h2)"))
	}
	return tc, h2, nil
}

// conn is what a request gets from getConn: exactly one field is set.
type conn struct {
	h1 *h1Conn
	h2 *h2Conn
}

// dialConn dials a new connection. An HTTP/2 connection joins the pool and
// comes back with a stream reserved when reserve is set.
func (p *pool) dialConn(ctx context.Context, mode dialMode, reserve bool) (conn, error) {
	c, isH2, err := p.dialRaw(ctx, mode)
	if err != nil {
		return conn{}, err
	}
	if !isH2 {
		h := newH1Conn(c)
		h.pool = p
		p.conns.Add(1)
		return conn{h1: h}, nil
	}
	cc, err := p.e.h2t.NewClientConn(c)
	if err != nil {
		_ = c.Close()
		return conn{}, fmt.Errorf("http2 setup: %w", err)
	}
	hc := &h2Conn{cc: cc, src: localAddr(c)}
	if reserve && !cc.ReserveNewRequest() {
		_ = cc.Close()
		return conn{}, errors.New("http2: new connection refused a stream")
	}
	p.addH2(hc)
	return conn{h2: hc}, nil
}

// memberConn is what a race member waiting for its dedicated connection
// gets: the connection, or why it has none.
type memberConn struct {
	c   conn
	err error
}

// give hands the member ps its connection c, or err. It never blocks:
// ready has room for the one answer a member gets.
func (ps pendingSend) give(c conn, err error) {
	ps.ready <- memberConn{c: c, err: err}
}

// dialFor dials the connection of member ps, waiting in p, holding one of
// the engine's dial slots (see dialForPending).
func (ps pendingSend) dialFor(p *pool) {
	c, err := p.dialConn(ps.r.dctx, dialH1, false)
	p.slotDone()
	if err == nil {
		ps.r.connected.Store(true)
	}
	ps.give(c, err)
}

// memberConn gets race member i of pool p its connection. A member of a
// shared pool takes an idle connection or dials one (see getConn). A
// member of a dedicated pool takes its connection when idle, dials it
// when none is open or being dialled, and otherwise waits in the pool's
// queue, as a late send would, for the connection freed (or dialled)
// next; it then holds it until its release.
func (r *run) memberConn(i int, p *pool, mode dialMode) (conn, error) {
	if !p.dedicated() || p.hasH2() {
		return r.getConn(r.dctx, p, mode)
	}
	p.mu.Lock()
	if c := p.getH1Locked(time.Now()); c != nil {
		p.mu.Unlock()
		return conn{h1: c}, nil
	}
	if p.queue.mayDial(int(p.conns.Load()), p.connCap()) {
		p.queue.dialStarted()
		p.mu.Unlock()
		c, err := p.dialConn(r.dctx, mode, true)
		p.countDial(false)
		if err == nil {
			r.connected.Store(true)
		}
		return c, err
	}
	ready := make(chan memberConn, 1)
	p.queue.push(pendingSend{r: r, i: i, member: true, ready: ready})
	p.npending.Store(int32(p.queue.len()))
	p.mu.Unlock()
	m := <-ready // the run's stop answers too (dropPending)
	return m.c, m.err
}
