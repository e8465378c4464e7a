package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// aLongTimeAgo is a deadline in the past, to unblock a read at once.
var aLongTimeAgo = time.Unix(1, 0)

// event is a step of the dispatcher: one send, or the preparation of a
// batch.
type event struct {
	at   time.Duration // offset from begin
	idx  int           // the send, when race is nil
	race *race
}

// race is one batch.
type race struct {
	at      time.Duration // release offset
	members []int         // send indexes
}

// run is the state of one Run, Stream or Preflight.
type run struct {
	e           *Engine
	zero, begin time.Time
	sink        Sink
	base        int64 // Seq of send 0
	// bk holds the state of the sends in flight (all of a Run's sends).
	bk *book
	// events are a Run's dispatcher steps, sorted; a Stream's are its
	// sends in source order, read through event (see stream.go).
	events  []event
	st      *streamSrc // a Stream's source; nil for Run and Preflight
	capture bool       // keep the first body bytes (Preflight)
	d       *dispatcher

	parent  context.Context
	dctx    context.Context // dispatching: ends on cancel or abort
	dcancel context.CancelCauseFunc
	rctx    context.Context // requests in flight: ends when the grace runs out
	rcancel context.CancelFunc

	// done counts the sends finished (see crowded), and
	// freedCh wakes a dispatcher waiting for one.
	done      atomic.Int64
	freedCh   chan struct{}
	connected atomic.Bool // some connection to the target worked
	killed    atomic.Bool // requests in flight were abandoned
	wg        sync.WaitGroup

	mu       sync.Mutex      // guards the fields below
	results  []record.Result // by send: a Run's results (nil in a Stream)
	counts   StreamCounts    // the results written
	consec   int             // consecutive transport errors
	abortErr error
	sinkErr  error
	lastErr  error
	body     []byte // Preflight's body bytes
}

// newRun returns the state of a run of n sends (a Run's or a Preflight's),
// their results kept, or, with n < 0, of a Stream, whose Seqs are taken
// when it ends (see streamSrc.close).
func (e *Engine) newRun(ctx context.Context, zero, begin time.Time, n int, sink Sink) *run {
	r := &run{
		e:      e,
		zero:   zero,
		begin:  begin,
		sink:   sink,
		parent: ctx,
		d:      newDispatcher(e),
	}
	e.mu.Lock()
	r.base = e.seq
	if n >= 0 {
		e.seq += int64(n)
		r.bk = bookFor(n)
		r.results = make([]record.Result, n)
	} else {
		r.bk = newBook(streamDirBits)
	}
	e.mu.Unlock()
	r.dctx, r.dcancel = context.WithCancelCause(ctx)
	r.rctx, r.rcancel = context.WithCancel(context.WithoutCancel(ctx))
	return r
}

// stamp returns t as nanoseconds since zero for an event that happened: a
// result of exactly 0 (which means "did not happen") becomes 1.
func (r *run) stamp(t time.Time) int64 {
	if d := t.Sub(r.zero).Nanoseconds(); d != 0 {
		return d
	}
	return 1
}

// newResult returns the result of send i with its identity filled in.
func (r *run) newResult(i int) record.Result {
	return r.resultOf(i, r.bk.send(i), r.bk.pool(i))
}

// resultOf returns the result of send i, s, of pool p, with its identity
// filled in.
func (r *run) resultOf(i int, s Send, p *pool) record.Result {
	return record.Result{
		Type:   record.TypeResult,
		Seq:    r.base + int64(i),
		Agent:  r.e.opt.Agent,
		Client: p.label,
		Method: r.e.opt.Method,
		URL:    p.t.redacted,
		Phase:  s.Phase,
		Sched:  r.begin.Add(s.At).Sub(r.zero).Nanoseconds(),
	}
}

