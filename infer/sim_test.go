package infer

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// simServer is a model of a rate-limited server: the limiter decides each
// request at its arrival; a delayed request is answered after its delay.
type simServer struct {
	cfg       limiter.Config // zero Algorithm: no limiter
	perClient bool           // one state per client, else global
	oneWay    time.Duration  // network latency each way
	status    int            // reject status; 0 means 429
	retry     bool           // send Retry-After (rounded up) on rejections
	// timeout, when set, is the client's timeout: an answer later than
	// this after the send is a transport error (timeout).
	timeout time.Duration
	// raceGap, when set, makes the counter non-atomic: a decision reads
	// the state last written before it, and writes its own raceGap later
	// (answering then), overwriting what others wrote meanwhile.
	raceGap time.Duration
	// xrl adds X-RateLimit-Limit and X-RateLimit-Remaining to every answer.
	xrl bool
	// lie, when set, rewrites every answer's headers after the honest
	// ones were set (a server whose headers are claims, not the truth).
	lie func(h http.Header, d limiter.Decision)
	// dialect, when set, adds that dialect's headers to every answer.
	dialect headers.Dialect
	// deploy, when Instances is set, runs the limiter as a deployment:
	// connections are modelled (see simEngine.connOf).
	deploy simDeploy
}

// simDeploy is a deployment as testserver.Deployment runs one: Instances
// limiter instances, their state local to each unless Shared, requests
// spread by connection (each new connection to the next instance, round
// robin) or, ByRequest, per request.
type simDeploy struct {
	Instances int
	Shared    bool
	ByRequest bool
}

// simConn is a modelled connection: the instance a per-connection
// balancer keeps it on, and when its last answer came back.
type simConn struct {
	instance int
	free     time.Time
}

// simEngine runs schedules against a simServer on a virtual clock: time
// advances only through the schedules, so a test runs in microseconds and
// every outcome is exact.
type simEngine struct {
	srv    simServer
	origin time.Time
	now    time.Time
	states map[string]limiter.State
	// writes are a non-atomic counter's pending and past writes per key.
	writes map[string][]simWrite
	seq    int64
	// jitter, when set, returns extra one-way delay for request seq.
	jitter func(seq int64) time.Duration
	// stall, when set, returns extra delay on the way back for request seq
	// (a pause after the decision: a GC or a busy scheduler).
	stall func(seq int64) time.Duration
	// lag, when set, returns how long after its arrival stamp the server
	// decides request seq (the handler ran late under load). Requests are
	// decided in the order of their decision times, each at its stamp, so
	// a request stamped earlier may be decided after one stamped later
	// (as the reference server does: the stamp is taken when the request
	// is read, the limiter consulted when the handler runs).
	lag func(seq int64) time.Duration
	// echo sets each result's Arrival to the server's arrival stamp (the
	// reference server's X-Rlprobe-Arrival).
	echo bool
	// keyDelay is extra one-way delay of the requests of every client but
	// the first (the second identity's connection was served late).
	keyDelay time.Duration
	// phases records the phase of every request by seq, for hooks.
	phases map[int64]string
	// sent counts requests.
	sent int
	// retryScale and retryAdd distort Retry-After: advertised =
	// ceil(scale × true wait + add) seconds (scale 0 means 1).
	retryScale float64
	retryAdd   time.Duration
	// failAfter, when > 0, makes Run fail with failErr once that many
	// requests were sent (the rest of that run is not sent).
	failAfter int
	failErr   error
	// record keeps every result in recorded.
	record   bool
	recorded []record.Result
	// conns are a deployment's connections: by client and Send.Conn, and
	// the pool of Conn 0 by client; nextConn and nextReq number the
	// connections and requests the balancer has seen.
	conns    map[[2]int]*simConn
	pool     map[int][]*simConn
	nextConn int
	nextReq  int
	// poolCap, when > 0, is how many connections a client's pool opens
	// before poolCapUntil (from origin): an engine that sent its first
	// concurrent bursts over few connections (a transport warming up), the
	// rest queued behind them. After it, the pool opens as it needs.
	poolCap      int
	poolCapUntil time.Duration
}

