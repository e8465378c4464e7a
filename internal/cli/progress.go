package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/session"
)

// progressEvery is how often a status line is printed when stderr is not a
// terminal and no other progress line was printed meanwhile.
const progressEvery = 15 * time.Second

// progressTick is how often the reporter wakes: it redraws a terminal's
// status line, announces due phases (run) and decides on the 15 s line.
const progressTick = 250 * time.Millisecond

// reporter is the one progress mechanism of run, check and infer. It
// prints on stderr (never stdout): one line per phase or step (line), and
// while started, a status line — rewritten in place on a terminal, else
// printed when progressEvery has passed since the last line of any kind.
// With -q it prints nothing. The clock is the time package's, so tests
// drive it under testing/synctest. A reporter is safe for concurrent use.
type reporter struct {
	w   io.Writer
	on  bool
	tty bool
	// status returns the status line for the time since start.
	status func(elapsed time.Duration) string

	mu      sync.Mutex
	begin   time.Time
	last    time.Time // when the last line was printed
	drawn   bool      // a terminal status line is on screen, without newline
	stopped chan struct{}
	done    chan struct{}
}

// newReporter returns a reporter on f's stderr, silent under -q; status
// gives the periodic line.
func newReporter(f *Factory, g *GlobalOptions, status func(elapsed time.Duration) string) *reporter {
	return &reporter{w: f.IO.ErrOut, on: !g.Quiet, tty: f.IO.ErrTTY, status: status}
}

// hooks are the session's progress callbacks, reporting here.
func (p *reporter) hooks() session.Progress {
	return session.Progress{
		Started: func(begin time.Time, _ time.Duration, _ patterns.Schedule) { p.start(begin) },
		Line:    func(line string) { p.line("%s", line) },
	}
}

// start begins the periodic status line; elapsed times count from begin.
// A second start without stop is ignored.
func (p *reporter) start(begin time.Time) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped != nil {
		return
	}
	p.begin, p.last = begin, time.Now()
	p.stopped, p.done = make(chan struct{}), make(chan struct{})
	go p.loop(p.stopped, p.done)
}

// line prints one progress line (a phase or step starting); on a terminal
// it replaces the status line, which the next tick redraws below it.
func (p *reporter) line(format string, a ...any) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printLocked(fmt.Sprintf(format, a...))
}

func (p *reporter) printLocked(s string) {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
	fmt.Fprintln(p.w, s)
	p.last = time.Now()
}

func (p *reporter) loop(stopped, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(progressTick)
	defer t.Stop()
	for {
		final := false
		select {
		case <-stopped:
			final = true
		case <-t.C:
		}
		p.mu.Lock()
		elapsed := time.Since(p.begin)
		switch {
		case final && p.drawn:
			fmt.Fprint(p.w, "\r\033[K")
			p.drawn = false
		case final:
		case p.tty:
			fmt.Fprint(p.w, "\r\033[K"+p.status(elapsed))
			p.drawn = true
		case time.Since(p.last) >= progressEvery:
			p.printLocked(p.status(elapsed))
		}
		p.mu.Unlock()
		if final {
			return
		}
	}
}

// stop ends the status line and waits until the reporter has finished
// writing; the reporter can be started again.
func (p *reporter) stop() {
	p.mu.Lock()
	stopped, done := p.stopped, p.done
	p.stopped = nil
	p.mu.Unlock()
	if stopped == nil {
		return
	}
	close(stopped)
	<-done
}

// sessionProgress is the reporter of run, check and infer: the session's
// lines (phases, steps, experiments) and its status line (Session.Status,
// with the time left on a terminal).
func sessionProgress(f *Factory, g *GlobalOptions, sess **session.Session) *reporter {
	p := newReporter(f, g, nil)
	p.status = func(elapsed time.Duration) string { return (*sess).Status(elapsed, p.tty) }
	return p
}