// plan assigns every send its pool (round-robin over the URLs per client;
// batch members spread over all URLs) and builds the dispatcher's events.
func (r *run) plan(sends []Send) {
	e := r.e
	n := len(e.targets)
	batches := make(map[int]*race)
	e.mu.Lock()
	urls := make([]int, len(sends))
	for i, s := range sends {
		if s.Batch == 0 {
			urls[i] = e.rr[s.Client] % n
			e.rr[s.Client]++
			r.events = append(r.events, event{at: s.At, idx: i})
			continue
		}
		rc := batches[s.Batch]
		if rc == nil {
			rc = &race{at: s.At}
			batches[s.Batch] = rc
			r.events = append(r.events, event{at: s.At - e.opt.RaceHold, race: rc})
		}
		urls[i] = len(rc.members) % n
		rc.members = append(rc.members, i)
	}
	e.mu.Unlock()
	for i, s := range sends {
		p := e.pool(s.Client, urls[i], s.Conn)
		if _, err := r.bk.add(s, p); err != nil {
			panic(err) // cannot happen: bookFor made room for every send
		}
	}
	r.mu.Lock()
	r.bk.seal()
	r.mu.Unlock()
	slices.SortStableFunc(r.events, func(a, b event) int { return int(a.at - b.at) })
}

// predial dials, before the first deadline, as many connections per pool as
// the pool has sends due within any millisecond (HTTP/2 pools: one). It
// reports false when the run must not start: the first connection failed
// (the first send then carries the error and the run is aborted) or ctx was
// cancelled.
func (r *run) predial() bool {
	type need struct {
		p     *pool
		first int // the pool's first send
		ats   []time.Duration
		n     int
	}
	var needs []*need
	byPool := make(map[*pool]*need)
	var first event
	for k := 0; ; k++ {
		ev, ok := r.event(k)
		if k == 0 {
			first = ev
		}
		if !ok || !r.predialing(k, ev, first) {
			break
		}
		if ev.race != nil {
			continue
		}
		p := r.bk.pool(ev.idx)
		nd := byPool[p]
		if nd == nil {
			nd = &need{p: p, first: ev.idx}
			byPool[p] = nd
			needs = append(needs, nd)
		}
		nd.ats = append(nd.ats, ev.at)
	}
	for _, nd := range needs {
		nd.n = maxWithin(nd.ats, time.Millisecond)
		if nd.n >= 2 && nd.ats[len(nd.ats)-1] > nd.ats[0] {
			// A fast stream, not a burst: room for answers slower than 1 ms.
			nd.n = max(nd.n, maxWithin(nd.ats, predialSlack))
		}
		nd.n = min(nd.n, maxPredialPerPool, nd.p.connCap())
		if nd.p.hasH2() {
			nd.n = 0
		} else if idle := nd.p.idleCount(); idle > 0 {
			r.connected.Store(true)
			nd.n -= idle
		}
	}
	// Dial one connection per pool first (it tells whether the target
	// speaks HTTP/2), the very first alone unless something is connected.
	sem := make(chan struct{}, predialParallel)
	var wg sync.WaitGroup
	dialOne := func(nd *need) {
		c, err := nd.p.dialConn(r.dctx, dialAny, false)
		if err != nil {
			if r.dialFailed(err) {
				r.finish(nd.first, r.newResult(nd.first), err)
			}
			nd.n = 0
			return
		}
		r.connected.Store(true)
		if c.h1 == nil {
			nd.n = 0 // HTTP/2: one connection carries every request
			return
		}
		nd.p.putH1(c.h1)
		nd.n--
	}
	for _, nd := range needs {
		if nd.n <= 0 {
			continue
		}
		if !r.connected.Load() {
			dialOne(nd)
			if r.dctx.Err() != nil {
				return false
			}
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			dialOne(nd)
		})
	}
	wg.Wait()
	for _, nd := range needs {
		for range max(nd.n, 0) {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if c, err := nd.p.dialConn(r.dctx, dialH1, false); err == nil {
					nd.p.putH1(c.h1)
				}
			})
		}
	}
	wg.Wait()
	return r.dctx.Err() == nil
}

