package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Tests of issue 12: certain means certain — for every arrival time and
// every decision order the evidence allows.

// raceLike builds ten requests written at 0 and answered at 2 ms, five
// accepted (remaining 4…0) and five rejected, each stamped by an arrival
// echo: echoes[i] in µs. decisions, when not nil, gives each its decision
// sequence number.
func raceLike(phase string, echoes []int64, decisions []int64) *runBuilder {
	b := newRun("a", 0)
	for i := range 10 {
		status, hdr := 200, fmt.Sprintf(`RateLimit: "default";r=%d;t=10`, max(0, 4-i))
		if i >= 5 {
			status, hdr = 429, `RateLimit: "default";r=0;t=10`
		}
		r := b.add(0, 2, status, hdr, `RateLimit-Policy: "default";q=5;w=10`, "Retry-After: 10", "Cache-Control: no-store")
		r.Phase = phase
		echo := echoes[i] * 1000
		r.Arrival = &echo
		if decisions != nil {
			d := decisions[i]
			r.Decision = &d
		}
	}
	return b
}

// TestEchoOrderIsNotDecisionOrder: a fixed window of 5 per 10 s decides
// ten requests that arrived microseconds apart; the server stamps arrival
// before its limiter decides, so a rejection (t=10) may carry an earlier
// echo than an acceptance decided before it. No certain contradiction may
// come from the echo order (issue 12, item 1); a decision sequence fixes
// the order, both ways.
func TestEchoOrderIsNotDecisionOrder(t *testing.T) {
	e := Endpoint{Limit: 5, Window: 10 * time.Second, WindowType: Fixed, Status: 429, Headers: []string{"draft-8"}}
	// Rejection 5 stamped at 10 µs, acceptance 4 at 30 µs.
	echoes := []int64{1, 2, 3, 4, 30, 10, 40, 50, 60, 70}
	honest := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	lying := []int64{0, 1, 2, 3, 9, 4, 5, 6, 7, 8} // acceptance 4 decided after every rejection
	for _, tt := range []struct {
		name      string
		decisions []int64
		want      int
	}{
		{"echoes only", nil, 0},
		{"decision order agrees", honest, 0},
		{"decision order: accepted after a rejection said t=10", lying, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyze(t, e, Options{}, raceLike("", echoes, tt.decisions))
			if got := rep.Count(IDRateLimitHeaderInconsistent, Certain); got != tt.want {
				t.Errorf("certain %s: %d, want %d; findings:%s", IDRateLimitHeaderInconsistent, got, tt.want, describeFindings(rep))
			}
			for _, f := range rep.Findings {
				if tt.want == 0 && f.Certainty == Certain && f.Severity.AtLeast(SeverityWarning) {
					t.Errorf("an honest server got a certain %s: %s", f.ID, f.Message)
				}
			}
		})
	}
}

// TestEarlyRetryNeedsAFixedOrder: an accepted request whose bounds overlap
// a rejection may have been decided after it and taken the quota that
// returned, so two rejected retries prove nothing (issue 12, item 1).
func TestEarlyRetryNeedsAFixedOrder(t *testing.T) {
	e := Endpoint{Limit: 1, Window: time.Second, Status: 429, Headers: []string{"none"}}
	b := newRun("a", 0)
	b.add(0, 1, 200)
	b.add(100, 150, 429, "Retry-After: 1")
	b.add(120, 1100, 200) // a slow answer: decided anywhere in [120, 1100] ms
	b.add(1200, 1201, 429, "Retry-After: 1")
	b.add(1300, 1301, 429, "Retry-After: 1")
	rep := analyze(t, e, Options{}, b)
	if n := rep.Count(IDRetryAfterEarly, Certain); n != 0 {
		t.Errorf("certain retry-after-early from an order the evidence leaves open:%s", describeFindings(rep))
	}
	// Answered at once, the acceptance surely came before the rejection:
	// the retries at 1.2 s and 1.3 s should have been admitted.
	b = newRun("a", 0)
	b.add(0, 1, 200)
	b.add(100, 150, 429, "Retry-After: 1")
	b.add(1200, 1201, 429, "Retry-After: 1")
	b.add(1300, 1301, 429, "Retry-After: 1")
	e.Limit = 1
	e.Window = 5 * time.Second
	if rep := analyze(t, e, Options{}, b); rep.Count(IDRetryAfterEarly, Certain) != 1 {
		t.Errorf("want a certain retry-after-early:%s", describeFindings(rep))
	}
}

