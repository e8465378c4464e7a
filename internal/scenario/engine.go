// Package scenario holds rlprobe's canned runs — the demo, and later the
// selftest — and the adapter that lets schedule-driven code (the verifier's
// check suite, adaptive inference, the demo) run patterns.Schedules on the
// probe engine without importing it.
package scenario

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

// DefaultLead is how long after "now" a schedule's offset 0 is due when the
// schedule is not anchored to the clock: time for the engine to dial and
// prepare connections before the first deadline.
const DefaultLead = 100 * time.Millisecond

// ErrRaceMode is returned (wrapped) by Run for a schedule that races in a
// mode other than the one the probe engine was built with.
var ErrRaceMode = errors.New("scenario: race mode differs from the engine's")

// EngineConfig configures an Engine.
type EngineConfig struct {
	// Probe sends the requests; required. The Engine does not close it.
	Probe *probe.Engine
	// Sink receives every result as it completes (a *record.Writer, usually);
	// nil records nothing.
	Sink probe.Sink
	// Zero is the record file's Header.Start: result times are nanoseconds
	// since Zero. Required.
	Zero time.Time
	// RaceMode is the mode Probe was built with (probe.Options.RaceMode);
	// "" means barrier. Run refuses schedules that race in another mode.
	RaceMode patterns.RaceMode
	// Lead is how far ahead of now an unanchored schedule begins; 0 means
	// DefaultLead.
	Lead time.Duration
	// Now reads the clock; nil means time.Now. Tests in a synctest bubble
	// may leave it nil (the bubble's clock is time.Now's).
	Now func() time.Time
	// OnBegin, when set, is called with each Run's begin time (the instant
	// offset 0 is due) before anything is sent: progress reporting hangs
	// off it.
	OnBegin func(begin time.Time, s patterns.Schedule)
	// OnResult, when set, is called after each result of a Run has gone to
	// the sink, with how many results that Run has produced so far and how
	// many sends it schedules: the hook of progress reporting. It is called
	// from the probe engine's goroutines, one call at a time per Run, and
	// must return quickly.
	OnResult func(done, total int)
}

// Engine runs patterns.Schedules on a probe engine and records the results.
// It is the one implementation of the interface the verifier and the
// inferrer declare ("run this schedule, give me the records"):
//
//	Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error)
//
// Runs execute one at a time; Seq numbers continue from one Run to the
// next (the probe engine's counter). An Engine is safe for concurrent use.
type Engine struct {
	cfg EngineConfig

	runMu     sync.Mutex // serialises Run
	mu        sync.Mutex // guards the counters
	scheduled int64
	sent      int64
}

// NewEngine returns an Engine over cfg.Probe.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Probe == nil {
		return nil, errors.New("scenario: EngineConfig.Probe is required")
	}
	if cfg.Zero.IsZero() {
		return nil, errors.New("scenario: EngineConfig.Zero is required (the record header's start)")
	}
	if cfg.Lead <= 0 {
		cfg.Lead = DefaultLead
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RaceMode == "" {
		cfg.RaceMode = patterns.Barrier
	}
	return &Engine{cfg: cfg}, nil
}

// Run sends s open-loop and returns one result per send, in schedule
// order, each also written to the sink as it completes. Offset 0 is due at
// s.Start when the schedule is anchored to the clock (a Start already past
// is an error), else at now + Lead. The errors are the probe engine's:
// probe.ErrInterrupted (ctx cancelled), probe.ErrBudget (ctx deadline),
// probe.ErrAborted, or one matching probe.ErrUsage for a schedule the
// engine refuses — every result is returned and recorded in each case.
func (e *Engine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if s.Batches() > 0 && s.RaceMode != "" && s.RaceMode != e.cfg.RaceMode {
		return nil, fmt.Errorf("%w: the schedule races in %s mode, the engine in %s", ErrRaceMode, s.RaceMode, e.cfg.RaceMode)
	}
	now := e.cfg.Now()
	begin := now.Add(e.cfg.Lead)
	if !s.Start.IsZero() {
		if s.Start.Before(now) {
			return nil, fmt.Errorf("scenario: the schedule was due to start at %s, %v ago", s.Start.Format(time.RFC3339Nano), now.Sub(s.Start).Round(time.Millisecond))
		}
		begin = s.Start
	}
	sends := make([]probe.Send, len(s.Sends))
	for i, snd := range s.Sends {
		sends[i] = probe.Send{At: snd.At, Client: snd.Client, Phase: snd.Phase, Batch: snd.Batch}
	}
	if e.cfg.OnBegin != nil {
		e.cfg.OnBegin(begin, s)
	}
	var sink probe.Sink = e.cfg.Sink
	if e.cfg.OnResult != nil {
		sink = &countingSink{w: e.cfg.Sink, total: len(sends), on: e.cfg.OnResult}
	}
	results, err := e.cfg.Probe.Run(ctx, e.cfg.Zero, begin, sends, sink)
	var sent int64
	for _, r := range results {
		if r.Outcome != record.OutcomeNotSent {
			sent++
		}
	}
	e.AddCounts(int64(len(results)), sent)
	return results, err
}

// Counts returns how many requests all Runs so far scheduled and sent
// (outcome response or error): the numbers of the record file's end line.
func (e *Engine) Counts() (scheduled, sent int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.scheduled, e.sent
}

// AddCounts adds results recorded outside Run (a preflight request) to the
// counts.
func (e *Engine) AddCounts(scheduled, sent int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scheduled += scheduled
	e.sent += sent
}

// countingSink passes results on to w (when not nil) and reports each one
// to on with the Run's count so far.
type countingSink struct {
	w     probe.Sink
	total int
	on    func(done, total int)

	mu   sync.Mutex
	done int
}

// WriteResult writes r to the wrapped sink, then counts it; a result the
// wrapped sink refuses is not counted.
func (c *countingSink) WriteResult(r record.Result) error {
	if c.w != nil {
		if err := c.w.WriteResult(r); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done++
	c.on(c.done, c.total)
	return nil
}
