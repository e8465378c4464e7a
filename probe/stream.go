package probe

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Pre-dialling looks this far into a streamed schedule, whichever bound
// comes first: this many sends, or the sends due within this long of the
// first.
const (
	predialLookaheadSends = 100_000
	predialLookahead      = time.Second
)

// maxStreamInFlight bounds the sends of a Stream that are dispatched and
// not finished: answering or waiting in their pool for a connection. Due
// beyond it, a send waits in the source until an earlier one finishes;
// it is late by then anyway (it would have waited for a connection), and
// it is recorded with its actual send time. So the memory of a run that
// offers more than the target answers stays bounded.
const maxStreamInFlight = 1 << 16

// crowdedPoll is how soon the event loop looks again at a Stream that had
// maxStreamInFlight sends in flight.
const crowdedPoll = 100 * time.Microsecond

// StreamCounts counts the results of a Stream, one per send of its
// schedule, by outcome.
type StreamCounts struct {
	Results   int64 // every result written: the sends of the schedule
	Responses int64 // record.OutcomeResponse
	Errors    int64 // record.OutcomeError
	NotSent   int64 // record.OutcomeNotSent
}

// add counts res.
func (c *StreamCounts) add(res record.Result) {
	c.Results++
	switch res.Outcome {
	case record.OutcomeResponse:
		c.Responses++
	case record.OutcomeError:
		c.Errors++
	case record.OutcomeNotSent:
		c.NotSent++
	}
}

// Stream is Run for a schedule of any length that sends produces as it is
// sent, in order of At: it keeps the state of a send only while the send
// is in flight, passes every result to sink (which should not be nil) and
// retains none, so its memory does not grow with the schedule. Sends are
// numbered, and every result is timed and written, as in Run; a send due
// before one already dispatched goes at once, as a late one.
//
// Its differences from Run: sends are checked as they are reached, and
// an invalid one (a negative offset, client or conn, a client without a
// value) or a batch member (races are prepared ahead, which takes the
// whole schedule: use Run) aborts the run with an error matching both
// ErrAborted and ErrUsage, the offending send and the rest recorded
// not-sent. Pre-dialling looks at the first 100,000 sends or the first
// second of the schedule, whichever is shorter. When the run stops early,
// the sends sends has not given yet are drawn from it and recorded
// not-sent, so that the record still holds one result per send.
//
// A sink error aborts the run as in Run, but the sink goes on receiving
// every result (Stream keeps none to return). It returns the counts of the
// results written, and Run's errors.
func (e *Engine) Stream(ctx context.Context, zero, begin time.Time, sends iter.Seq[Send], sink Sink) (StreamCounts, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.isClosed() {
		return StreamCounts{}, ErrClosed
	}
	next, stop := pullBatches(sends)
	defer stop()
	r := e.newRun(ctx, zero, begin, -1, sink)
	defer r.rcancel()
	defer r.dcancel(nil)
	r.st = newStreamSrc(e, next)
	r.freedCh = make(chan struct{}, 1)
	if r.predial() {
		r.dispatch()
	}
	r.settle()
	r.sweep()
	r.st.close(r)
	r.mu.Lock()
	counts := r.counts
	r.mu.Unlock()
	return counts, r.outcome()
}

// streamSrc is a Stream's source of sends: it assigns each its pool
// (round-robin over the URLs per client) and adds it to the run's book as
// the dispatcher reaches it. Only the dispatching goroutine uses it, and
// the sweep once dispatching is over.
type streamSrc struct {
	next   func() (Send, bool)
	rr     map[int]int // next URL index per client, from the engine's
	pools  map[poolKey]*pool
	done   bool  // the source gave its last send, or the run stopped pulling
	bad    *Send // the send that failed the check, recorded by rest
	extra  int   // sends recorded by rest, numbered after the book's
	sealed bool
}

func newStreamSrc(e *Engine, next func() (Send, bool)) *streamSrc {
	e.mu.Lock()
	defer e.mu.Unlock()
	rr := make(map[int]int, len(e.rr))
	for c, u := range e.rr {
		rr[c] = u
	}
	return &streamSrc{next: next, rr: rr, pools: make(map[poolKey]*pool)}
}

// pool assigns send s its pool: of its client, its Conn, and the next
// of the client's URLs.
func (st *streamSrc) pool(e *Engine, s Send) *pool {
	c := s.Client
	u := st.rr[c] % len(e.targets)
	st.rr[c]++
	k := poolKey{c, u, s.Conn}
	p := st.pools[k]
	if p == nil {
		p = e.pool(c, u, s.Conn)
		st.pools[k] = p
	}
	return p
}

// check validates one send of a streamed schedule, the i-th.
func (e *Engine) checkStreamed(i int, s Send) error {
	switch {
	case s.Batch != 0:
		return usageErr("send %d: batch %d: a streamed schedule cannot race (its batches are prepared ahead): run it whole", i, s.Batch)
	case s.At < 0:
		return usageErr("send %d: negative offset %v", i, s.At)
	case s.Client < 0:
		return usageErr("send %d: negative client %d", i, s.Client)
	case s.Conn < 0:
		return usageErr("send %d: negative conn %d", i, s.Conn)
	case e.opt.ClientHeader != "" && len(e.opt.ClientValues) > 0 && s.Client >= len(e.opt.ClientValues):
		return usageErr("send %d: client %d has no value (%d client values given)", i, s.Client, len(e.opt.ClientValues))
	}
	return nil
}