// maxWithin returns the largest number of offsets of ats (sorted) within
// any window of length w.
func maxWithin(ats []time.Duration, w time.Duration) int {
	n, lo := 0, 0
	for hi, at := range ats {
		for at-ats[lo] >= w {
			lo++
		}
		n = max(n, hi-lo+1)
	}
	return n
}

// dispatch walks the events at their deadlines until the end or until
// dctx is done.
func (r *run) dispatch() {
	if r.startLoop() { // plain HTTP/1.1 on Linux: the event loop sends
		return
	}
	p := r.e.pacer
	p.start()
	defer p.stop()
	for k := 0; ; k++ {
		ev, ok := r.event(k)
		if !ok {
			return
		}
		p.wait(r.dctx, r.begin.Add(ev.at))
		if r.dctx.Err() != nil {
			return
		}
		if ev.race != nil {
			r.wg.Add(1)
			go r.race(ev.race)
			continue
		}
		if !r.guard(p, 1) || !r.room(k) {
			return
		}
		r.send(ev.idx)
	}
}

// guard takes n tokens from the MaxRate guard, waiting as long as it says.
// It reports false when dctx ended during the wait.
func (r *run) guard(p pacer, n int) bool {
	now := time.Now()
	if d, rv := r.d.guard.reserve(now, n); d > 0 {
		p.wait(r.dctx, now.Add(d))
		if r.dctx.Err() != nil {
			rv.CancelAt(time.Now())
			return false
		}
	}
	return true
}

// send starts send i now. With an idle HTTP/1.1 connection at hand the
// dispatcher writes the request itself and hands the connection to its
// reader goroutine, which keeps a goroutine hand-off off the critical path;
// otherwise a goroutine dials or uses HTTP/2, or the send waits in its pool
// for a connection (see pool.take).
func (r *run) send(i int) {
	p := r.bk.pool(i)
	r.wg.Add(1)
	c, took := p.take(r, i, time.Now(), true)
	switch took {
	case tookConn:
		res := r.newResult(i)
		err := r.writeH1(c, p.h1req, &res)
		r.handTo(i, p, c, res, err, true)
	case tookSlot:
		go r.sendNew(i, true)
	case tookH2:
		go r.sendNew(i, false)
	}
}

// handOff gives the request of send i just written on c (werr: the write's
// error) to c's reader goroutine, starting it on c's first request; the
// reader completes the send (see completeH1). c must not be used until the
// reader returns it to p.
func (r *run) handOff(i int, p *pool, c *h1Conn, res record.Result, werr error, retry bool) {
	r.wg.Add(1)
	r.handTo(i, p, c, res, werr, retry)
}

// handTo is handOff for a send whose count of r.wg is already taken.
func (r *run) handTo(i int, p *pool, c *h1Conn, res record.Result, werr error, retry bool) {
	r.bk.reading(i).Store(c) // from now on, settle can abandon the read
	if r.rctx.Err() != nil {
		_ = c.sc.SetDeadline(aLongTimeAgo)
	}
	p.startReader(c)
	c.jobs <- h1Job{r: r, i: i, p: p, res: res, werr: werr, retry: retry}
}

// writePending writes the request of send i, which waited in pool p, on c
// and returns the job of c's reader. When the run has stopped meanwhile it
// writes nothing and reports false: the send is left to the sweep.
func (r *run) writePending(i int, p *pool, c *h1Conn) (h1Job, bool) {
	if r.dctx.Err() != nil {
		r.wg.Done()
		return h1Job{}, false
	}
	res := r.newResult(i)
	err := r.writeH1(c, p.h1req, &res)
	r.bk.reading(i).Store(c) // from now on, settle can abandon the read
	if r.rctx.Err() != nil {
		_ = c.sc.SetDeadline(aLongTimeAgo)
	}
	return h1Job{r: r, i: i, p: p, res: res, werr: err, retry: true}, true
}

