package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Schedule returns the schedule of plan in this session: seeded with
// Config.Seed, starting at Config.StartAt (a plan anchored to the clock,
// such as an edge aimed at a window period, starts shortly after now
// without one). A plan made only of steady, ramp and recovery phases
// (patterns.Plan.Streamable) gets a streamed schedule, whose sends are
// computed as they are sent. A plan over a cap is refused (Usage), naming
// the cap. Nothing is sent.
func (s *Session) Schedule(plan *patterns.Plan) (patterns.Schedule, error) {
	start := s.cfg.StartAt
	if start.IsZero() && plan.NeedsStart() {
		start = time.Now().Add(startLead)
	}
	sched, err := plan.Streamed(s.cfg.Seed, start)
	if err != nil {
		return sched, WithClass(Usage, err)
	}
	if sched.Start.IsZero() {
		sched.Start = s.cfg.StartAt
	}
	return sched, s.checkCaps(sched, plan.MaxRate())
}

// checkCaps refuses a schedule over a safety cap, naming the cap (Usage).
// sustained is the schedule's highest sustained rate in requests per
// second (patterns.Plan.MaxRate).
func (s *Session) checkCaps(sc patterns.Schedule, sustained float64) error {
	var probs []problem.Problem
	c := s.cfg.Caps
	if n := sc.Len(); c.MaxRequests > 0 && n > int64(c.MaxRequests) {
		probs = append(probs, msgf("the plan sends %d requests, over the cap --max-requests %d: raise it if you mean it", n, c.MaxRequests))
	}
	if d := sc.Duration; c.MaxDuration > 0 && d > c.MaxDuration {
		probs = append(probs, msgf("the plan lasts %v, over the cap --max-duration %v: raise it if you mean it", d.Round(time.Millisecond), c.MaxDuration))
	}
	if n := len(s.cfg.Probe.ClientValues); n > 0 && sc.Clients > n {
		probs = append(probs, msgf("the plan uses %d clients, but --client-values has %d values", sc.Clients, n))
	}
	if c.MaxRate > 0 {
		batch := map[int]int{}
		for _, snd := range sc.Sends {
			if snd.Batch != 0 {
				batch[snd.Batch]++
			}
		}
		for _, n := range batch {
			if float64(n) > c.MaxRate {
				probs = append(probs, msgf("a race releases %d requests at once, over the cap --max-rate %s: raise it if you mean it",
					n, units.FormatRate(c.MaxRate)))
				break
			}
		}
		if sustained > c.MaxRate*(1+1e-9) {
			probs = append(probs, msgf("the plan sends %s, over the cap --max-rate %s: raise it if you mean it",
				units.FormatRate(sustained), units.FormatRate(c.MaxRate)))
		}
	}
	return problems(probs)
}

// Run fires plan at the targets, open loop, and records every request:
// the schedule (see Schedule) is checked against the caps, described to
// Config.Confirm, then sent on one probe engine; each result is written to
// the record as it completes, and the record is closed with its end line
// whatever happens. It returns the summary of the results.
//
// The error carries its class: Usage for a plan refused before anything
// was sent (the summary is then empty and Record nil); Aborted when the
// run was interrupted (ctx), aborted (transport errors, or more than 5 %
// of the answers neither accepted nor rejected, which also ends a
// completed run with an error) or could not start — the summary and the
// record then hold what was sent.
func (s *Session) Run(ctx context.Context, plan *patterns.Plan) (probe.Summary, error) {
	if err := s.begin(); err != nil {
		return probe.Summary{}, err
	}
	sched, err := s.Schedule(plan)
	if err != nil {
		return probe.Summary{}, err
	}
	if err := s.confirm(describeSchedule(sched), true); err != nil {
		return probe.Summary{}, err
	}
	opt := s.cfg.Probe
	opt.RaceMode = string(sched.RaceMode)
	zero := s.cfg.zero()
	eng, err := s.newEngine(opt, zero, 0)
	if err != nil {
		return probe.Summary{}, err
	}
	defer eng.close()
	eng.guard = true
	stopPhases := func() {}
	eng.onBegin = func(begin time.Time, sc patterns.Schedule) {
		s.started(begin, sc.Duration, sc)
		stopPhases = s.announcePhases(begin, sc)
	}
	if err := s.open(ctx, zero, plan, nil); err != nil {
		return probe.Summary{}, err
	}
	var sum probe.Summary
	var runErr error
	if sched.Streamed() {
		sum, runErr = eng.Stream(ctx, sched)
	} else {
		var results []record.Result
		results, runErr = eng.Run(ctx, sched)
		sum = probe.Summarize(results)
	}
	stopPhases()
	reason, err := s.endError(runErr, int64(sum.Sent), sched.Len())
	if runErr != nil && sum.Scheduled == 0 && !errors.Is(runErr, probe.ErrUsage) {
		// Refused before sending (a start already past): nothing recorded.
		err = Errorf(Aborted, "%v", runErr)
	}
	if s.counts.tooManyOther.Load() {
		reason, err = record.ReasonAborted, s.otherError(true)
	}
	if cerr := s.close(reason); cerr != nil && err == nil {
		err = cerr
	}
	if err == nil && sum.Other > 0 && sum.Other*otherShareDen > sum.Responses {
		err = s.otherError(false)
	}
	return sum, err
}

// describeSchedule is the plan line of a run's description.
func describeSchedule(sc patterns.Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests over %s", sc.Len(), units.HumanDuration(sc.Duration))
	for _, ph := range sc.Phases {
		if ph.Pattern == patterns.PatternPause {
			fmt.Fprintf(&b, "; pause %s", units.HumanDuration(ph.Duration))
			continue
		}
		fmt.Fprintf(&b, "; %s: %d requests", ph.Name, ph.Requests)
	}
	if !sc.Start.IsZero() {
		fmt.Fprintf(&b, "; starting at %s", sc.Start.Format(time.RFC3339Nano))
	}
	return b.String()
}

// RunDoc returns the document of the run of plan that ended with sum
// (record.SchemaRun): complete when the run ended as completed; the end
// reason, targets, seed, plan and record file are the session's, and so
// is the record writer's back-pressure (record_stall_ms,
// record_backlog_max).
func (s *Session) RunDoc(plan *patterns.Plan, sum probe.Summary) (record.RunDoc, error) {
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return record.RunDoc{}, fmt.Errorf("session: the plan as JSON: %w", err)
	}
	reason := ""
	if run := s.Record(); run != nil && run.End != nil {
		reason = run.End.Reason
	}
	seed := s.cfg.Seed
	st := s.rec.stats()
	return record.RunDoc{
		Schema: record.SchemaRun, Tool: s.cfg.Tool,
		Complete: reason == record.ReasonCompleted, Reason: reason,
		Targets: s.Targets(), Seed: &seed, Plan: planJSON,
		RunSummary: sum, RecordFile: s.RecordFile(),
		RecordStallMS:    float64(st.Stall) / float64(time.Millisecond),
		RecordBacklogMax: st.BacklogMax,
	}, nil
}
