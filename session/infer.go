package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// ErrIncomplete is wrapped by Infer's error when the budget ended before
// the candidates were told apart: the inference it returns is the best so
// far, marked "complete": false.
var ErrIncomplete = errors.New("the budget ended before the candidates were told apart")

// ErrNotConcluded is wrapped by Infer's error when the fit does not let
// infer conclude (the contract's exit 3): no family fits (misfit), or an
// expectation meets an answer that was not validated (approximate).
var ErrNotConcluded = errors.New("infer could not conclude")

// InferOptions choose how Infer runs. The zero value infers with the
// preflight, no expectation and infer's defaults.
type InferOptions struct {
	// Expect, when set, makes the inference a gate: another family is a
	// Findings error.
	Expect infer.Family
	// NoPreflight skips the preflight request (a scenario against a
	// server known to answer).
	NoPreflight bool
	// KeyName is the key the client identities vary ("ip",
	// "header:NAME"); "" derives it from the probe options' client header
	// or source addresses.
	KeyName string
	// MaxWindow is the longest window looked for; 0 means infer's default.
	MaxWindow time.Duration
	// Lead is how far ahead of the clock experiments are planned; 0 means
	// infer's default.
	Lead time.Duration
	// Without leaves behaviours out of infer's candidates (infer.Options.
	// Without: the leave-one-out test).
	Without []infer.Behaviour
}

// InferPlan is the plan recorded in the header of an infer record file.
type InferPlan struct {
	Command      string  `json:"command"`
	MaxRequests  int     `json:"max_requests"`
	MaxDurationS float64 `json:"max_duration_s"`
	Clients      int     `json:"clients"`
	Expect       string  `json:"expect,omitempty"`
}

// Infer identifies the algorithm that limits the targets, with its
// parameters, by adaptive experiments (see package infer) on one probe
// engine, within the caps (zero: infer's defaults). It sends a preflight
// first (unless NoPreflight); the inference is written to the record
// before its end line.
//
// The inference is nil when none was reached. The error carries its
// class: Usage before anything is sent; Findings when Expect names another
// family; Aborted when the preflight failed, the probing was interrupted
// or aborted, or the budget ended before the candidates were told apart
// (the inference then says "complete": false).
func (s *Session) Infer(ctx context.Context, opts InferOptions) (*infer.Inference, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	c := s.cfg.Caps
	plan := s.InferPlan(opts.Expect)
	if err := s.confirm("adaptive experiments (bursts, recovery scans, designed probes) within 6·W + 30 s", true); err != nil {
		return nil, err
	}
	opt := s.cfg.Probe
	opt.RaceMode = ""
	zero := s.cfg.zero()
	eng, err := s.newEngine(opt, zero, 0)
	if err != nil {
		return nil, err
	}
	defer eng.close()
	if err := s.open(ctx, zero, plan, nil); err != nil {
		return nil, err
	}
	if err := s.waitStart(ctx); err != nil {
		return nil, errors.Join(err, s.close(record.ReasonInterrupted))
	}
	var prior []record.Result
	dropped := 0 // busy preflights, sent but not fitted
	if !opts.NoPreflight {
		pre, err := eng.checkedPreflight(ctx, 0)
		if err != nil {
			return nil, errors.Join(err, s.close(record.ReasonAborted))
		}
		prior = []record.Result{pre}
		if prior, dropped, err = s.restWhileBusy(ctx, eng, zero, prior, cmp.Or(opts.MaxWindow, infer.DefaultMaxWindow)); err != nil {
			reason := record.ReasonAborted
			if ctx.Err() != nil {
				reason = record.ReasonInterrupted
			}
			return nil, errors.Join(err, s.close(reason))
		}
	}
	s.started(time.Now(), c.MaxDuration, patterns.Schedule{})
	io := s.inferOptions(opts, s.cfg.Probe, zero, prior)
	if io.MaxRequests > 0 {
		io.MaxRequests = max(io.MaxRequests-dropped, 1)
	}
	inf, inferErr := infer.Infer(ctx, eng, io)
	scheduled, sent := s.rec.counts()
	reason, err := s.endError(inferErr, sent, scheduled)
	var docs []any
	if inf != nil {
		inf.RecordFile = s.rec.path
		docs = append(docs, inf)
		if !inf.Complete && reason == record.ReasonCompleted {
			reason = record.ReasonBudget
		}
	}
	if cerr := s.close(reason, docs...); cerr != nil && err == nil {
		err = cerr
	}
	if inf == nil {
		return nil, err
	}
	if cl := ClassOf(err); err == nil || (cl != Usage && cl != Internal) {
		if ferr := fitVerdict(inf, opts.Expect, s.warn); ferr != nil {
			return inf, ferr
		}
	}
	if err == nil && !inf.Complete {
		err = Errorf(Aborted, "%w: the result is incomplete (see %s)", ErrIncomplete, s.rec.path)
	}
	return inf, err
}

