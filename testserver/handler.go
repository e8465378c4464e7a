package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// BackendErrorMode says what a route answers when its backend fails.
type BackendErrorMode string

// The backend error modes (serve --on-backend-error).
const (
	// BackendErrorDeny answers 503 with "Retry-After: 1" (fail closed).
	BackendErrorDeny BackendErrorMode = "deny"
	// BackendErrorAllow serves the request unlimited, without rate-limit
	// headers (fail open).
	BackendErrorAllow BackendErrorMode = "allow"
)

// Route binds an exact request path to a policy. The empty path matches
// every path no other route matches.
type Route struct {
	// Path is the exact URL path ("/api/x"); "" is the catch-all route.
	Path string
	// Policy is how the route limits and what it advertises.
	Policy Policy
	// Backend keeps the route's limiter states; nil means a fresh
	// MemoryBackend for Policy.Limiter.
	Backend Backend
}

// HandlerOptions are a Handler's settings beyond its routes. The zero value
// is ready to use: the real clock, no echo, fail closed, no log.
type HandlerOptions struct {
	// Now reads the clock; nil means the real clock, read as a steady
	// clock (wall time at the start, then the monotonic clock: a step of
	// the wall clock never changes a decision). Tests pass a fixed or
	// synctest clock.
	Now func() time.Time
	// ClockSkew sets the server's clock this far ahead of the one Now
	// reads (behind when negative), as a server on another machine whose
	// clock is off: its decisions, epoch-aligned windows, Date, HTTP-dates
	// and arrival echo all read the skewed clock. Zero: no skew.
	ClockSkew time.Duration
	// EchoArrival adds headers.ArrivalHeader to every response: the
	// request's receive time in Unix nanoseconds (see Handler); and, when
	// the route's Backend is an OrderedBackend (the memory backends),
	// headers.DecisionHeader to every decided one: the decision's number
	// in the order the route's limiter decided.
	EchoArrival bool
	// OnBackendError is what a route answers when its backend fails; ""
	// means BackendErrorDeny.
	OnBackendError BackendErrorMode
	// Log, when not nil, receives one line per request.
	Log io.Writer
	// DecisionDelay, when not nil, says how long a request waits between
	// its arrival stamp and its decision: the time a busy server spends
	// before its limiter runs (queues, middleware, a remote store), which
	// lets requests be decided in another order than they arrived. Tests
	// use it to inject that disorder; nil means no wait.
	DecisionDelay func(r *http.Request) time.Duration
	// Deployment runs the limiter as several instances behind the
	// handler; the zero value is one instance.
	Deployment Deployment
}

// Handler is the reference rate-limited HTTP handler. Each request is
// routed by exact path (404 when no route matches), keyed by its route's
// Policy.Key, decided by the route's Backend at the request's receive time
// (with a HandlerOptions.DecisionDelay, when the delay ends), and answered:
//
//   - admitted: 200 "ok\n", after the Decision's Delay (leaky bucket
//     queueing; a client that goes away ends the wait);
//   - rejected: Policy.Status with Retry-After (per Policy.RetryAfter) and
//     "Cache-Control: no-store";
//   - backend failure: per HandlerOptions.OnBackendError.
//
// Every answer of a route carries the rate-limit headers of its dialects,
// honest unless a Fault says otherwise: remaining, time until more quota,
// time until the quota is full, and the policy (buckets advertise
// q=capacity, w=max(1, ceil(capacity/rate))). Durations are rounded up.
//
// The receive time is taken as early as the server can: for HTTP/1 served
// by Server, the moment the last read of the request's bytes returned;
// otherwise handler entry.
//
// A Handler is safe for concurrent use.
type Handler struct {
	table atomic.Pointer[table]
	now   func() time.Time
	echo  bool
	// realClock: now is steady's; the kernel's receive stamps, which
	// the arrival echo sends, are on the wall clock.
	realClock bool
	steady    steadyClock
	// skew is HandlerOptions.ClockSkew. now already reads the skewed
	// clock; the kernel's receive stamps (wall time) need it added.
	skew    time.Duration
	onError BackendErrorMode
	logMu   sync.Mutex
	log     io.Writer
	// decisionDelay is HandlerOptions.DecisionDelay.
	decisionDelay func(*http.Request) time.Duration
	// stopping is closed by StopDelays: delayed requests then answer 503.
	stopping chan struct{}
	stopOnce sync.Once
	// start is when the handler was made: the start of the timers of
	// policies with TimerAtStart, kept across reloads.
	start time.Time
	// deploy is HandlerOptions.Deployment; bal assigns its instances.
	deploy Deployment
	bal    *balancer
}