// simWrite is a state written at a time (a non-atomic counter's update).
type simWrite struct {
	at time.Time
	st limiter.State
}

// decide steps key's state at t: atomically, or (raceGap) from the state
// last written before t, writing the new one raceGap later.
func (e *simEngine) decide(key string, t time.Time) limiter.Decision {
	if e.srv.raceGap <= 0 {
		st, d := e.srv.cfg.Step(e.states[key], t)
		e.states[key] = st
		return d
	}
	if e.writes == nil {
		e.writes = map[string][]simWrite{}
	}
	var cur limiter.State
	for _, w := range e.writes[key] {
		if !w.at.After(t) {
			cur = w.st
		}
	}
	st, d := e.srv.cfg.Step(cur, t)
	ws := append(e.writes[key], simWrite{t.Add(e.srv.raceGap), st})
	slices.SortStableFunc(ws, func(a, b simWrite) int { return a.at.Compare(b.at) })
	e.writes[key] = ws
	return d
}

// burstSchedule is n sends at once as client 0.
func burstSchedule(n int) patterns.Schedule {
	return patterns.Schedule{Sends: make([]patterns.Send, n), Clients: 1}
}

func newSimEngine(srv simServer, origin time.Time) *simEngine {
	return &simEngine{srv: srv, origin: origin, now: origin, states: map[string]limiter.State{}}
}

func (e *simEngine) clock() time.Time { return e.now }