// startPending runs send i, which waited in pool p, on c (not c's reader)
// and reports whether it did (see writePending).
func (r *run) startPending(i int, p *pool, c *h1Conn) bool {
	j, ok := r.writePending(i, p, c)
	if !ok {
		return false
	}
	p.startReader(c)
	c.jobs <- j
	return true
}

// sendNew runs send i, which found no idle HTTP/1.1 connection at its
// deadline, on a pooled HTTP/2 stream or, holding a dial slot (slot), on a
// new connection. Without a slot and without a live HTTP/2 connection, it
// goes the way of any late send (pool.take). The caller has done
// r.wg.Add(1) for the send.
func (r *run) sendNew(i int, slot bool) {
	p := r.bk.pool(i)
	res := r.newResult(i)
	if h := p.getH2(); h != nil {
		if slot {
			p.slotDone()
		}
		defer r.wg.Done()
		r.roundTripH2(i, p, h, res)
		return
	}
	if !slot {
		// No stream to be had (the connections are gone or full): a new
		// connection, as for any late send.
		c, took := p.take(r, i, time.Now(), false)
		switch took {
		case tookConn:
			err := r.writeH1(c, p.h1req, &res)
			r.handTo(i, p, c, res, err, true)
			return
		case tookPending:
			return
		}
	}
	c, err := p.dialConn(r.rctx, dialAny, true)
	p.slotDone()
	if err != nil {
		r.dialFailed(err)
		r.finish(i, res, err)
		r.wg.Done()
		return
	}
	r.connected.Store(true)
	if c.h2 != nil {
		defer r.wg.Done()
		r.roundTripH2(i, p, c.h2, res)
		return
	}
	err = r.writeH1(c.h1, p.h1req, &res)
	r.handTo(i, p, c.h1, res, err, true)
}

// dropPending removes the run's sends still waiting in a pool: they are
// not sent (the sweep records them).
func (r *run) dropPending() {
	seen := make(map[*pool]bool)
	r.bk.live(func(c *sendChunk) {
		for _, p := range c.pools {
			if p != nil && !seen[p] {
				seen[p] = true
				for range p.dropPending(r) {
					r.wg.Done()
				}
			}
		}
	})
}

// getConn returns a reserved HTTP/2 stream or an idle HTTP/1.1 connection
// of p, or dials one.
func (r *run) getConn(ctx context.Context, p *pool, mode dialMode) (conn, error) {
	if mode != dialH1 {
		if h := p.getH2(); h != nil {
			return conn{h2: h}, nil
		}
	}
	if mode != dialH2 {
		if c := p.getH1(time.Now()); c != nil {
			return conn{h1: c}, nil
		}
	}
	c, err := p.dialConn(ctx, mode, true)
	if err != nil {
		return conn{}, err // the caller decides about dialFailed
	}
	r.connected.Store(true)
	return c, nil
}

// dialFailed aborts the run when no connection has worked yet; it reports
// whether it did, in which case the failed sends carry the error (while
// sends that fail because of the abort are left to the sweep).
func (r *run) dialFailed(err error) bool {
	if r.connected.Load() || r.dctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abortLocked(fmt.Errorf("first connection failed: %w", err))
	return true
}

// writeH1 writes the whole request b on c in one write, stamping Sent and
// Wrote just before it (see the package documentation: Wrote is a lower
// bound of the moment the server can have the whole request).
func (r *run) writeH1(c *h1Conn, b []byte, res *record.Result) error {
	now := time.Now()
	res.Src = c.src
	res.Sent = r.stamp(now)
	if err := c.sc.SetDeadline(now.Add(r.e.opt.Timeout)); err != nil {
		return err
	}
	c.sc.resetFirst()
	if _, err := c.sc.Write(b); err != nil {
		return err
	}
	res.Wrote = res.Sent
	return nil
}

