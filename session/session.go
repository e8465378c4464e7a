package session

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Caps are the safety caps of a session: a plan over one is refused before
// anything is sent (Usage). The zero value of a field means no cap (Check
// and Infer then use their package's defaults).
type Caps struct {
	MaxRequests int
	// MaxRequestsDefault says MaxRequests is the command's default, not
	// chosen: Check raises it to what its suite plans for the declared
	// policy, up to SuiteMaxRequestsCeiling (SuiteCap).
	MaxRequestsDefault bool
	MaxDuration        time.Duration
	// MaxRate is requests per second: the schedule's sustained rate and its
	// largest race. The probe engine's guard (probe.Options.MaxRate) is
	// separate.
	MaxRate float64
}

// Progress are the callbacks through which a front end follows a session.
// Each may be nil. They are called from the session's goroutines and must
// return quickly; Counts may be read from any goroutine at any time.
type Progress struct {
	// Started is called once, when the probing proper starts: for Run with
	// the instant the schedule's offset 0 is due and the schedule; for Check
	// and Infer after the preflight, with the planned duration (an empty
	// schedule).
	Started func(begin time.Time, planned time.Duration, s patterns.Schedule)
	// Planned is called when the planned duration becomes known later
	// (Infer, once the time scale W is).
	Planned func(planned time.Duration)
	// Line is called with a line worth showing: the wait for StartAt, the
	// policy and plan Check found, a suite step, an experiment of Infer.
	Line func(line string)
}

// Config is a resolved target and the choices of one session. Fill it with
// Target.Resolve, or by hand: Probe.URLs is the one required field, and
// the zero value of every other field works (no caps, no record file, no
// callbacks, the record's start when the operation begins).
type Config struct {
	// Command is run, check or infer: it names the session in the record
	// header's plan (Infer).
	Command string
	// Probe is the engine's options. Probe.Agent defaults to DefaultAgent.
	Probe probe.Options
	// Tool is the producing tool, written in the record header and the
	// documents ("rlprobe v1.2.3").
	Tool string
	// Seed is the seed of every randomised choice, recorded in the header.
	Seed uint64
	// Clients is the number of client identities (0 means 1); ClientsSet
	// says the user chose it explicitly, ClientsImplied that client values
	// or source addresses implied it.
	Clients        int
	ClientsSet     bool
	ClientsImplied bool
	Caps           Caps
	// StartAt, when set, is when the first request (Check, Infer: the
	// preflight) goes out, so that agents given the same time start
	// together.
	StartAt time.Time
	// TimeRef, when set, is the URL the clock offset is measured against
	// before the session (its Date header or arrival echo).
	TimeRef string
	// TimeoutDefault says Probe.Timeout is the default, not chosen: check
	// raises it for a bucket rule by the rule's period, the longest a
	// queueing leaky bucket holds a request (BucketTimeout).
	TimeoutDefault bool
	// Zero, when set, is the record's start, from which every result time
	// counts; zero means the instant the operation begins.
	Zero time.Time
	// Out is the record file; empty keeps the record in memory only
	// (Record returns it either way). Force replaces an existing file.
	Out   string
	Force bool
	// OutDefault says Out is the default name, not one the user chose:
	// when a file of that name exists (another run started in the same
	// millisecond), the record takes the next free name (record.CreateFree)
	// and RecordFile says which.
	OutDefault bool
	// Confirm, when set, is called with a description of what is about to
	// be sent (targets, caps, plan) before anything is: an error refuses.
	Confirm func(summary string) error
	// Warn, when set, receives warnings: a clock that could not be
	// measured or estimated, a report that could not be appended.
	Warn func(msg string)
	// Progress follows the session.
	Progress Progress
}

// zero returns the record's start for an operation beginning now.
func (c *Config) zero() time.Time {
	if c.Zero.IsZero() {
		return time.Now()
	}
	return c.Zero
}

// clients returns the number of client identities.
func (c *Config) clients() int { return max(c.Clients, 1) }

// clientsChosen reports whether the number of clients was chosen, by
// --clients or implied by values or addresses.
func (c *Config) clientsChosen() bool { return c.ClientsSet || c.ClientsImplied }

// Session is one probing session over a resolved target: it owns the
// probe engines, the record file's life (its header, one Seq space across
// every engine, the end line with the clock estimate), the preflight, the
// caps and the progress callbacks. Between a probe engine and the
// record.Writer there are two layers: the sink of each schedule run
// (renumbering, counting, the "other" guard) and the session's recorder
// (clock samples, the file).
//
// Call one of Run, Check or Infer once; a second call is an error. Record
// then returns what was recorded. Counts may be read from any goroutine at
// any time; the other methods are for one goroutine.
type Session struct {
	cfg  Config
	used atomic.Bool

	rec    *recorder // the record of the operation, once begun
	counts counters
	prog   progress
}