func (e *simEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	start := e.now
	if !s.Start.IsZero() {
		start = s.Start
	}
	type req struct {
		i       int
		send    patterns.Send
		sent    time.Time
		arrival time.Time
		decided time.Time
	}
	reqs := make([]req, len(s.Sends))
	if e.phases == nil {
		e.phases = map[int64]string{}
	}
	for i, sd := range s.Sends {
		e.phases[e.seq+int64(i)] = sd.Phase
	}
	conns := make([]*simConn, len(s.Sends))
	for i, sd := range s.Sends {
		t := start.Add(sd.At)
		if t.Before(e.now) {
			t = e.now
		}
		if e.srv.deploy.Instances > 0 {
			conns[i] = e.connOf(sd, t)
			if conns[i].free.After(t) {
				t = conns[i].free
			}
			conns[i].free = t.Add(2*e.srv.oneWay + e.srv.raceGap)
		}
		arr := t.Add(e.srv.oneWay)
		if e.jitter != nil {
			arr = arr.Add(e.jitter(e.seq + int64(i)))
		}
		if sd.Client > 0 {
			arr = arr.Add(e.keyDelay)
		}
		dec := arr
		if e.lag != nil {
			dec = dec.Add(e.lag(e.seq + int64(i)))
		}
		reqs[i] = req{i: i, send: sd, sent: t, arrival: arr, decided: dec}
	}
	order := slices.Clone(reqs)
	slices.SortStableFunc(order, func(a, b req) int { return a.decided.Compare(b.decided) })
	out := make([]record.Result, len(reqs))
	last := e.now
	for _, q := range order {
		client := "k" + strconv.Itoa(q.send.Client+1)
		r := record.Result{
			Type: record.TypeResult, Seq: e.seq + int64(q.i), Client: client, Method: "GET",
			URL: "http://sim/", Phase: q.send.Phase, Outcome: record.OutcomeResponse,
			Sched: int64(start.Add(q.send.At).Sub(e.origin)),
			Sent:  int64(q.sent.Sub(e.origin)), Wrote: int64(q.sent.Sub(e.origin)),
			Headers: http.Header{},
		}
		r.Status = 200
		if e.echo {
			a := int64(q.arrival.Sub(e.origin))
			r.Arrival = &a
		}
		served := q.decided
		if e.srv.cfg.Algorithm != "" {
			key := ""
			if e.srv.perClient {
				key = client
			}
			key = e.instanceKey(conns[q.i]) + key
			d := e.decide(key, q.arrival)
			served = served.Add(e.srv.raceGap)
			if e.srv.dialect != "" {
				headers.Set(r.Headers, e.srv.dialect, served, headers.Quota{Limit: d.Limit, Window: e.srv.cfg.Window,
					Remaining: d.Remaining, UntilMore: max(d.UntilMore, d.RetryAfter), UntilFull: d.UntilFull})
			}
			if e.srv.xrl {
				r.Headers.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
				r.Headers.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
			}
			if e.srv.lie != nil {
				e.srv.lie(r.Headers, d)
			}
			if d.Allowed {
				served = served.Add(d.Delay)
			} else {
				r.Status = cmp.Or(e.srv.status, 429)
				if e.srv.retry {
					wait := d.RetryAfter
					if e.retryScale != 0 {
						wait = time.Duration(float64(wait) * e.retryScale)
					}
					wait += e.retryAdd
					secs := (wait + time.Second - 1) / time.Second
					r.Headers.Set("Retry-After", fmt.Sprint(int64(secs)))
				}
			}
		}
		back := served.Add(e.srv.oneWay)
		if e.stall != nil {
			back = back.Add(e.stall(r.Seq))
		}
		if e.srv.timeout > 0 && back.Sub(q.sent) > e.srv.timeout {
			back = q.sent.Add(e.srv.timeout)
			r.Outcome, r.Status, r.Err, r.Headers = record.OutcomeError, 0, record.ErrTimeout, nil
		} else {
			r.TTFB = int64(back.Sub(e.origin))
		}
		r.Done = int64(back.Sub(e.origin))
		if back.After(last) {
			last = back
		}
		out[q.i] = r
	}
	e.seq += int64(len(reqs))
	e.sent += len(reqs)
	e.now = last
	if e.failAfter > 0 && e.sent >= e.failAfter {
		return out, e.failErr
	}
	if e.record {
		e.recorded = append(e.recorded, out...)
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	return out, nil
}

// connOf returns the connection that carries sd at t: the client's
// Conn-th, opened on first use, or for Conn 0 the pool's most recently
// freed idle connection, a new one when none is idle (as net/http's
// transport does). A new connection goes to the next instance.
func (e *simEngine) connOf(sd patterns.Send, t time.Time) *simConn {
	if e.conns == nil {
		e.conns, e.pool = map[[2]int]*simConn{}, map[int][]*simConn{}
	}
	open := func() *simConn {
		c := &simConn{instance: e.nextConn % e.srv.deploy.Instances}
		e.nextConn++
		return c
	}
	if sd.Conn > 0 {
		k := [2]int{sd.Client, sd.Conn}
		if e.conns[k] == nil {
			e.conns[k] = open()
		}
		return e.conns[k]
	}
	var idle *simConn
	for _, c := range e.pool[sd.Client] {
		if !c.free.After(t) && (idle == nil || c.free.After(idle.free)) {
			idle = c
		}
	}
	if idle == nil && e.poolCap > 0 && t.Sub(e.origin) < e.poolCapUntil && len(e.pool[sd.Client]) >= e.poolCap {
		for _, c := range e.pool[sd.Client] {
			if idle == nil || c.free.Before(idle.free) {
				idle = c // the first to be free: the send queues behind it
			}
		}
	}
	if idle == nil {
		idle = open()
		e.pool[sd.Client] = append(e.pool[sd.Client], idle)
	}
	return idle
}

// instanceKey returns the prefix of the state that decides a request on
// c: its instance's (or, by request, the next instance's) under a local
// store, none under a shared one or without a deployment.
func (e *simEngine) instanceKey(c *simConn) string {
	d := e.srv.deploy
	if d.Instances <= 1 || d.Shared {
		return ""
	}
	i := c.instance
	if d.ByRequest {
		i = e.nextReq % d.Instances
		e.nextReq++
	}
	return "i" + strconv.Itoa(i) + ":"
}

// wait advances the virtual clock (an idle pause between runs).
func (e *simEngine) wait(d time.Duration) { e.now = e.now.Add(d) }