// route is a validated Route.
type route struct {
	path    string
	policy  Policy
	key     keySpec
	backend Backend
	status  int
	dialect []headers.Dialect
	limit   int64         // the enforced quota
	window  time.Duration // the advertised window
	rate    int64         // the refill rate per second, rounded (FaultAdvertiseRate)
	faults  map[Fault]bool
}

var _ http.Handler = (*Handler)(nil)

// NewHandler validates routes and returns their handler. Paths must be
// unique and start with "/" (or be "" for the catch-all route).
func NewHandler(routes []Route, opt HandlerOptions) (*Handler, error) {
	if err := opt.Deployment.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{now: opt.Now, echo: opt.EchoArrival, onError: opt.OnBackendError, log: opt.Log,
		decisionDelay: opt.DecisionDelay, stopping: make(chan struct{}),
		deploy: opt.Deployment, bal: newBalancer(opt.Deployment)}
	if h.now == nil {
		h.steady = newSteadyClock()
		h.now = h.steady.now
		h.realClock = true
	}
	if skew := opt.ClockSkew; skew != 0 {
		now := h.now
		h.now = func() time.Time { return now().Add(skew) }
	}
	h.skew = opt.ClockSkew
	switch h.onError {
	case "":
		h.onError = BackendErrorDeny
	case BackendErrorDeny, BackendErrorAllow:
	default:
		return nil, fmt.Errorf("testserver: on-backend-error %q (valid: allow, deny)", h.onError)
	}
	h.start = h.now()
	t, err := newTable(routes, h.start, h.deploy.perInstance())
	if err != nil {
		return nil, err
	}
	h.table.Store(t)
	return h, nil
}

// table is a handler's routes: swapped whole by Reload.
type table struct {
	routes   map[string]*route
	catchAll *route
}

// newTable validates routes into a table; timers that start with the
// server start at start; a route without a Backend gets n memory
// instances of its limiter (one state each).
func newTable(routes []Route, start time.Time, n int) (*table, error) {
	if len(routes) == 0 {
		return nil, errors.New("testserver: no route")
	}
	t := &table{routes: map[string]*route{}}
	var errs []error
	for i, r := range routes {
		r.Policy = r.Policy.withStart(start)
		rt, err := newRoute(r, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %d (%q): %w", i+1, r.Path, err))
			continue
		}
		switch {
		case r.Path == "":
			if t.catchAll != nil {
				errs = append(errs, errors.New("testserver: more than one catch-all route (empty path)"))
			}
			t.catchAll = rt
		case t.routes[r.Path] != nil:
			errs = append(errs, fmt.Errorf("testserver: path %q appears twice", r.Path))
		default:
			t.routes[r.Path] = rt
		}
	}
	return t, errors.Join(errs...)
}

// Reload replaces the handler's routes, as a config reload does: requests
// already being decided finish under the old routes, every later one is
// decided under the new ones, with fresh limiter state (memory backends)
// or the backends given. On an error nothing changes.
func (h *Handler) Reload(routes []Route) error {
	t, err := newTable(routes, h.start, h.deploy.perInstance())
	if err != nil {
		return err
	}
	h.table.Store(t)
	return nil
}

func newRoute(r Route, n int) (*route, error) {
	var errs []error
	if r.Path != "" && r.Path[0] != '/' {
		errs = append(errs, fmt.Errorf("testserver: path %q does not start with /", r.Path))
	}
	if err := r.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	key, _ := parseKey(r.Policy.Key)
	rt := &route{path: r.Path, policy: r.Policy, key: key, backend: r.Backend, status: r.Policy.Status,
		dialect: r.Policy.Dialects, faults: map[Fault]bool{}}
	if rt.backend == nil {
		is := make(instances, max(n, 1))
		for i := range is {
			b, err := NewMemoryBackend(r.Policy.Limiter)
			if err != nil {
				return nil, err
			}
			is[i] = b
		}
		rt.backend = is[0]
		if len(is) > 1 {
			rt.backend = is
		}
	}
	if rt.status == 0 {
		rt.status = DefaultStatus
	}
	if rt.dialect == nil {
		rt.dialect = DefaultDialects
	}
	for _, f := range r.Policy.Faults {
		rt.faults[f] = true
	}
	rt.limit, rt.window = advertised(r.Policy.Limiter)
	rt.rate = advertisedRate(r.Policy.Limiter)
	return rt, nil
}

