package verify

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// penaltyEngine is a verify.Engine over a virtual clock that answers as a
// limiter of n per w with a penalty would: a sliding log under block:D (a
// fresh key when the block ends) or none, a window that every request
// (extend) or every refusal (restart) moves. Each request is decided 1 ms
// after it is written and answered at once, with an honest Retry-After.
// It stands in for the reference server until limiter.Step applies
// penalties, and keeps the suite's waits testable without real time.
type penaltyEngine struct {
	n    int
	w    time.Duration
	pen  limiter.Penalty
	zero time.Time
	now  time.Duration // the virtual clock, since zero

	log        []time.Duration // accepted, for the sliding log
	blockUntil time.Duration
	end        time.Duration // extend, restart: the window's end
	count      int
	seq        int64
	noRA       bool // send no Retry-After
}

func (e *penaltyEngine) elapsed() time.Duration { return e.now }

func (e *penaltyEngine) decide(t time.Duration) (bool, time.Duration) {
	switch e.pen.Kind {
	case limiter.PenaltyExtend, limiter.PenaltyRestart:
		if t >= e.end {
			e.count = 0
		}
		if e.pen.Kind == limiter.PenaltyExtend || e.count >= e.n {
			e.end = t + e.w
		} else if e.count == 0 {
			e.end = t + e.w
		}
		if e.count < e.n {
			e.count++
			return true, 0
		}
		return false, e.end - t
	}
	if t < e.blockUntil {
		return false, e.blockUntil - t
	}
	e.log = slices.DeleteFunc(e.log, func(a time.Duration) bool { return a <= t-e.w })
	if len(e.log) < e.n {
		e.log = append(e.log, t)
		return true, 0
	}
	if e.pen.Kind == limiter.PenaltyBlock {
		e.blockUntil, e.log = t+e.pen.Duration, nil
		return false, e.pen.Duration
	}
	return false, e.log[0] + e.w - t
}

func (e *penaltyEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	base := s.Start.Sub(e.zero)
	var out []record.Result
	for _, x := range s.Sends {
		t := base + x.At
		ok, wait := e.decide(t + time.Millisecond)
		r := record.Result{Type: record.TypeResult, Seq: e.seq, Agent: "a", Method: "GET", URL: "http://t/api", Phase: x.Phase,
			Client: fmt.Sprint(x.Client), Sched: int64(t), Sent: int64(t), Wrote: int64(t), TTFB: int64(t + 2*time.Millisecond),
			Done: int64(t + 2*time.Millisecond), Outcome: record.OutcomeResponse, Status: 200, Headers: http.Header{}}
		if !ok {
			r.Status = 429
		}
		if !ok && !e.noRA {
			r.Headers.Set("Retry-After", fmt.Sprint(int64(math.Ceil(wait.Seconds()))))
		}
		e.seq++
		out = append(out, r)
		e.now = max(e.now, t+2*time.Millisecond)
	}
	return out, nil
}

// runPenaltySuite runs the check suite for rule e against a penalty engine
// and analyzes what it recorded.
func runPenaltySuite(t *testing.T, e Endpoint, eng *penaltyEngine) (SuiteResult, Report) {
	t.Helper()
	p := Policy{Version: 1, Endpoints: []Endpoint{e}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	p = p.Normalize()
	eng.zero = t0
	s := Suite{Rule: p.Endpoints[0], Engine: eng, Zero: t0, Elapsed: eng.elapsed, Options: SuiteOptions{Identities: 1}}
	res, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("suite: %v", err)
	}
	run := &record.Run{Header: record.Header{Start: t0, Agent: "a", Targets: []string{"http://t/api"}},
		Results: res.Results, End: &record.End{Reason: record.ReasonCompleted}}
	return res, Analyze(record.Merge(run), p, Options{})
}

// phaseCount counts the results of a phase.
func phaseCount(res []record.Result, phase string) int {
	n := 0
	for _, r := range res {
		if r.Phase == phase {
			n++
		}
	}
	return n
}

// TestSuiteUnderPenalty: the suite against a key that penalises. With the
// penalty declared, the recovery step waits out a block (a few polls, not
// a block's worth) or probes after a quiet window (extend, restart), the
// edge check runs after it, and nothing certain is found; undeclared, the
// penalty is undeclared-penalty, never window-limit-exceeded.
func TestSuiteUnderPenalty(t *testing.T) {
	rule := Endpoint{Limit: 5, Window: 2 * time.Second, Headers: []string{"none"}}
	for _, tt := range []struct {
		name     string
		pen      limiter.Penalty
		declared bool
		want     []string
		noRA     bool
		polls    int // most recovery polls
	}{
		// Retry-After says when: polls through the second before it.
		{"block:10s declared", block(10 * time.Second), true, nil, false, 20},
		// Without one, the wait starts at the block's end at the earliest.
		{"block:10s declared, no Retry-After", block(10 * time.Second), true, nil, true, 4},
		{"block:10s undeclared", block(10 * time.Second), false, []string{IDUndeclaredPenalty}, false, 20},
		{"block:10s undeclared, no Retry-After", block(10 * time.Second), false, []string{IDUndeclaredPenalty}, true, 30},
		{"block:1s declared", block(time.Second), true, nil, false, 30},
		{"extend declared", extend, true, nil, false, 3},
		{"restart declared", restart, true, nil, false, 3},
		{"none", limiter.Penalty{}, false, nil, false, 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := rule
			if tt.declared {
				e.Penalty = tt.pen
			}
			res, rep := runPenaltySuite(t, e, &penaltyEngine{n: 5, w: 2 * time.Second, pen: tt.pen, noRA: tt.noRA})
			if got := certainIDs(rep); !slices.Equal(got, tt.want) {
				t.Errorf("certain %v, want %v:%s", got, tt.want, describeFindings(rep))
			}
			if n := phaseCount(res.Results, CheckRecovery) + phaseCount(res.Results, CheckRetryAfter); n > tt.polls {
				t.Errorf("%d recovery polls, want at most %d", n, tt.polls)
			}
			if tt.declared && phaseCount(res.Results, CheckEdge) == 0 {
				t.Errorf("no edge check: quota return not observed")
			}
		})
	}
}

// TestPlanUnderPenalty: the recovery step of a declared block includes the
// block; under extend and restart it is three quiet windows.
func TestPlanUnderPenalty(t *testing.T) {
	win := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Sliding, Key: KeyGlobal}
	for _, tt := range []struct {
		pen  limiter.Penalty
		want time.Duration
	}{
		{limiter.Penalty{}, 2200 * time.Millisecond},
		{block(30 * time.Second), 32200 * time.Millisecond},
		{extend, 3 * 2100 * time.Millisecond},
		{restart, 3 * 2100 * time.Millisecond},
	} {
		e := win
		e.Penalty = tt.pen
		for _, s := range PlanSuite(e, SuiteOptions{Identities: 1}).Steps {
			if s.Check == CheckRecovery && s.Duration != tt.want {
				t.Errorf("%q: recovery step %v, want %v", tt.pen, s.Duration, tt.want)
			}
		}
	}
}
