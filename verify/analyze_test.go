package verify

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// runBuilder builds one agent's record file by hand.
type runBuilder struct {
	run record.Run
}

func newRun(agent string, uncertainty time.Duration) *runBuilder {
	return &runBuilder{run: record.Run{
		Header: record.Header{Start: t0, Agent: agent, ClockUncertaintyNS: int64(uncertainty), Targets: []string{"http://t/api"}},
		End:    &record.End{Reason: record.ReasonCompleted},
	}}
}

// add records a response whose request was written at wrote and answered
// at ttfb (milliseconds since the start), with header lines "Name: value".
func (b *runBuilder) add(wroteMS, ttfbMS float64, status int, hdr ...string) *record.Result {
	h := http.Header{}
	for _, l := range hdr {
		var name, value string
		for i := range l {
			if l[i] == ':' {
				name, value = l[:i], l[i+2:]
				break
			}
		}
		h.Add(name, value)
	}
	r := record.Result{
		Type: record.TypeResult, Seq: int64(len(b.run.Results)), Agent: b.run.Header.Agent, Method: "GET", URL: "http://t/api",
		Sched: int64(wroteMS * 1e6), Sent: int64(wroteMS * 1e6), Wrote: int64(wroteMS * 1e6), TTFB: int64(ttfbMS * 1e6), Done: int64(ttfbMS * 1e6),
		Outcome: record.OutcomeResponse, Status: status, Headers: h,
	}
	b.run.Results = append(b.run.Results, r)
	return &b.run.Results[len(b.run.Results)-1]
}