// advertisedRate returns c's refill rate in requests per second, rounded
// to the nearest whole number and at least 1: Rate for buckets,
// Limit/Window for window algorithms.
func advertisedRate(c limiter.Config) int64 {
	r := c.Rate
	if c.Window > 0 {
		r = float64(c.Limit) / c.Window.Seconds()
	}
	return max(int64(math.Round(r)), 1)
}

// advertised returns the quota and window a limiter advertises: Limit and
// Window for window algorithms, Capacity and max(1 s, ceil(capacity/rate))
// for buckets.
func advertised(c limiter.Config) (int64, time.Duration) {
	return c.Quota(), c.AdvertisedWindow()
}

// ServeHTTP answers one request; see Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor >= 2 {
		// Go's HTTP/2 server runs the handler as soon as HEADERS arrive; a
		// request has arrived only with its END_STREAM, so read the body to
		// EOF first, or a single-packet race would be decided before its
		// release. The body is capped: it is discarded.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	}
	arrival := h.now()
	echoed := int64(0)
	if r.ProtoMajor == 1 {
		if t, ok := arrivalFromContext(r.Context()); ok && t.Before(arrival) {
			arrival = t
		}
		if echoed = socketArrivalFromContext(r.Context()); echoed != 0 {
			echoed += int64(h.skew)
		}
	}
	if h.echo {
		if echoed == 0 {
			echoed = arrival.UnixNano()
			if h.realClock { // the echo is in wall time
				echoed += h.steady.wallOffset(time.Now())
			}
		}
		w.Header().Set(headers.ArrivalHeader, strconv.FormatInt(echoed, 10))
	}
	t := h.table.Load()
	rt := t.routes[r.URL.Path]
	if rt == nil {
		rt = t.catchAll
	}
	if rt == nil {
		h.logf(r, arrival, "-", http.StatusNotFound, "no route")
		http.Error(w, "no route for this path", http.StatusNotFound)
		return
	}
	key, logKey := rt.keyOf(r)
	if h.bal.n > 1 {
		r = r.WithContext(withInstance(r.Context(), h.bal.instance(r)))
	}
	// at is when the limiter decides: the arrival, unless a decision delay
	// makes the request wait, and then the moment the wait ends.
	at := arrival
	if h.decisionDelay != nil {
		if d := h.decisionDelay(r); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
			at = h.now()
		}
	}
	dec, err := h.decide(w, r, rt, key, at)
	if err != nil {
		if h.onError == BackendErrorAllow {
			h.logf(r, arrival, logKey, http.StatusOK, "backend error, allowed: "+err.Error())
			h.writeBody(w, http.StatusOK, "ok (limiter unavailable)\n")
			return
		}
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Cache-Control", "no-store")
		h.logf(r, arrival, logKey, http.StatusServiceUnavailable, "backend error: "+err.Error())
		h.writeBody(w, http.StatusServiceUnavailable, "rate limiter unavailable\n")
		return
	}
	if !dec.Allowed {
		rt.writeRateLimit(w.Header(), dec, at, 0)
		if ra, ok := rt.retryAfter(dec, at); ok {
			w.Header().Set("Retry-After", ra)
		}
		if rt.faults[FaultCacheableReject] {
			w.Header().Set("Cache-Control", "public, max-age=3600")
		} else {
			w.Header().Set("Cache-Control", "no-store")
		}
		h.logf(r, arrival, logKey, rt.status, fmt.Sprintf("remaining=%d retry_after=%v", dec.Remaining, dec.RetryAfter))
		h.writeBody(w, rt.status, "rate limited\n")
		return
	}
	if dec.Delay > 0 {
		t := time.NewTimer(dec.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			h.logf(r, arrival, logKey, 0, fmt.Sprintf("client gone while delayed %v", dec.Delay))
			return
		case <-h.stopping:
			t.Stop()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Connection", "close")
			h.logf(r, arrival, logKey, http.StatusServiceUnavailable, "server stopping while delayed")
			h.writeBody(w, http.StatusServiceUnavailable, "server stopping\n")
			return
		}
	}
	rt.writeRateLimit(w.Header(), dec, at.Add(dec.Delay), dec.Delay)
	if rt.faults[FaultRetryAfterOnSuccess] {
		w.Header().Set("Retry-After", headers.FormatRetryAfter(max(time.Second, dec.UntilFull-dec.Delay), headers.RetryAfterSeconds, at))
	}
	h.logf(r, arrival, logKey, http.StatusOK, fmt.Sprintf("remaining=%d delay=%v", dec.Remaining, dec.Delay))
	h.writeBody(w, http.StatusOK, "ok\n")
}

