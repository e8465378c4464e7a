package session

import (
	"fmt"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/units"
)

// progress is what the session knows of the probing in progress, for
// Status: the planned duration and Run's schedule.
type progress struct {
	mu      sync.Mutex
	planned time.Duration
	sched   patterns.Schedule
}

// started records that the probing began at begin and tells the front end
// (Progress.Started).
func (s *Session) started(begin time.Time, planned time.Duration, sc patterns.Schedule) {
	s.prog.mu.Lock()
	s.prog.planned, s.prog.sched = planned, sc
	s.prog.mu.Unlock()
	if f := s.cfg.Progress.Started; f != nil {
		f(begin, planned, sc)
	}
}

// replanned records a planned duration learnt later (Progress.Planned).
func (s *Session) replanned(planned time.Duration) {
	s.prog.mu.Lock()
	s.prog.planned = planned
	s.prog.mu.Unlock()
	if f := s.cfg.Progress.Planned; f != nil {
		f(planned)
	}
}

// Status is the session's status line, elapsed after the probing began.
// For Run: the requests done of the schedule's, by class, and with left
// the time left ("12/40 done · 8 accepted · 4 rejected · 0 other ·
// 0 errors · 0 late · 3s left"). For Check and Infer: the requests done
// (and of the schedule in progress), and the time against the planned
// duration ("check: 12 requests done (this run 3/9) · 20s of at most
// 5m9s"). It is safe for concurrent use.
func (s *Session) Status(elapsed time.Duration, left bool) string {
	s.prog.mu.Lock()
	planned, sc := s.prog.planned, s.prog.sched
	s.prog.mu.Unlock()
	c := s.Counts()
	if s.cfg.Command != "run" {
		done := units.Count(int(c.Done), "request") + " done"
		if c.RunTotal > 0 {
			done += fmt.Sprintf(" (this run %d/%d)", c.RunDone, c.RunTotal)
		}
		return fmt.Sprintf("%s: %s · %s of at most %s", s.cfg.Command, done, roundElapsed(elapsed), roundElapsed(planned))
	}
	line := fmt.Sprintf("%d/%d done · %d accepted · %d rejected · %d other · %d errors · %d late",
		c.Done, sc.Len(), c.Accepted, c.Rejected, c.Other, c.Errors, c.Late)
	if left {
		line += fmt.Sprintf(" · %s left", units.HumanDuration(max(sc.Duration-elapsed, 0).Round(time.Second)))
	}
	return line
}

// announcePhases tells the front end (Progress.Line) of each phase of sc
// as it becomes due, begin being when offset 0 is. stop ends the
// announcements and returns once no more can come.
func (s *Session) announcePhases(begin time.Time, sc patterns.Schedule) (stop func()) {
	if s.cfg.Progress.Line == nil || len(sc.Phases) == 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(0)
		defer t.Stop()
		for _, ph := range sc.Phases {
			t.Reset(time.Until(begin.Add(ph.Offset)))
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if ph.Pattern == patterns.PatternPause {
				s.line("phase %s: %s", ph.Name, units.HumanDuration(ph.Duration))
			} else {
				s.line("phase %s: %d requests over %s", ph.Name, ph.Requests, units.HumanDuration(ph.Duration))
			}
		}
	}()
	return func() { close(quit); <-done }
}

// roundElapsed formats an elapsed time (or a budget) to the second, or to
// the millisecond below a second.
func roundElapsed(d time.Duration) string {
	if d < time.Second {
		return max(d, 0).Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