func analyze(t *testing.T, e Endpoint, opt Options, runs ...*runBuilder) Report {
	t.Helper()
	p := Policy{Version: 1, Endpoints: []Endpoint{e}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var rs []*record.Run
	for _, b := range runs {
		rs = append(rs, &b.run)
	}
	return Analyze(record.Merge(rs...), p.Normalize(), opt)
}

func only(t *testing.T, rep Report, id string, c Certainty) {
	t.Helper()
	if len(rep.Findings) != 1 || rep.Findings[0].ID != id || rep.Findings[0].Certainty != c {
		t.Errorf("want exactly %s (%s), got %+v", id, c, rep.Findings)
	}
}

var fiveIn2s = Endpoint{Limit: 5, Window: 2 * time.Second, Headers: []string{"none"}}

func TestAnalyzeWindowCertainty(t *testing.T) {
	// Six accepted within a second: certain.
	b := newRun("a", 0)
	for i := range 6 {
		b.add(float64(i*100), float64(i*100)+1, 200)
	}
	rep := analyze(t, fiveIn2s, Options{}, b)
	only(t, rep, IDWindowLimitExceeded, Certain)
	if f := rep.Findings[0]; f.Evidence.Count != 6 || *f.Evidence.Bound != 5 || len(f.Evidence.Refs) != 6 || f.Evidence.Refs[0] != "a:0" {
		t.Errorf("evidence %+v", f.Evidence)
	}
	if rep.Verdict != VerdictFail || rep.Pass {
		t.Errorf("verdict %s pass %v, want fail", rep.Verdict, rep.Pass)
	}

	// The sixth answered 2010 ms after the first was written: it may have
	// arrived within 2 s of the first (max lo − min hi = 1990 − 1 < 2000),
	// but not certainly (max hi − min lo = 2010 ≥ 2000).
	b = newRun("a", 0)
	for i := range 5 {
		b.add(0, 1, 200)
		_ = i
	}
	b.add(1990, 2010, 200)
	rep = analyze(t, fiveIn2s, Options{}, b)
	only(t, rep, IDWindowLimitExceeded, Possible)
	if rep.Verdict != VerdictPass {
		t.Errorf("a possible finding fails the verdict: %s", rep.Verdict)
	}

	// An arrival echo bounds the decision from below only: the sixth
	// decided in [1995, 2010], possibly 2010 ms after the first was
	// written — still possible.
	b = newRun("a", 0)
	for range 5 {
		b.add(0, 1, 200)
	}
	r := b.add(1990, 2010, 200)
	echo := int64(1995e6)
	r.Arrival = &echo
	rep = analyze(t, fiveIn2s, Options{}, b)
	only(t, rep, IDWindowLimitExceeded, Possible)

	// Echoes on the first five raise their lower bounds: the six surely
	// decided within [15, 2010] ms, less than 2 s: certain.
	b = newRun("a", 0)
	for range 5 {
		r := b.add(0, 20, 200)
		echo := int64(15e6)
		r.Arrival = &echo
	}
	b.add(1990, 2010, 200)
	rep = analyze(t, fiveIn2s, Options{}, b)
	only(t, rep, IDWindowLimitExceeded, Certain)
}

// TestAnalyzeClockUncertainty: two agents, each within the limit, together
// over it; agent b's clock uncertainty of 20 ms turns the certain finding
// into a possible one.
func TestAnalyzeClockUncertainty(t *testing.T) {
	for _, tt := range []struct {
		u    time.Duration
		want Certainty
	}{{0, Certain}, {20 * time.Millisecond, Possible}} {
		a, b := newRun("a", 0), newRun("b", tt.u)
		for range 3 {
			a.add(0, 1, 200)
			b.add(1985, 1986, 200)
		}
		rep := analyze(t, fiveIn2s, Options{}, a, b)
		only(t, rep, IDWindowLimitExceeded, tt.want)
	}
}

func TestAnalyzeFixedWindows(t *testing.T) {
	e := Endpoint{Limit: 2, Window: time.Second, WindowType: Fixed, Headers: []string{"none"}}
	// First-request windows: [0, 1 s) holds 0 and 500; [1.2 s, 2.2 s)
	// holds 1200, 1300 and 2100 — three in one window.
	b := newRun("a", 0)
	for _, ms := range []float64{0, 500, 1200, 1300, 2100} {
		b.add(ms, ms+1, 200)
	}
	only(t, analyze(t, e, Options{}, b), IDWindowLimitExceeded, Certain)
	// Epoch windows ([0, 1 s), [1 s, 2 s), …): two per window is fine.
	e.Align = "epoch"
	b = newRun("a", 0)
	for _, ms := range []float64{0, 500, 1200, 1300, 2100} {
		b.add(ms, ms+1, 200)
	}
	if rep := analyze(t, e, Options{}, b); len(rep.Findings) != 0 {
		t.Errorf("epoch windows: %+v", rep.Findings)
	}
}

// TestAnalyzeTimerWindows: windows on a limiter's own timer start at
// Phase + k·Window since the Unix epoch (t0 is a multiple of 2.5 s, so the
// tick falls 925 ms after it), give or take PhaseSpread; a request counts
// as surely inside a window only when it is for every start the spread
// allows.
func TestAnalyzeTimerWindows(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ms      []float64
		spread  time.Duration
		certain bool
	}{
		{"six inside one window", []float64{100, 200, 300, 400, 500, 600}, 10 * time.Millisecond, true},
		{"three and three across the tick", []float64{600, 700, 800, 1000, 1100, 1200}, 10 * time.Millisecond, false},
		{"six before the tick, the last 25 ms before it", []float64{400, 500, 600, 700, 800, 900}, 10 * time.Millisecond, true},
		{"six before the tick, the last within its spread", []float64{400, 500, 600, 700, 800, 900}, 100 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := Endpoint{Limit: 5, Window: 2500 * time.Millisecond, WindowType: Fixed, Align: limiter.AlignTimer,
				Phase: 925 * time.Millisecond, PhaseSpread: tt.spread, Headers: []string{"none"}}
			b := newRun("a", 0)
			for _, ms := range tt.ms {
				b.add(ms, ms+1, 200)
			}
			got := slices.Contains(certainIDs(analyze(t, e, Options{}, b)), IDWindowLimitExceeded)
			if got != tt.certain {
				t.Errorf("certain window-limit-exceeded %v, want %v", got, tt.certain)
			}
		})
	}
	// Epoch-aligned, the same windows would start at t0: the six across
	// the timer's tick are in one of them.
	b := newRun("a", 0)
	for _, ms := range []float64{600, 700, 800, 1000, 1100, 1200} {
		b.add(ms, ms+1, 200)
	}
	e := Endpoint{Limit: 5, Window: 2500 * time.Millisecond, WindowType: Fixed, Align: limiter.AlignEpoch, Headers: []string{"none"}}
	if !slices.Contains(certainIDs(analyze(t, e, Options{}, b)), IDWindowLimitExceeded) {
		t.Errorf("epoch-aligned: want a certain window-limit-exceeded")
	}
}