// TestProbesStayInTheirChecks: under --key ip against a server keyed on
// X-Forwarded-For, the spoofed requests get fresh quota; that is
// key-spoofable, and neither a late Retry-After nor an inconsistent reset
// (issue 12, item 2); certain, as paced requests of another address each
// on a new connection were refused within the quota (one limiter per
// connection route: the spoofed requests' new connections met it too).
func TestProbesStayInTheirChecks(t *testing.T) {
	e := Endpoint{Limit: 5, Window: 10 * time.Second, Key: KeyIP, Status: 429, Headers: []string{"draft-8"}}
	b := newRun("a", 0)
	add := func(ms float64, phase string, status, rem int) *record.Result {
		hdr := fmt.Sprintf(`RateLimit: "default";r=%d;t=10`, rem)
		r := b.add(ms, ms+1, status, hdr, `RateLimit-Policy: "default";q=5;w=10`, "Retry-After: 10", "Cache-Control: no-store")
		r.Phase, r.Src = phase, "192.0.2.1:4000"
		return r
	}
	for i := range 7 {
		r := add(float64(20000+i*10), PhaseNewConns, 200, 4-i)
		if i >= 5 {
			r.Status = 429
			r.Headers.Set("RateLimit", `"default";r=0;t=10`)
		}
		r.Src = fmt.Sprintf("192.0.2.2:%d", 5000+i)
	}
	for i := range 5 {
		add(float64(i*10), CheckKeySpoof, 200, 4-i)
	}
	add(60, CheckKeySpoof, 429, 0)
	for i := range 3 {
		add(float64(100+i*20), CheckKeySpoof+"/X-Forwarded-For", 200, 4)
	}
	rep := analyze(t, e, Options{}, b)
	if rep.Count(IDKeySpoofable, Certain) != 1 {
		t.Errorf("want a certain key-spoofable:%s", describeFindings(rep))
	}
	for _, f := range rep.Findings {
		if f.ID != IDKeySpoofable && f.Certainty == Certain && f.Severity.AtLeast(SeverityWarning) {
			t.Errorf("a spoofed request leaked into %s: %s", f.ID, f.Message)
		}
	}
}

// TestRaceOverAdmissionIsNotNoLimiting: ten racers all admitted under a
// limit of 5 (a non-atomic counter whose remaining values repeat) are a
// race, not "no limiting"; without a rejection or a remaining value to
// prove a limit exists it is only possible (issue 12, item 3), and so it
// is without paced requests on new connections refused within the quota
// in a window before (issue 27: instances behind a balancer admit as
// much).
func TestRaceOverAdmissionIsNotNoLimiting(t *testing.T) {
	for _, tt := range []struct {
		name    string
		hdr     []string
		rule    []string
		routes  bool
		certain Certainty
	}{
		{"remaining values prove a limit", []string{`RateLimit: "default";r=4;t=10`, `RateLimit-Policy: "default";q=5;w=10`}, []string{"draft-8"}, true, Certain},
		{"remaining values, but one limiter per connection unproven", []string{`RateLimit: "default";r=4;t=10`, `RateLimit-Policy: "default";q=5;w=10`}, []string{"draft-8"}, false, Possible},
		{"nothing proves a limit", nil, []string{"none"}, false, Possible},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := Endpoint{Limit: 5, Window: 10 * time.Second, WindowType: Fixed, Status: 429, Headers: tt.rule}
			b := newRun("a", 0)
			if tt.routes {
				paced{phase: PhaseNewConns, at: 0, accepted: admitted(5, 7), newConns: true}.add(b)
			}
			for range 10 {
				r := b.add(10100, 10130, 200, tt.hdr...)
				r.Phase, r.Sched = CheckRace, 10100e6
			}
			rep := analyze(t, e, Options{}, b)
			if rep.Count(IDRaceOverAdmission, tt.certain) != 1 || rep.Count(IDNoLimitingObserved, Certain)+rep.Count(IDNoLimitingObserved, Possible) != 0 {
				t.Errorf("want one %s race-over-admission and no no-limiting-observed:%s", tt.certain, describeFindings(rep))
			}
			if tt.hdr == nil && rep.Verdict != VerdictPass {
				t.Errorf("verdict %s on an unproven limit", rep.Verdict)
			}
		})
	}
}

func describeFindings(rep Report) string {
	s := ""
	for _, f := range rep.Findings {
		s += fmt.Sprintf("\n  %s %s %s [%s] %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
	}
	return s
}