// completeH1 reads the response to a request written on c (werr is the
// write's error), returns c to its pool or closes it, and finishes the
// result. A request that failed on a reused connection before any response
// byte (the server had closed it) is retried once on a new connection when
// retry is set and the method is idempotent. It reports whether c is still
// the caller's (c's reader goroutine, the only caller): then c went back
// to the pool, or, when more is set, the caller is to send next, which
// waited in the pool, on it.
func (r *run) completeH1(i int, p *pool, c *h1Conn, res record.Result, werr error, retry bool) (kept bool, next pendingSend, more bool) {
	err := werr
	reuse := false
	if err == nil {
		reuse, err = r.readH1(i, c, &res)
	}
	own := c
	if err != nil && r.d.retry.once(i, failedSend{
		err:       err,
		reused:    c.used > 0,
		answered:  res.TTFB != 0,
		pinned:    !retry,
		abandoned: r.killed.Load(),
	}) {
		// The retry's dial counts in the pool's cap from before c is
		// closed, so that a dedicated connection (cap 1) is not dialled
		// twice, for the retry and for a send waiting in the pool.
		p.countDial(true)
		c.close()
		res = r.newResult(i)
		var nc conn
		nc, err = r.getConnNew(p)
		p.countDial(false)
		if err != nil {
			r.finish(i, res, err)
			return false, next, false
		}
		c = nc.h1 // read here: it has no reader goroutine yet
		if err = r.writeH1(c, p.h1req, &res); err == nil {
			reuse, err = r.readH1(i, c, &res)
		}
	}
	switch {
	case err != nil || !reuse:
		c.close()
	case c != own:
		c.used++
		p.putH1(c) // the retry's connection, which has no reader yet
	default:
		c.used++
		kept = true
		next, more = p.putOrNext(c)
	}
	r.finish(i, res, err)
	return kept, next, more
}

// countDial counts the start (start set) or the end of a dial of p made
// outside its queue (a retry's, a race member's) in p's cap (see
// sendQueue.mayDial); at its end, the sends waiting in p may dial again.
func (p *pool) countDial(start bool) {
	p.mu.Lock()
	if start {
		p.queue.dialStarted()
	} else {
		p.queue.dialEnded()
	}
	p.mu.Unlock()
	if !start && p.npending.Load() > 0 {
		go p.dialForPending()
	}
}

// getConnNew dials a new HTTP/1.1 connection for a retry.
func (r *run) getConnNew(p *pool) (conn, error) {
	return p.dialConn(r.rctx, dialH1, false)
}

// readH1 reads the response to send i from c into res and reports whether
// c can carry another request. The common response is parsed by leanHead,
// any other by net/http's reader.
func (r *run) readH1(i int, c *h1Conn, res *record.Result) (reuse bool, err error) {
	// Registered, the read is abandoned at the end of the grace period
	// (settle); registering after that abandons it here.
	rd := r.bk.reading(i)
	rd.Store(c)
	defer rd.Store(nil)
	if r.rctx.Err() != nil {
		_ = c.sc.SetDeadline(aLongTimeAgo)
	}
	if !r.capture {
		h, err := leanHead(c.br, r.e.opt.Captured, r.e.opt.Method, r.e.opt.MaxHeaderBytes, r.e.opt.MaxBodyBytes)
		if err == nil {
			return r.leanBody(c, res, &h)
		}
		if err != errNeedFallback {
			return false, err
		}
	}
	// net/http's reader parses the head, read first within the cap (and
	// interim 1xx heads skipped), then reads the body from where the head
	// ends.
	var head []byte
	for {
		if head, err = readHead(c.br, r.e.opt.MaxHeaderBytes); err != nil {
			return false, err
		}
		if !interimHead(head) {
			break
		}
	}
	fb := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(head), c.br), len(head)+512)
	resp, err := http.ReadResponse(fb, r.e.respReq)
	if err != nil {
		return false, err
	}
	if t := c.sc.firstByte(); !t.IsZero() {
		res.TTFB = r.stamp(t)
	}
	res.Status = resp.StatusCode
	r.captureHeaders(res, resp.Header, head)
	n, berr := r.drain(resp.Body)
	_ = resp.Body.Close()
	res.Done = r.stamp(time.Now())
	if berr != nil {
		// The status arrived, so this is a response; the connection is done.
		res.ErrMsg = r.e.opt.Redactor.Text("reading body: " + berr.Error())
		return false, nil
	}
	reuse = !resp.Close && n <= r.e.opt.MaxBodyBytes && fb.Buffered() == 0 && c.br.Buffered() == 0 &&
		resp.StatusCode != http.StatusSwitchingProtocols &&
		(resp.ContentLength >= 0 || slices.Contains(resp.TransferEncoding, "chunked"))
	return reuse, nil
}