func TestAnalyzeHeaders(t *testing.T) {
	e := Endpoint{Limit: 1, Window: 10 * time.Second, Status: 429}
	b := newRun("a", 0)
	b.add(0, 1, 200, `RateLimit: "default";r=0;t=10`, `RateLimit-Policy: "default";q=1;w=10`)
	// A cache hit: not counted, and its malformed fields are ignored.
	b.add(100, 101, 200, "Age: 5", `RateLimit: "default";r=x`)
	// A 503 rejection without Retry-After, cacheable.
	b.add(200, 201, 503, `RateLimit: "default";r=0;t=10`, "Cache-Control: max-age=60")
	// Retry-After "1" on a rejection at 300 ms: the two requests at and
	// after 1.301 s are both rejected, nothing accepted between.
	b.add(300, 301, 429, `Retry-After: 1`, `RateLimit: "default";r=0;t=10`, "Cache-Control: no-store")
	b.add(1302, 1303, 429, `Retry-After: 9`, `RateLimit: "default";r=0;t=9`, "Cache-Control: no-store")
	b.add(1402, 1403, 429, `Retry-After: 9`, `RateLimit: "default";r=0;t=9`, "Cache-Control: no-store")
	rep := analyze(t, e, Options{FailOn: SeverityWarning}, b)
	got := map[string]Certainty{}
	for _, f := range rep.Findings {
		got[f.ID] = f.Certainty
	}
	want := []string{IDRejectStatusMismatch, IDCacheable429, IDRetryAfterMissing, IDRetryAfterEarly}
	if len(got) != len(want) {
		t.Errorf("findings %+v, want %v", rep.Findings, want)
	}
	for _, id := range want {
		if got[id] != Certain {
			t.Errorf("no certain %s in %+v", id, rep.Findings)
		}
	}
	if rep.Verdict != VerdictFail {
		t.Errorf("verdict %s", rep.Verdict)
	}
}

func TestAnalyzeVerdict(t *testing.T) {
	b := newRun("a", 0)
	b.add(0, 1, 200)
	b.add(2100, 2101, 200) // past a window: nothing from before the run counts
	b.add(2110, 2111, 429) // a rejection while 4 of 5 were left: under-admission (warning)
	b.run.End = nil        // cut short
	for _, tt := range []struct {
		failOn  Severity
		verdict string
	}{{SeverityError, VerdictIncomplete}, {SeverityWarning, VerdictFail}} {
		rep := analyze(t, fiveIn2s, Options{FailOn: tt.failOn}, b)
		if rep.Verdict != tt.verdict || rep.Complete || rep.Count(IDUnderAdmission, Certain) != 1 {
			t.Errorf("fail-on %s: verdict %s complete %v findings %+v; want %s", tt.failOn, rep.Verdict, rep.Complete, rep.Findings, tt.verdict)
		}
	}
}

// TestRejudge: a report whose findings changed gets its verdict again
// under the fail-on it was judged with; Time is the caller's, as given.
func TestRejudge(t *testing.T) {
	b := newRun("a", 0)
	b.add(0, 1, 429) // under-admission (warning)
	rep := analyze(t, fiveIn2s, Options{FailOn: SeverityWarning, Time: t0}, b)
	if rep.Verdict != VerdictFail || !rep.Time.Equal(t0) {
		t.Fatalf("verdict %s time %v, want fail at %v", rep.Verdict, rep.Time, t0)
	}
	rep.Findings = nil
	rep.Rejudge()
	if rep.Verdict != VerdictPass || !rep.Pass {
		t.Errorf("without findings: verdict %s pass %v, want pass", rep.Verdict, rep.Pass)
	}
	rep.Findings = []Finding{{ID: IDUnderAdmission, Severity: SeverityWarning, Certainty: Certain}}
	rep.Complete = false
	rep.Rejudge()
	if rep.Verdict != VerdictFail || rep.Pass {
		t.Errorf("a certain warning under fail-on warning: verdict %s, want fail", rep.Verdict)
	}
	var decoded Report // no fail-on: judged at error
	decoded.Findings = rep.Findings
	decoded.Rejudge()
	if decoded.Verdict != VerdictIncomplete || decoded.FailOn() != SeverityError {
		t.Errorf("decoded report: verdict %s fail-on %s, want incomplete at error", decoded.Verdict, decoded.FailOn())
	}
}