// decide asks the route's backend for a decision and, when echoing, sets
// the decision's number (an OrderedBackend's, taken as it decided).
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, rt *route, key string, at time.Time) (limiter.Decision, error) {
	ob, ok := rt.backend.(OrderedBackend)
	if !h.echo || !ok {
		return rt.backend.Decide(r.Context(), key, at)
	}
	dec, n, err := ob.DecideOrdered(r.Context(), key, at)
	if err == nil && n > 0 {
		w.Header().Set(headers.DecisionHeader, strconv.FormatInt(n, 10))
	}
	return dec, err
}

// StopDelays ends every current and future leaky-bucket wait at once with
// 503 and "Retry-After: 1", so that a graceful stop need not wait out the
// queue. Server.Shutdown calls it. It is safe to call more than once.
func (h *Handler) StopDelays() { h.stopOnce.Do(func() { close(h.stopping) }) }

// writeBody writes the answer, with a Date taken now from the clock the
// handler decides and dates Retry-After by (net/http's own would be the
// wall clock's): a client reads an HTTP-date against the Date, and the two
// must come from one clock, as they do on a real server.
func (h *Handler) writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Date", h.now().UTC().Format(http.TimeFormat))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// keyOf returns the limiter key of r under the route's key kind, and the
// key the log shows: the same, but under KeyCollapse every request is
// decided as KeyGlobal while the log shows the configured key.
func (rt *route) keyOf(r *http.Request) (decide, log string) {
	k := rt.configuredKey(r)
	if rt.policy.KeyFault == KeyCollapse {
		return KeyGlobal, k
	}
	return k, k
}

// configuredKey returns the limiter key of r under the route's key kind.
func (rt *route) configuredKey(r *http.Request) string {
	switch rt.key.kind {
	case KeyIP:
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			return ap.Addr().Unmap().String()
		}
		return r.RemoteAddr
	case "header":
		return r.Header.Get(rt.key.header)
	}
	return KeyGlobal
}

// quota is what the route advertises for dec, answered at now, elapsed
// after the decision (the leaky-bucket delay): durations count from the
// response, not the arrival. Faults that lie about values apply here.
func (rt *route) quota(dec limiter.Decision, elapsed time.Duration) headers.Quota {
	name := rt.policy.Name
	if name == "" {
		name = DefaultPolicyName
	}
	q := headers.Quota{
		Policy:    name,
		Limit:     rt.limit,
		Window:    rt.window,
		Remaining: dec.Remaining,
		UntilMore: max(0, dec.UntilMore-elapsed),
		UntilFull: max(0, dec.UntilFull-elapsed),
		Effective: max(0, dec.UntilGain-elapsed),
		Cost:      1,
	}
	if rt.faults[FaultRemainingStuck] {
		q.Remaining = max(0, rt.limit-1)
	}
	if rt.faults[FaultRemainingOffByOne] && dec.Allowed {
		q.Remaining++
	}
	if rt.faults[FaultRemainingRandom] {
		q.Remaining = rand.Int64N(max(rt.limit, 0) + 1)
	}
	if rt.faults[FaultPolicyLie] {
		q.Limit = 2 * rt.limit
		if q.Limit == 0 {
			q.Limit = 1
		}
	}
	if rt.faults[FaultAdvertiseRate] {
		q.Limit, q.Window = rt.rate, time.Second
	}
	if rt.faults[FaultConstantReset] {
		q.UntilMore, q.UntilFull, q.Effective = rt.window, rt.window, rt.window
	}
	return q
}

