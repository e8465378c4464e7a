package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/time/rate"

	"github.com/rlprobe/rlprobe/record"
)

// Errors returned by Run (wrapped, with details) and by a closed Engine.
var (
	// ErrAborted: the first connection failed, AbortAfterErrors consecutive
	// transport errors occurred, or the sink failed. The remaining sends are
	// recorded as not-sent with err NotSentAbort.
	ErrAborted = errors.New("probe: run aborted")
	// ErrInterrupted: the context was cancelled before every send was
	// answered. The remaining sends are recorded as not-sent with err
	// NotSentSignal.
	ErrInterrupted = errors.New("probe: run interrupted")
	// ErrBudget: the context's deadline (a duration budget) expired before
	// every send was answered; the remaining sends are not-sent with err
	// NotSentCap.
	ErrBudget = errors.New("probe: run budget spent")
	// ErrClosed: the Engine was closed.
	ErrClosed = errors.New("probe: engine closed")
)

// Reasons written in Result.Err for the not-sent outcome.
const (
	NotSentCap    = "cap"    // the context's deadline (budget) expired
	NotSentAbort  = "abort"  // the run aborted (see ErrAborted)
	NotSentSignal = "signal" // the context was cancelled (Ctrl-C)
)

// PhasePreflight is the phase of the result Preflight returns.
const PhasePreflight = "preflight"

// Sink receives each result as it completes; *record.Writer satisfies it.
// The engine calls it from one goroutine at a time.
type Sink interface {
	WriteResult(record.Result) error
}

var _ Sink = (*record.Writer)(nil)

// Engine is the open-loop traffic engine: it sends schedules of requests
// at absolute deadlines over connections it dials and pools itself, one
// pool per client and target, and records one record.Result per send.
//
// Create it with New and release its connections with Close. Run and
// Preflight may be called from several goroutines but execute one at a
// time; connections, the MaxRate guard, the round-robin position of every
// client and the Seq counter carry over from one call to the next.
type Engine struct {
	opt     Options
	targets []*target
	dial    DialFunc
	h2t     *http2.Transport
	lim     *rate.Limiter
	burst   int
	pacer   pacer
	respReq *http.Request // what http.ReadResponse needs to know of the request
	dialSem chan struct{} // dial slots of late sends (pool.take)
	// maxConns bounds the HTTP/1.1 connections of a pool, dialled ahead
	// or by late sends (Options.Connections; tests lower it).
	maxConns int
	// maxInFlight bounds a Stream's sends in flight (maxStreamInFlight;
	// tests lower it).
	maxInFlight int
	// lbGoroutines releases last-byte races from one goroutine per member
	// parked on a closed channel, instead of one loop (benchmarks compare).
	lbGoroutines bool
	// noLoop keeps plain HTTP/1.1 runs on the net.Conn path instead of the
	// event loop (tests and benchmarks compare).
	noLoop   bool
	loopRuns atomic.Int64 // runs the event loop dispatched

	runMu sync.Mutex // serialises Run and Preflight

	mu     sync.Mutex // guards the fields below
	pools  map[poolKey]*pool
	rr     map[int]int // next URL index per client
	seq    int64
	closed bool
}

// poolKey names a pool: a client's connections to one target, the shared
// ones (conn 0) or one dedicated connection (conn n ≥ 1, Send.Conn).
type poolKey struct{ client, url, conn int }

// New validates opt and returns an Engine. Every problem is reported at
// once; the errors match ErrUsage. Nothing is dialled until the first Run
// or Preflight.
func New(opt Options) (*Engine, error) {
	opt, targets, err := opt.validate()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		opt:         opt,
		targets:     targets,
		dial:        opt.Dial,
		pacer:       defaultPacer(),
		respReq:     &http.Request{Method: opt.Method},
		dialSem:     make(chan struct{}, maxSendDials),
		maxConns:    opt.Connections,
		maxInFlight: maxStreamInFlight,
		pools:       make(map[poolKey]*pool),
		rr:          make(map[int]int),
		h2t: &http2.Transport{
			AllowHTTP:          true,
			DisableCompression: true,
			MaxHeaderListSize:  uint32(min(opt.MaxHeaderBytes, math.MaxUint32)),
		},
	}
	if opt.TimerPacing {
		e.pacer = timerPacer{}
	}
	if e.dial == nil {
		e.dial = defaultDial
	}
	e.burst = int(min(math.Ceil(opt.MaxRate), 1e6))
	e.burst = max(e.burst, 1)
	e.lim = rate.NewLimiter(rate.Limit(opt.MaxRate), e.burst)
	return e, nil
}