// leanBody completes a response whose head leanHead parsed: it skips the
// Content-Length body and fills res.
func (r *run) leanBody(c *h1Conn, res *record.Result, h *h1Head) (reuse bool, err error) {
	if t := c.sc.firstByte(); !t.IsZero() {
		res.TTFB = r.stamp(t)
	}
	res.Status = h.status
	if h.header != nil {
		res.Headers = r.e.opt.Redactor.Header(h.header)
	}
	if h.arrival != nil {
		r.setArrival(res, string(h.arrival))
	}
	if h.decision != nil {
		setDecision(res, string(h.decision))
	}
	_, berr := c.br.Discard(int(h.length))
	res.Done = r.stamp(time.Now())
	if berr != nil {
		if errors.Is(berr, io.EOF) {
			berr = io.ErrUnexpectedEOF
		}
		res.ErrMsg = r.e.opt.Redactor.Text("reading body: " + berr.Error())
		return false, nil
	}
	return !h.close && c.br.Buffered() == 0, nil
}

// abandonReads unblocks every response read in progress; settle calls it
// once the grace period is over and rctx is cancelled.
func (r *run) abandonReads() {
	r.bk.live(func(ch *sendChunk) {
		for i := range ch.reading {
			if c := ch.reading[i].Load(); c != nil {
				_ = c.sc.SetDeadline(aLongTimeAgo)
			}
		}
	})
}

// drain reads a response body up to MaxBodyBytes+1 bytes, keeping the
// first PreflightBodyBytes in a Preflight, and returns how many it read.
func (r *run) drain(body io.Reader) (int64, error) {
	if r.capture {
		var buf bytes.Buffer
		n, err := io.CopyN(&buf, body, PreflightBodyBytes)
		r.mu.Lock()
		r.body = buf.Bytes()
		r.mu.Unlock()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return n, err
		}
		m, err := io.CopyN(io.Discard, body, r.e.opt.MaxBodyBytes+1-n)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n + m, err
	}
	n, err := io.CopyN(io.Discard, body, r.e.opt.MaxBodyBytes+1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// captureHeaders keeps the captured response headers (redacted), named
// as the server spelled them: head is the raw HTTP/1.1 head h was parsed
// from (net/http canonicalises the names), nil for HTTP/2, whose names are
// lower case. It also keeps the arrival echo.
func (r *run) captureHeaders(res *record.Result, h http.Header, head []byte) {
	var out http.Header
	for _, name := range r.e.opt.Captured {
		if vs := h[name]; len(vs) > 0 {
			if out == nil {
				out = make(http.Header)
			}
			key := strings.ToLower(name)
			if head != nil {
				key = spelledName(head, name)
			}
			out[key] = slices.Clone(vs)
		}
	}
	res.Headers = r.e.opt.Redactor.Header(out)
	if v := h.Get(headers.ArrivalHeader); v != "" {
		r.setArrival(res, v)
	}
	if v := h.Get(headers.DecisionHeader); v != "" {
		setDecision(res, v)
	}
}

// setDecision sets res.Decision from the reference server's decision
// number v; an invalid value is ignored.
func setDecision(res *record.Result, v string) {
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		res.Decision = &n
	}
}