// writeRateLimit sets the route's rate-limit fields for dec into h.
func (rt *route) writeRateLimit(h http.Header, dec limiter.Decision, now time.Time, elapsed time.Duration) {
	q := rt.quota(dec, elapsed)
	for _, d := range rt.dialect {
		switch {
		case rt.faults[FaultResetDelta] && d == headers.XRateLimitEpoch:
			d = headers.XRateLimit
		case rt.faults[FaultResetEpoch] && d != headers.XRateLimit && d != headers.XRateLimitEpoch:
			// Each delay becomes the Unix time it names, which Set
			// writes as that many seconds.
			epoch := func(x time.Duration) time.Duration { return time.Duration(now.Add(x).Unix()) * time.Second }
			eq := q
			eq.UntilMore, eq.UntilFull, eq.Effective = epoch(q.UntilMore), epoch(q.UntilFull), epoch(q.Effective)
			headers.Set(h, d, now, eq)
			continue
		}
		headers.Set(h, d, now, q)
	}
	if rt.faults[FaultMalformedRateLimit] {
		for _, d := range rt.dialect {
			for _, f := range stateFields(d) {
				// headers.Set wrote the field verbatim ("RateLimit"), which
				// h.Values, canonicalising to "Ratelimit", would miss.
				for k, vs := range h {
					if strings.EqualFold(k, f) && len(vs) > 0 {
						vs[len(vs)-1] += ";"
					}
				}
			}
		}
	}
}

// stateFields are the fields that carry a dialect's current state, the ones
// FaultMalformedRateLimit breaks.
func stateFields(d headers.Dialect) []string {
	switch d {
	case headers.Draft7, headers.Draft8, headers.Draft11, headers.Draft12:
		return []string{"RateLimit"}
	case headers.Draft6:
		return []string{"RateLimit-Remaining"}
	case headers.XRateLimit, headers.XRateLimitEpoch:
		return []string{"X-RateLimit-Remaining"}
	}
	return nil
}

// retryAfter returns the Retry-After value for a rejection decided at now,
// and false when none is sent.
func (rt *route) retryAfter(dec limiter.Decision, now time.Time) (string, bool) {
	wait := max(0, dec.RetryAfter)
	switch rt.policy.RetryAfter {
	case RetryMissing:
		return "", false
	case RetryEarly:
		wait = (wait / 2).Truncate(time.Second)
	case RetryLate:
		wait += rt.window
	}
	switch {
	case rt.faults[FaultRetryAfterZero]:
		return "0", true
	case rt.faults[FaultRetryAfterWindow]:
		return strconv.FormatInt(int64((rt.window+time.Second-1)/time.Second), 10), true
	case rt.faults[FaultRetryAfterMs]:
		return strconv.FormatInt(wait.Milliseconds(), 10), true
	case rt.faults[FaultRetryAfterUnix]:
		return strconv.FormatInt(now.Add(wait+time.Second-1).Unix(), 10), true
	}
	format := rt.policy.RetryAfterFormat
	if rt.faults[FaultMalformedRetryAfter] {
		if format == headers.RetryAfterHTTPDate {
			return now.Add(wait).UTC().Format(time.RFC3339), true
		}
		return strconv.FormatFloat(wait.Seconds()+0.5, 'f', 1, 64), true
	}
	return headers.FormatRetryAfter(wait, format, now), true
}

// logf writes one log line for r when logging is on.
func (h *Handler) logf(r *http.Request, arrival time.Time, key string, status int, detail string) {
	if h.log == nil {
		return
	}
	h.logMu.Lock()
	defer h.logMu.Unlock()
	fmt.Fprintf(h.log, "%s %s %s %s key=%q status=%d %s\n", arrival.UTC().Format("2006-01-02T15:04:05.000000Z"),
		r.RemoteAddr, r.Method, r.URL.Path, key, status, detail)
}

// arrivalKey is the context key under which Server stores the connection
// whose last read time is a request's arrival.
type arrivalKey struct{}

// socketArrivalFromContext returns the socket's receive time (Unix ns) of
// the last data read on the request's connection, or 0 without kernel
// stamps.
func socketArrivalFromContext(ctx context.Context) int64 {
	if c, ok := ctx.Value(arrivalKey{}).(*arrivalConn); ok {
		return c.socket.Load()
	}
	return 0
}

// arrivalFromContext returns the receive time Server recorded for the
// request whose context is ctx.
func arrivalFromContext(ctx context.Context) (time.Time, bool) {
	c, ok := ctx.Value(arrivalKey{}).(*arrivalConn)
	if !ok {
		return time.Time{}, false
	}
	ns := c.last.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
