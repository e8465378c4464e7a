package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
)

// defaultLead is how long after "now" a schedule's offset 0 is due when the
// schedule is not anchored to the clock: time for the engine to dial and
// prepare connections before the first deadline.
const defaultLead = 100 * time.Millisecond

// ErrRaceMode is returned (wrapped) for a schedule that races in a mode
// other than the one its engine was built with.
var ErrRaceMode = errors.New("session: race mode differs from the engine's")

// errTooManyOther makes the probe engine abort a run whose answers are
// too often neither accepted nor rejected.
var errTooManyOther = errors.New("more than 5% of the answers were neither accepted nor rejected")

// The "other" guard: a run aborts once more than one answer in
// otherShareDen is neither accepted nor rejected, after at least otherMin
// such answers (so one early 502 does not).
const (
	otherShareDen = 20
	otherMin      = 5
)

// engine runs patterns.Schedules on one probe engine of the session and
// records the results in the session's record, renumbered into its one
// Seq space. It is the one implementation of the interface verify and
// infer declare ("run this schedule, give me the records"):
//
//	Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error)
//
// Runs execute one at a time.
type engine struct {
	s        *Session
	pe       *probe.Engine
	raceMode patterns.RaceMode
	lead     time.Duration
	zero     time.Time
	// guard aborts a run on too many "other" answers, classified against
	// declared.
	guard    bool
	declared int
	// onBegin is called with each Run's begin before anything is sent.
	onBegin func(begin time.Time, s patterns.Schedule)

	mu   sync.Mutex // serialises Run
	next int64      // the probe engine's next Seq
}

// newEngine builds a probe engine from opt (its errors are Usage).
func (s *Session) newEngine(opt probe.Options, zero time.Time, lead time.Duration) (*engine, error) {
	pe, err := probe.New(opt)
	if err != nil {
		return nil, WithClass(Usage, err)
	}
	rm := patterns.RaceMode(opt.RaceMode)
	if rm == "" {
		rm = patterns.Barrier
	}
	if lead <= 0 {
		lead = defaultLead
	}
	return &engine{s: s, pe: pe, raceMode: rm, lead: lead, zero: zero}, nil
}

func (e *engine) close() { e.pe.Close() }

// Run sends sched open-loop and returns one result per send, in schedule
// order, each also recorded as it completes. Offset 0 is due at
// sched.Start when the schedule is anchored to the clock (a Start already
// past is an error), else at now + lead. The errors are the probe
// engine's: probe.ErrInterrupted, probe.ErrBudget, probe.ErrAborted, or
// one matching probe.ErrUsage — every result is returned and recorded in
// each case.
func (e *engine) Run(ctx context.Context, sched patterns.Schedule) ([]record.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if sched.Streamed() {
		return nil, errors.New("session: a streamed schedule is run by Stream")
	}
	begin, err := e.beginAt(sched)
	if err != nil {
		return nil, err
	}
	sends := make([]probe.Send, len(sched.Sends))
	for i, snd := range sched.Sends {
		sends[i] = probe.Send{At: snd.At, Client: snd.Client, Phase: snd.Phase, Batch: snd.Batch, Conn: snd.Conn}
	}
	if e.onBegin != nil {
		e.onBegin(begin, sched)
	}
	rec := e.s.rec
	sink := &runSink{e: e, first: rec.reserve(len(sends)), base: e.next, written: make([]bool, len(sends))}
	e.s.counts.runDone.Store(0)
	e.s.counts.runTotal.Store(int64(len(sends)))
	results, err := e.pe.Run(ctx, e.zero, begin, sends, sink)
	e.next += int64(len(results))
	// Results the sink never saw (the engine stops writing to a sink that
	// failed, as after the "other" guard) still go to the file.
	werr := sink.finish(results)
	rec.keep(results...)
	if err == nil && werr != nil {
		err = werr
	}
	return results, err
}

// Stream sends a streamed schedule (patterns.Schedule.Streamed) open-loop
// as Run does, each result recorded as it completes, and returns the
// summary of the results, which are not returned, and kept only by a
// record held in memory (no file): a record file's end line counts them.
// Its errors are Run's.
func (e *engine) Stream(ctx context.Context, sched patterns.Schedule) (probe.Summary, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	begin, err := e.beginAt(sched)
	if err != nil {
		return probe.Summary{}, err
	}
	if e.onBegin != nil {
		e.onBegin(begin, sched)
	}
	n := sched.Len()
	sink := &runSink{e: e, first: e.s.rec.reserve(int(n)), base: e.next, sum: probe.NewSummarizer(false), streamed: true}
	e.s.counts.runDone.Store(0)
	e.s.counts.runTotal.Store(n)
	sends := func(yield func(probe.Send) bool) {
		for snd := range sched.All() {
			if !yield(probe.Send{At: snd.At, Client: snd.Client, Phase: snd.Phase, Batch: snd.Batch, Conn: snd.Conn}) {
				return
			}
		}
	}
	counts, err := e.pe.Stream(ctx, e.zero, begin, sends, sink)
	e.next += counts.Results
	if err == nil && sink.err != nil {
		err = sink.err
	}
	return sink.sum.Summary(), err
}