// New returns a session over cfg.
func New(cfg Config) (*Session, error) {
	if len(cfg.Probe.URLs) == 0 {
		return nil, Errorf(Usage, "session: no target URL")
	}
	if cfg.Probe.Agent == "" {
		cfg.Probe.Agent = DefaultAgent
	}
	s := &Session{cfg: cfg}
	if msg := cfg.ProxyWarning(); msg != "" {
		s.warn("%s", msg)
	}
	return s, nil
}

// Config returns the session's configuration.
func (s *Session) Config() Config { return s.cfg }

// begin marks the session used: a second operation is an error.
func (s *Session) begin() error {
	if s.used.Swap(true) {
		return errors.New("session: Run, Check and Infer may be called once per session")
	}
	return nil
}

// Targets returns the target URLs with their secrets redacted.
func (s *Session) Targets() []string {
	out := make([]string, len(s.cfg.Probe.URLs))
	for i, u := range s.cfg.Probe.URLs {
		out[i] = s.redact(u)
	}
	return out
}

// redactText redacts URLs inside an error's text (a *url.Error quotes the
// whole URL).
func (s *Session) redactText(t string) string {
	if s.cfg.Probe.Redactor == nil {
		return record.NewRedactor(nil, nil).Text(t)
	}
	return s.cfg.Probe.Redactor.Text(t)
}

func (s *Session) redact(u string) string {
	if s.cfg.Probe.Redactor == nil {
		return record.NewRedactor(nil, nil).URL(u)
	}
	return s.cfg.Probe.Redactor.URL(u)
}

// Record returns what the operation recorded: the header, the results in
// Seq order and the end line, as the record file holds them (nil before
// an operation began).
func (s *Session) Record() *record.Run {
	if s.rec == nil {
		return nil
	}
	return s.rec.run()
}

// RecordFile returns the record file's path ("" when kept in memory).
func (s *Session) RecordFile() string { return s.cfg.Out }

// line reports a progress line.
func (s *Session) line(format string, a ...any) {
	if s.cfg.Progress.Line != nil {
		s.cfg.Progress.Line(fmt.Sprintf(format, a...))
	}
}

// warn reports a warning.
func (s *Session) warn(format string, a ...any) {
	if s.cfg.Warn != nil {
		s.cfg.Warn(fmt.Sprintf(format, a...))
	}
}

// confirm describes what is about to happen and asks Config.Confirm.
func (s *Session) confirm(plan string, rate bool) error {
	if s.cfg.Confirm == nil {
		return nil
	}
	return s.cfg.Confirm(s.describe(plan, rate))
}

// describe is the summary of targets, caps (with the rate cap when rate)
// and plan that Confirm gets.
func (s *Session) describe(plan string, rate bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets: %s\n", strings.Join(s.Targets(), ", "))
	c := s.cfg.Caps
	fmt.Fprintf(&b, "caps: %d requests, %s", c.MaxRequests, units.HumanDuration(c.MaxDuration))
	if rate {
		fmt.Fprintf(&b, ", %s", units.HumanRate(c.MaxRate))
	}
	if plan != "" {
		fmt.Fprintf(&b, "\nplan: %s", plan)
	}
	return b.String()
}

// Counts are the session's requests so far, by what became of them.
type Counts struct {
	// Done counts results; Sent those sent (responses and errors).
	Done, Sent int64
	// Accepted, Rejected and Other count responses by class; Errors
	// transport failures; Late sends more than probe.LateThreshold late.
	Accepted, Rejected, Other, Errors, Late int64
	// RunDone of RunTotal are the results of the schedule in progress.
	RunDone, RunTotal int64
}

// counters are Counts, updated concurrently.
type counters struct {
	done, sent, accepted, rejected, other, errs, late atomic.Int64
	runDone, runTotal                                 atomic.Int64
	tooManyOther                                      atomic.Bool

	mu          sync.Mutex
	otherStatus map[int]int
}

// Counts returns the counts so far. It is safe for concurrent use.
func (s *Session) Counts() Counts {
	c := &s.counts
	return Counts{
		Done: c.done.Load(), Sent: c.sent.Load(), Accepted: c.accepted.Load(), Rejected: c.rejected.Load(),
		Other: c.other.Load(), Errors: c.errs.Load(), Late: c.late.Load(),
		RunDone: c.runDone.Load(), RunTotal: c.runTotal.Load(),
	}
}