// BenchmarkAnalyze judges 5,000 results of a sustained run (a sliding
// window, headers on every response) against the policy they keep.
func BenchmarkAnalyze(b *testing.B) {
	run := newRun("a", 0)
	for i := range 5000 {
		at := float64(i) * 24 // ms: 41.7/s
		status := 200
		hdr := []string{`RateLimit: "default";r=3;t=0`, `RateLimit-Policy: "default";q=100;w=60`}
		if i%3 == 2 {
			status = 429
			hdr = append(hdr, "Retry-After: 1")
		}
		run.add(at, at+1, status, hdr...)
	}
	e := Endpoint{Limit: 100, Window: time.Minute, Headers: []string{"draft-8"}}
	p := Policy{Version: 1, Endpoints: []Endpoint{e}}.Normalize()
	m := record.Merge(&run.run)
	for b.Loop() {
		Analyze(m, p, Options{})
	}
}

// TestFixedWindowRemaining: under a fixed window of 5 per 2 s (epoch, so
// windows start at 0, 2000, 4000 ms), remaining may never advertise more
// than the window can still hold; it must count down 4, 3, 2… exactly when
// nothing was carried over; after a busy window it may sit lower, and rise
// again, as a sliding-window counter's does.
func TestFixedWindowRemaining(t *testing.T) {
	rule := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: "epoch", Headers: []string{"draft-8"}}
	type req struct {
		ms  float64
		rem int
	}
	// busy fills the window [0, 2000) honestly, 1500…1900 ms.
	busy := []req{{1500, 4}, {1600, 3}, {1700, 2}, {1800, 1}, {1900, 0}}
	tests := []struct {
		name         string
		reqs         []req
		inconsistent bool
	}{
		{"fixed window after idle counts down", []req{{2100, 4}, {2200, 3}, {2300, 2}}, false},
		{"stuck remaining after idle", []req{{2100, 4}, {2200, 4}, {2300, 4}}, true},
		{"too low after idle", []req{{100, 4}, {4100, 2}, {4200, 1}, {4300, 0}}, true},
		// The first response already shows quota spent: traffic from before
		// the run may hold it.
		{"too low from the first response", []req{{2100, 2}, {2200, 1}, {2300, 0}}, false},
		{"too low once settled", []req{{2100, 2}, {2200, 1}, {6100, 2}, {6200, 1}}, true},
		// A sliding-window counter, prev = 5: N − ⌊5·(2000−e)/2000⌋ − curr.
		{"sliding-window counter after a busy window", append(slices.Clone(busy), req{2500, 1}, req{3900, 3}), false},
		{"sliding-window counter, share decayed in time", append(slices.Clone(busy), req{2500, 1}, req{3000, 1}, req{3500, 1}, req{3900, 1}), false},
		{"stuck after a busy window", append(slices.Clone(busy), req{2500, 3}, req{3000, 3}, req{3500, 3}), true},
		{"full quota seen, then a gap", append(slices.Clone(busy), req{2500, 4}, req{3000, 2}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newRun("a", 0)
			for _, q := range tt.reqs {
				b.add(q.ms, q.ms+1, 200, fmt.Sprintf(`RateLimit: "default";r=%d`, q.rem), `RateLimit-Policy: "default";q=5;w=2`)
			}
			rep := analyze(t, rule, Options{}, b)
			got := rep.Count(IDRateLimitHeaderInconsistent, Certain) > 0
			if got != tt.inconsistent {
				t.Errorf("ratelimit-header-inconsistent %v, want %v; findings %+v", got, tt.inconsistent, rep.Findings)
			}
			for _, f := range rep.Findings {
				if f.ID != IDRateLimitHeaderInconsistent {
					t.Errorf("unexpected %s: %s", f.ID, f.Message)
				}
			}
		})
	}
}