// fitVerdict turns the inference's fit into the exit class of the
// contract's table:
//
//	fit          no expect          expect F, answer F   expect F, another
//	exact        0                  0                    1 (Findings)
//	approximate  0, a warning       0                    3 (Aborted), never 1
//	misfit       3                  3                    3
//
// A misfit is "no family fits; closest X" with the worst miss; warn hears
// the note of an approximate fit without expectation.
func fitVerdict(inf *infer.Inference, expect infer.Family, warn func(format string, a ...any)) error {
	switch inf.Fit {
	case infer.FitMisfit:
		msg := fmt.Sprintf("no family fits; %s (%.1f%% of the outcomes reproduced)", inf.ClosestPhrase(), inf.Reproduced*100)
		if len(inf.Misses) > 0 {
			m := inf.Misses[0]
			msg += fmt.Sprintf("; %s: expected %s, observed %s", m.Experiment, m.Expected, m.Observed)
		}
		return Errorf(Aborted, "%w: %s", ErrNotConcluded, msg)
	case infer.FitApproximate:
		if expect != "" && inf.Algorithm != expect {
			return Errorf(Aborted, "%w: expected %s; inferred %s, but not validated (fit approximate)", ErrNotConcluded, expect, inf.Algorithm)
		}
		if expect == "" {
			warn("%s fits what was observed but was not validated by an experiment it was not fitted on (fit approximate)", inf.Algorithm)
		}
	default:
		if expect != "" && inf.Algorithm != expect {
			return Errorf(Findings, "expected %s, inferred %s (fit %s, %.1f%% of the outcomes reproduced)", expect, inf.Algorithm, inf.Fit, inf.Reproduced*100)
		}
	}
	return nil
}

// InferPlan is the plan Infer records in the header, expecting expect.
func (s *Session) InferPlan(expect infer.Family) InferPlan {
	c := s.cfg.Caps
	return InferPlan{Command: s.cfg.Command, MaxRequests: c.MaxRequests, MaxDurationS: c.MaxDuration.Seconds(),
		Clients: s.cfg.clients(), Expect: string(expect)}
}

// inferOptions are infer's options for this session, probing with p.
func (s *Session) inferOptions(opts InferOptions, p probe.Options, zero time.Time, prior []record.Result) infer.Options {
	key := opts.KeyName
	switch {
	case key != "":
	case p.ClientHeader != "":
		key = "header:" + p.ClientHeader
	case len(p.SourceIPs) > 0:
		key = "ip"
	default:
		key = infer.KeyUnknown
	}
	maxReq := s.cfg.Caps.MaxRequests
	if maxReq > 0 && len(prior) > 0 {
		maxReq = max(maxReq-len(prior), 1)
	}
	var mu sync.Mutex
	last, announced := "", false
	return infer.Options{
		Origin:      zero,
		Clients:     s.cfg.clients(),
		KeyName:     key,
		MaxRequests: maxReq,
		MaxDuration: s.cfg.Caps.MaxDuration,
		MaxWindow:   opts.MaxWindow,
		Prior:       prior,
		Lead:        opts.Lead,
		Without:     opts.Without,
		Timeout:     p.Timeout,
		MaxRate:     s.cfg.Caps.MaxRate,
		Tool:        s.cfg.Tool,
		ServerClock: s.rec.serverClock,
		OnBudget: func(window, budget time.Duration) {
			s.replanned(budget)
			mu.Lock()
			again := announced
			announced = true
			mu.Unlock()
			if again {
				s.line("budget extended to at most %s", units.HumanDuration(RoundDuration(budget)))
				return
			}
			s.line("time scale W ≈ %s: budget at most %s (6·W + 30 s)", units.HumanDuration(RoundDuration(window)), units.HumanDuration(RoundDuration(budget)))
		},
		OnPhase: func(name string, sent int) {
			mu.Lock()
			repeat := name == last
			last = name
			mu.Unlock()
			if !repeat {
				s.line("infer: %s (%d requests sent)", name, sent)
			}
		},
	}
}

// RoundDuration rounds d for people: to the second from 10 s, to 100 ms
// from 1 s, else to the millisecond.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// busyPreflights bounds the preflights infer sends to a limiter busy before
// the run, and busyMarginMin is the least each rest adds to the advertised
// time (5 % of it otherwise): clocks, and delay-seconds rounded.
const (
	busyPreflights = 3
	busyMarginMin  = 100 * time.Millisecond
)

// restWhileBusy rests, when infer's latest preflight shows the limiter busy
// (infer.BusyRest), for the time it advertises until the quota is whole —
// or, when it advertises none (a server without rate-limit headers, or a
// Retry-After alone: the time until one request), for at least maxWindow,
// the longest window infer looks for: after that much silence any window
// it can name is whole, and any bucket it can name full — (all
// rests together at most --max-duration, or infer's default when none is
// set: a hostile Retry-After of a year waits no longer), and sends another
// preflight; up to busyPreflights in all. The preflights before a rest are
// left out of what is fitted (a state from before the run), the rest is
// outside the budget, as check's is.
func (s *Session) restWhileBusy(ctx context.Context, eng *engine, zero time.Time, prior []record.Result, maxWindow time.Duration) (fitted []record.Result, dropped int, err error) {
	left := cmp.Or(s.cfg.Caps.MaxDuration, infer.DefaultMaxDuration)
	for range busyPreflights - 1 {
		rest, whole, why, busy := infer.BusyRest(prior[len(prior)-1], zero, 0)
		if !busy {
			return prior, dropped, nil
		}
		what := "the time it advertises until its quota is whole"
		if !whole && rest < maxWindow {
			rest, what = maxWindow, "the longest window infer looks for: it advertises no time until its quota is whole"
		}
		rest = min(rest+max(rest/20, busyMarginMin), left)
		if rest <= 0 {
			s.line("warning: infer: the preflight shows the limiter busy (%s, an earlier run's requests or others') and --max-duration leaves no time to rest: the experiments start from a busy state", why)
			return prior, dropped, nil
		}
		left -= rest
		s.line("infer: the preflight shows the limiter busy (%s: an earlier run's requests, or others'); resting %s, %s, before the experiments", why, units.HumanDuration(rest), what)
		timer := time.NewTimer(rest)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return prior, dropped, Errorf(Aborted, "interrupted while resting after a busy preflight")
		}
		pre, err := eng.checkedPreflight(ctx, 0)
		if err != nil {
			return prior, dropped, err
		}
		prior, dropped = []record.Result{pre}, dropped+len(prior)
	}
	return prior, dropped, nil
}