// Close closes every pooled connection. Run and Preflight fail with
// ErrClosed afterwards. It waits for a Run in progress to end.
func (e *Engine) Close() error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, p := range e.pools {
		p.closeAll()
	}
	return nil
}

// dialDone releases a dial slot (see pool.slotDone) and gives the free
// slots to the sends waiting in any pool.
func (e *Engine) dialDone() {
	<-e.dialSem
	e.mu.Lock()
	pools := make([]*pool, 0, len(e.pools))
	for _, p := range e.pools {
		pools = append(pools, p)
	}
	e.mu.Unlock()
	for _, p := range pools {
		p.dialForPending()
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// clientSrc returns client i's source address (zero: any).
func (e *Engine) clientSrc(i int) netip.Addr {
	if n := len(e.opt.SourceIPs); n > 0 {
		return e.opt.SourceIPs[i%n]
	}
	return netip.Addr{}
}

// clientValue returns client i's identity header value.
func (e *Engine) clientValue(i int) string {
	if i < len(e.opt.ClientValues) {
		return e.opt.ClientValues[i]
	}
	return "k" + strconv.Itoa(i+1)
}

// clientLabel returns Result.Client for client i: the identity header
// value (redacted when the header is a secret one), else the source
// address, else the index.
func (e *Engine) clientLabel(i int) string {
	switch {
	case e.opt.ClientHeader != "":
		return e.opt.Redactor.Value(e.opt.ClientHeader, e.clientValue(i))
	case len(e.opt.SourceIPs) > 0:
		return e.clientSrc(i).String()
	default:
		return strconv.Itoa(i)
	}
}

// pool returns the pool of client c for target u and Send.Conn conn,
// creating it.
func (e *Engine) pool(c, u, conn int) *pool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := poolKey{c, u, conn}
	if p := e.pools[k]; p != nil {
		return p
	}
	t := e.targets[u]
	h := e.opt.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	for _, k := range []string{"Host", "Content-Length", "Transfer-Encoding"} {
		h.Del(k)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", DefaultUserAgent)
	}
	if t.basicAuth != "" && h.Get("Authorization") == "" {
		h.Set("Authorization", t.basicAuth)
	}
	if e.opt.ClientHeader != "" {
		h.Set(e.opt.ClientHeader, e.clientValue(c))
	}
	p := &pool{
		e:      e,
		t:      t,
		client: c,
		conn:   conn,
		src:    e.clientSrc(c),
		label:  e.clientLabel(c),
		header: h,
		h1req:  buildH1(e.opt.Method, t, h, e.opt.Body),
	}
	e.pools[k] = p
	return p
}

// buildH1 serialises an HTTP/1.1 request.
func buildH1(method string, t *target, h http.Header, body []byte) []byte {
	b := make([]byte, 0, 256+len(body))
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, t.requestTarget()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\n"...)
	b = t.appendProxyHeaders(b)
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// checkSends validates a schedule before anything is sent.
func (e *Engine) checkSends(sends []Send) error {
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 10 {
			errs = append(errs, usageErr(format, args...))
		}
	}
	type batchInfo struct {
		at    time.Duration
		n     int
		conns map[[2]int]bool // (client, Conn) of its members on a dedicated connection
	}
	batches := make(map[int]*batchInfo)
	for i, s := range sends {
		switch {
		case s.At < 0:
			bad("send %d: negative offset %v", i, s.At)
		case s.Client < 0:
			bad("send %d: negative client %d", i, s.Client)
		case s.Conn < 0:
			bad("send %d: negative conn %d", i, s.Conn)
		case e.opt.ClientHeader != "" && len(e.opt.ClientValues) > 0 && s.Client >= len(e.opt.ClientValues):
			bad("send %d: client %d has no value (%d client values given)", i, s.Client, len(e.opt.ClientValues))
		}
		if s.Batch == 0 {
			continue
		}
		b := batches[s.Batch]
		if b == nil {
			b = &batchInfo{at: s.At}
			batches[s.Batch] = b
		} else if b.at != s.At {
			bad("batch %d: members due at %v and %v; a batch is released at one instant", s.Batch, b.at, s.At)
		}
		b.n++
		if s.Conn > 0 && e.opt.RaceMode == RaceSinglePacket {
			bad("batch %d: a single-packet race opens connections of its own: its members cannot choose a conn (send %d: conn %d)", s.Batch, i, s.Conn)
		}
		if s.Conn > 0 {
			k := [2]int{s.Client, s.Conn}
			if b.conns[k] {
				bad("batch %d: two members on client %d's conn %d; each member needs a connection of its own", s.Batch, s.Client, s.Conn)
			}
			if b.conns == nil {
				b.conns = make(map[[2]int]bool)
			}
			b.conns[k] = true
		}
	}
	for id, b := range batches {
		if b.n > e.burst {
			bad("batch %d: %d requests exceed the max-rate guard's bucket of %d", id, b.n, e.burst)
		}
	}
	return errors.Join(errs...)
}

// Run sends the schedule open-loop: send i is due at begin+sends[i].At, an
// absolute deadline, whatever the latency of earlier requests; a late send
// goes out as soon as it can and is recorded with its actual send time.
// Sends with a Batch are prepared RaceHold before their At and released
// together in Options.RaceMode. Before the first deadline, Run dials as
// many connections per client and target as that client has sends due
// within any 1 ms, or within any 20 ms (at most 256) when two or more (at
// distinct instants) are due within a millisecond, so that answers slower
// than usual find connections to spare (a dedicated Send.Conn: its one
// connection); choose begin a little after now.
//
// zero is the record file's Header.Start: every result time is
// nanoseconds since zero. Every send yields exactly one result (response,
// error or not-sent), written to sink (which may be nil) as it completes
// and returned in schedule order. Seq numbers continue across calls.
//
// On ctx cancellation Run stops sending, waits up to Options.Grace for
// requests in flight (then abandons them as errors), records the rest as
// not-sent and returns ErrInterrupted (ErrBudget if ctx's deadline
// expired). It returns ErrAborted, wrapped with the reason, when the first
// connection fails, after AbortAfterErrors consecutive transport errors, or
// when sink fails. An invalid schedule is refused before anything is sent
// with an error matching ErrUsage.
func (e *Engine) Run(ctx context.Context, zero, begin time.Time, sends []Send, sink Sink) ([]record.Result, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.isClosed() {
		return nil, ErrClosed
	}
	if err := e.checkSends(sends); err != nil {
		return nil, err
	}
	r := e.newRun(ctx, zero, begin, len(sends), sink)
	defer r.rcancel()
	defer r.dcancel(nil)
	r.plan(sends)
	if r.predial() {
		r.dispatch()
	}
	r.settle()
	r.sweep()
	return r.results, r.outcome()
}

// Preflight sends one request, as client 0 to the first URL, and returns
// its result (phase "preflight", taking the next Seq so it can be recorded
// like any other) and the first PreflightBodyBytes of the response body.
// The error is non-nil, wrapping the transport error, when no HTTP answer
// arrived; any status is a response.
func (e *Engine) Preflight(ctx context.Context, zero time.Time) (record.Result, []byte, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.isClosed() {
		return record.Result{}, nil, ErrClosed
	}
	r := e.newRun(ctx, zero, time.Now(), 1, nil)
	defer r.rcancel()
	defer r.dcancel(nil)
	r.capture = true
	if _, err := r.bk.add(Send{Phase: PhasePreflight}, e.pool(0, 0, 0)); err != nil {
		return record.Result{}, nil, fmt.Errorf("probe: preflight: %w", err)
	}
	r.mu.Lock()
	r.bk.seal()
	r.mu.Unlock()
	r.send(0)
	done := make(chan struct{})
	go func() {
		r.wg.Wait() // the connection's reader completes it
		close(done)
	}()
	select {
	case <-done:
	case <-r.dctx.Done():
		r.dropPending()
		<-done
	}
	r.mu.Lock()
	finished, res := r.bk.finished(0), r.results[0]
	r.mu.Unlock()
	if !finished { // ctx ended while it waited for a connection
		return record.Result{}, nil, fmt.Errorf("probe: preflight: %w", context.Cause(r.dctx))
	}
	if res.Outcome != record.OutcomeResponse {
		return res, nil, fmt.Errorf("probe: preflight: %w", r.lastErr)
	}
	return res, r.body, nil
}