// pull adds the source's next send to r's book and reports whether there
// was one; at the end of the source, or on an invalid send (which aborts
// the run), it reports false.
func (st *streamSrc) pull(r *run) bool {
	if st.done {
		return false
	}
	s, ok := st.next()
	if !ok {
		st.done = true
		st.seal(r)
		return false
	}
	err := r.e.checkStreamed(r.bk.n, s)
	if err == nil {
		_, err = r.bk.add(s, st.pool(r.e, s))
	}
	if err != nil {
		st.done = true
		st.bad = &s
		st.seal(r)
		r.mu.Lock()
		r.abortLocked(err)
		r.mu.Unlock()
		return false
	}
	return true
}

// seal seals r's book, once.
func (st *streamSrc) seal(r *run) {
	if st.sealed {
		return
	}
	st.sealed = true
	r.mu.Lock()
	r.bk.seal()
	r.mu.Unlock()
}

// rest passes the result of every send the source still holds (and of the
// send that failed the check) to notSent, which records it not-sent. The
// caller holds r.mu.
func (st *streamSrc) rest(r *run, notSent func(record.Result)) {
	emit := func(s Send) {
		i := r.bk.n + st.extra
		st.extra++
		if s.Client < 0 {
			s.Client = 0 // (invalid: labelled as client 0)
		}
		s.Conn = max(s.Conn, 0) // (likewise)
		notSent(r.resultOf(i, s, st.pool(r.e, s)))
	}
	if st.bad != nil {
		emit(*st.bad)
		st.bad = nil
	}
	for {
		s, ok := st.next()
		if !ok {
			break
		}
		emit(s)
	}
	st.done = true
}

// close gives the engine back the run's Seqs and round-robin positions.
func (st *streamSrc) close(r *run) {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq = r.base + int64(r.bk.n+st.extra)
	for c, u := range st.rr {
		e.rr[c] = u
	}
}

// event returns dispatcher event k: a Run's k-th, or a Stream's k-th send
// (pulled from the source when the dispatcher reaches it). It reports
// false past the last.
func (r *run) event(k int) (event, bool) {
	if r.st == nil {
		if k < len(r.events) {
			return r.events[k], true
		}
		return event{}, false
	}
	for r.bk.n <= k {
		if !r.st.pull(r) {
			return event{}, false
		}
	}
	return event{at: r.bk.send(k).At, idx: k}, true
}

// predialing reports whether predial looks at event k, ev, whose first
// event was first: every event of a Run; a Stream's within its look-ahead.
func (r *run) predialing(k int, ev, first event) bool {
	return r.st == nil || (k < predialLookaheadSends && ev.at-first.at < predialLookahead)
}

// sendPools returns the pools of the sends that are not batch members,
// and of the members on a dedicated connection (Send.Conn), each once: of
// every send of a Run, of the sends a Stream has pulled so far.
func (r *run) sendPools() []*pool {
	seen := make(map[*pool]bool)
	var pools []*pool
	add := func(p *pool) {
		if p != nil && !seen[p] {
			seen[p] = true
			pools = append(pools, p)
		}
	}
	if r.st == nil {
		for _, ev := range r.events {
			if ev.race == nil {
				add(r.bk.pool(ev.idx))
				continue
			}
			for _, i := range ev.race.members {
				if p := r.bk.pool(i); p.dedicated() {
					add(p)
				}
			}
		}
		return pools
	}
	r.bk.live(func(c *sendChunk) {
		for _, p := range c.pools {
			add(p)
		}
	})
	return pools
}

// pullBatch is how many sends pullBatches hands over at a time.
const pullBatch = 1024

// pullBatches turns seq into a pull iterator, as iter.Pull does, but runs
// seq on a goroutine of its own that hands over its sends in batches
// (two batches ahead at most): the engine pulls from threads it has
// locked (the pacer, the event loop), where iter.Pull's coroutines may
// not switch. stop ends seq early and must be called once next is no
// longer needed.
func pullBatches(seq iter.Seq[Send]) (next func() (Send, bool), stop func()) {
	ch := make(chan []Send, 2)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		batch := make([]Send, 0, pullBatch)
		seq(func(s Send) bool {
			batch = append(batch, s)
			if len(batch) < pullBatch {
				return true
			}
			select {
			case ch <- batch:
				batch = make([]Send, 0, pullBatch)
				return true
			case <-quit:
				return false
			}
		})
		if len(batch) > 0 {
			select {
			case ch <- batch:
			case <-quit:
			}
		}
	}()
	var cur []Send
	next = func() (Send, bool) {
		for len(cur) == 0 {
			b, ok := <-ch
			if !ok {
				return Send{}, false
			}
			cur = b
		}
		s := cur[0]
		cur = cur[1:]
		return s, true
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
	return next, stop
}

// crowded reports whether a Stream that has dispatched its first k sends
// has maxStreamInFlight of them in flight. (A send finishes once, after
// its dispatch, so k − done counts those in flight.)
func (r *run) crowded(k int) bool {
	return r.st != nil && int64(k)-r.done.Load() >= int64(r.e.maxInFlight)
}

// room waits, in a Stream that has dispatched its first k sends, until
// fewer than maxStreamInFlight of them are in flight; it reports false
// when dctx ended first.
func (r *run) room(k int) bool {
	for r.crowded(k) {
		select {
		case <-r.freedCh:
		case <-r.dctx.Done():
			return false
		}
	}
	return true
}

// freed counts send i finished and wakes a dispatcher waiting for room.
// The caller holds r.mu.
func (r *run) freed(int) {
	r.done.Add(1)
	if r.freedCh != nil {
		select {
		case r.freedCh <- struct{}{}:
		default:
		}
	}
}