// setArrival sets res.Arrival from the arrival echo v (Unix nanoseconds,
// wall clock); an invalid echo is ignored.
func (r *run) setArrival(res *record.Result, v string) {
	if ns, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		now := time.Now()
		a := sinceZero(ns, now.UnixNano(), now.Sub(r.zero))
		res.Arrival = &a
	}
}

// sinceZero returns wall, a wall-clock time in Unix ns, in ns since a
// run's zero on the run's clock (the monotonic one), given a reading now of
// the wall clock taken since after the zero: wall − (now − since). The zero
// is placed by the wall clock of the moment, not of the start, so a step of
// the wall clock during the run (NTP, a virtual machine resumed) moves no
// echo off the monotonic stamps it is compared with.
func sinceZero(wall, now int64, since time.Duration) int64 {
	return wall - (now - since.Nanoseconds())
}

// h2Stamps collects the trace events of one HTTP/2 request, which arrive
// on the transport's goroutines.
type h2Stamps struct {
	mu                  sync.Mutex
	headers, wrote, ttf time.Time
}

func (s *h2Stamps) set(p *time.Time) {
	now := time.Now()
	s.mu.Lock()
	if p.IsZero() {
		*p = now
	}
	s.mu.Unlock()
}

// roundTripH2 runs send i on a reserved stream of hc.
func (r *run) roundTripH2(i int, p *pool, hc *h2Conn, res record.Result) {
	ctx, cancel := context.WithTimeout(r.rctx, r.e.opt.Timeout)
	defer cancel()
	var st h2Stamps
	trace := &httptrace.ClientTrace{
		WroteHeaders:         func() { st.set(&st.headers) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { st.set(&st.wrote) },
		GotFirstResponseByte: func() { st.set(&st.ttf) },
	}
	u := *p.t.url
	req := &http.Request{
		Method:     r.e.opt.Method,
		URL:        &u,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     p.header.Clone(),
		Host:       p.t.host,
	}
	if body := r.e.opt.Body; len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	res.Src = hc.src
	start := time.Now()
	resp, err := hc.cc.RoundTrip(req)
	var berr error
	if err == nil {
		res.Status = resp.StatusCode
		r.captureHeaders(&res, resp.Header, nil)
		_, berr = r.drain(resp.Body)
		_ = resp.Body.Close()
	}
	now := time.Now()
	st.mu.Lock()
	// The transport reports its writes after they happened, so Sent is the
	// call and Wrote the call too, or, with a body (whose last byte follows
	// the headers), the end of the headers.
	res.Sent = r.stamp(start)
	if !st.wrote.IsZero() {
		res.Wrote = res.Sent
		if len(r.e.opt.Body) > 0 && !st.headers.IsZero() {
			res.Wrote = r.stamp(st.headers)
		}
	}
	if !st.ttf.IsZero() {
		res.TTFB = r.stamp(st.ttf)
	}
	st.mu.Unlock()
	res.Done = r.stamp(now)
	if err == nil && berr != nil {
		res.ErrMsg = r.e.opt.Redactor.Text("reading body: " + berr.Error())
	}
	r.finish(i, res, err)
}

// finish records the outcome of send i: a response when err is nil, else a
// transport error. It counts consecutive errors and aborts at the limit.
func (r *run) finish(i int, res record.Result, err error) {
	if res.Done == 0 {
		res.Done = r.stamp(time.Now())
	}
	if err == nil {
		res.Outcome = record.OutcomeResponse
	} else {
		// The transport's errors quote the request's URL (*url.Error):
		// from here on, in the record, the abort reason and what Run and
		// Preflight return, only its redacted form.
		err = redactError(r.e.opt.Redactor, err)
		res.Outcome = record.OutcomeError
		res.Status = 0
		if r.killed.Load() && r.rctx.Err() != nil {
			res.Err = record.ErrOther
			res.ErrMsg = "abandoned at the end of the grace period: " + err.Error()
		} else {
			res.Err = classify(err)
			res.ErrMsg = err.Error()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.bk.finish(i) {
		return // cannot happen: every path finishes a send once
	}
	r.freed(i)
	if r.results != nil {
		r.results[i] = res
	}
	if err == nil {
		r.consec = 0
		r.connected.Store(true)
	} else {
		r.consec++
		r.lastErr = err
		if lim := r.e.opt.AbortAfterErrors; lim > 0 && r.consec >= lim {
			r.abortLocked(fmt.Errorf("%d consecutive transport errors, the last %s: %w", r.consec, res.Err, err))
		}
	}
	r.writeLocked(res)
}

// redactedError is an error whose text has its URLs' secrets redacted; it
// unwraps to the original, so errors.Is and errors.As still see it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactError returns err with its text redacted by red (nil: the
// defaults), or err itself when there is nothing to redact.
func redactError(red *record.Redactor, err error) error {
	msg := err.Error()
	if red := red.Text(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// writeLocked counts res and passes it to the sink; a sink error aborts
// the run. A Run stops writing to a sink that failed (Run returns every
// result); a Stream, which keeps none, goes on writing to it.
func (r *run) writeLocked(res record.Result) {
	r.counts.add(res)
	if r.sink == nil || (r.sinkErr != nil && r.st == nil) {
		return
	}
	if err := r.sink.WriteResult(res); err != nil && r.sinkErr == nil {
		r.sinkErr = err
		r.abortLocked(fmt.Errorf("writing results: %w", err))
	}
}

// abortLocked stops the dispatcher with reason err (the first one wins).
func (r *run) abortLocked(err error) {
	err = redactError(r.e.opt.Redactor, err) // a dial error may quote the URL
	if r.abortErr != nil || r.dctx.Err() != nil {
		return
	}
	r.abortErr = err
	r.dcancel(fmt.Errorf("%w: %w", ErrAborted, err))
}

// settle waits for every request in flight; once dispatching has stopped
// early, it waits at most the grace period and then abandons the rest.
func (r *run) settle() {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-r.dctx.Done():
	}
	r.dropPending()
	t := time.NewTimer(r.e.opt.Grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.killed.Store(true)
		r.rcancel()
		r.abandonReads()
		<-done
	}
}

// notSentReason says why the dispatcher stopped.
func (r *run) notSentReason() string {
	cause := context.Cause(r.dctx)
	switch {
	case errors.Is(cause, ErrAborted):
		return NotSentAbort
	case errors.Is(cause, context.DeadlineExceeded):
		return NotSentCap
	default:
		return NotSentSignal
	}
}

// sweep records every send that never went out as not-sent: those of
// the book, then, in a Stream, those the source has not given yet.
func (r *run) sweep() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var reason string
	notSent := func(res record.Result) {
		if reason == "" {
			reason = r.notSentReason()
		}
		res.Outcome = record.OutcomeNotSent
		res.Err = reason
		if r.results != nil {
			r.results[res.Seq-r.base] = res
		}
		r.writeLocked(res)
	}
	r.bk.live(func(c *sendChunk) {
		for j, done := range c.finished {
			i := c.no<<chunkBits + j
			if done || i >= r.bk.n {
				continue
			}
			res := r.newResult(i)
			r.bk.finish(i)
			notSent(res)
		}
	})
	if r.st != nil {
		r.st.rest(r, notSent)
	}
}

// outcome is Run's error.
func (r *run) outcome() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abortErr != nil {
		return fmt.Errorf("%w: %w", ErrAborted, r.abortErr)
	}
	stopped := r.killed.Load() || r.counts.NotSent > 0
	if !stopped {
		return nil
	}
	if errors.Is(context.Cause(r.dctx), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrBudget, context.Cause(r.dctx))
	}
	return ErrInterrupted
}