// TestSharedQuotaOnlyPossible: a watch's cycle in production shares the
// quota with unseen clients; a remaining value below the probe's own count
// is then possible, while an over-admission count stays certain. Alone, a
// run whose first response already shows quota spent (traffic from before
// the run) has no certain low value either.
func TestSharedQuotaOnlyPossible(t *testing.T) {
	pol := Policy{Version: PolicyVersion, Endpoints: []Endpoint{{Limit: 10, Window: time.Second, WindowType: Fixed}}}.Normalize()
	resp := func(seq, ms int64, remaining int) record.Result {
		at := ms * int64(time.Millisecond)
		return record.Result{Seq: seq, Outcome: record.OutcomeResponse, Status: 200, Method: "GET", URL: "http://t/", Sched: at, Sent: at, Wrote: at, TTFB: at + 1000, Done: at + 2000,
			Headers: http.Header{"Ratelimit-Policy": {`"d";q=10;w=1`}, "Ratelimit": {fmt.Sprintf(`"d";r=%d;t=1`, remaining)}}}
	}
	run := &record.Run{Header: record.Header{Type: "header", Format: 1, Start: time.Unix(1700000000, 0)},
		Results: []record.Result{resp(0, 100, 9), resp(1, 120, 7)}, End: &record.End{Type: "end", Reason: record.ReasonCompleted, Scheduled: 2, Sent: 2}}
	alone := AnalyzeRun(run, pol, Options{})
	busy := *run
	busy.Results = []record.Result{resp(0, 100, 7), resp(1, 120, 6)}
	if rep := AnalyzeRun(&busy, pol, Options{}); rep.Count(IDRateLimitHeaderInconsistent, Certain) != 0 || rep.Failed() {
		t.Fatalf("alone, busy from the start: want no certain inconsistency, got %s %+v", rep.Verdict, rep.Findings)
	}
	shared := AnalyzeRun(run, pol, Options{SharedQuota: true})
	if alone.Count(IDRateLimitHeaderInconsistent, Certain) != 1 {
		t.Fatalf("alone: want the certain inconsistency, got %+v", alone.Findings)
	}
	if shared.Count(IDRateLimitHeaderInconsistent, Certain) != 0 || shared.Count(IDRateLimitHeaderInconsistent, Possible) != 1 || shared.Failed() {
		t.Fatalf("shared: want it possible and a pass, got %s %+v", shared.Verdict, shared.Findings)
	}
}

// TestBucketAdvertisedWindow: a bucket of rate 100/m and capacity 100
// fills in 60 s, or 60.02 s at the rate nginx keeps (1666 milli-requests
// per second): w=60 and w=61 both advertise it; w=62 and another quota do
// not.
func TestBucketAdvertisedWindow(t *testing.T) {
	e := Endpoint{Rate: 100.0 / 60, Capacity: 100, Status: 429}
	for _, tc := range []struct {
		policy   string
		mismatch bool
	}{
		{`"default";q=100;w=60`, false},
		{`"default";q=100;w=61`, false},
		{`"default";q=100;w=62`, true},
		{`"default";q=99;w=60`, true},
	} {
		b := newRun("a", 0)
		b.add(0, 1, 200, `RateLimit: "default";r=99;t=1`, `RateLimit-Policy: `+tc.policy)
		rep := analyze(t, e, Options{}, b)
		got := slices.ContainsFunc(rep.Findings, func(f Finding) bool { return f.ID == IDRateLimitPolicyMismatch })
		if got != tc.mismatch {
			t.Errorf("%s: mismatch %v, want %v (%+v)", tc.policy, got, tc.mismatch, rep.Findings)
		}
	}
}