// beginAt returns when offset 0 of sched is due: sched.Start when the
// schedule is anchored to the clock (a Start already past is an error),
// else now + lead. It also refuses a schedule that races in a mode other
// than the engine's.
func (e *engine) beginAt(sched patterns.Schedule) (time.Time, error) {
	if sched.Batches() > 0 && sched.RaceMode != "" && sched.RaceMode != e.raceMode {
		return time.Time{}, fmt.Errorf("%w: the schedule races in %s mode, the engine in %s", ErrRaceMode, sched.RaceMode, e.raceMode)
	}
	now := time.Now()
	if sched.Start.IsZero() {
		return now.Add(e.lead), nil
	}
	if sched.Start.Before(now) {
		return time.Time{}, fmt.Errorf("session: the schedule was due to start at %s, %v ago", sched.Start.Format(time.RFC3339Nano), now.Sub(sched.Start).Round(time.Millisecond))
	}
	return sched.Start, nil
}

// preflight sends the one request Check and Infer begin with and records
// it (not counted in Counts: it is not part of the probing).
func (e *engine) preflight(ctx context.Context) (record.Result, []byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	res, body, err := e.pe.Preflight(ctx, e.zero)
	if errors.Is(err, probe.ErrClosed) {
		return res, body, err
	}
	e.next++
	if res.Outcome == "" { // ctx ended before it was sent
		return res, body, err
	}
	res.Seq = e.s.rec.reserve(1)
	if werr := e.s.rec.write(res); werr != nil {
		return res, body, fmt.Errorf("write %s: %w", e.s.rec.path, werr)
	}
	e.s.rec.keep(res)
	return res, body, err
}

// runSink is the probe engine's sink for one Run: it renumbers each result
// into the record's Seq space, writes it through the recorder, counts it,
// and applies the "other" guard. The probe engine calls it from one
// goroutine at a time.
type runSink struct {
	e       *engine
	first   int64  // the record Seq of the run's first send
	base    int64  // the probe engine's Seq of the run's first send
	written []bool // by send index (Run)
	done    int64
	// A Stream's sink also summarises the results and counts them for the
	// record's end line; it keeps its first write error (the probe engine
	// goes on writing to it).
	sum      *probe.Summarizer
	streamed bool
	err      error
}

// WriteResult renumbers, writes and counts r. Once the guard trips it
// returns errTooManyOther, which makes the probe engine abort the run.
func (k *runSink) WriteResult(r record.Result) error {
	i := r.Seq - k.base
	r.Seq = k.first + i
	if k.sum != nil {
		k.sum.Add(r)
	}
	if k.streamed {
		k.e.s.rec.stream(r)
	}
	if err := k.e.s.rec.write(r); err != nil {
		if k.err == nil {
			k.err = err
		}
		return err
	}
	if i >= 0 && i < int64(len(k.written)) {
		k.written[i] = true
	}
	k.done++
	c := &k.e.s.counts
	c.runDone.Store(k.done)
	c.count(r, k.e.declared)
	if k.e.guard && c.overOther() {
		return errTooManyOther
	}
	return nil
}

// finish renumbers the results the probe engine returned and writes those
// the sink never saw.
func (k *runSink) finish(results []record.Result) error {
	var err error
	for i := range results {
		results[i].Seq = k.first + int64(i)
		if i < len(k.written) && k.written[i] {
			continue
		}
		if werr := k.e.s.rec.write(results[i]); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// count counts r.
func (c *counters) count(r record.Result, declared int) {
	c.done.Add(1)
	class, _ := record.Classify(r, declared)
	switch class {
	case record.ClassAccepted:
		c.accepted.Add(1)
	case record.ClassRejected:
		c.rejected.Add(1)
	case record.ClassOther:
		c.other.Add(1)
		c.mu.Lock()
		if c.otherStatus == nil {
			c.otherStatus = map[int]int{}
		}
		c.otherStatus[r.Status]++
		c.mu.Unlock()
	case record.ClassError:
		c.errs.Add(1)
	}
	if class != record.ClassNotSent {
		c.sent.Add(1)
	}
	if r.Sent != 0 && time.Duration(r.Sent-r.Sched) > probe.LateThreshold {
		c.late.Add(1)
	}
}

// overOther reports, once, that more than one answer in otherShareDen (and
// at least otherMin) were neither accepted nor rejected.
func (c *counters) overOther() bool {
	answers := c.accepted.Load() + c.rejected.Load() + c.other.Load()
	o := c.other.Load()
	return o >= otherMin && o*otherShareDen > answers && c.tooManyOther.CompareAndSwap(false, true)
}
