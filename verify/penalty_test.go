package verify

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// Tests of penalties with hand-built records: what a declared penalty
// makes expected, and the evidence of an undeclared one.

// certainIDs returns the ids of the report's certain findings at warning
// or above, sorted, but retry-after-missing (the records send none).
func certainIDs(rep Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Certainty == Certain && f.Severity.AtLeast(SeverityWarning) && f.ID != IDRetryAfterMissing && !slices.Contains(out, f.ID) {
			out = append(out, f.ID)
		}
	}
	slices.Sort(out)
	return out
}

// certainty returns the certainty of the report's finding id ("" if none).
func certainty(rep Report, id string) Certainty {
	var c Certainty
	for _, f := range rep.Findings {
		if f.ID == id && (c == "" || f.Certainty == Certain) {
			c = f.Certainty
		}
	}
	return c
}

func block(d time.Duration) limiter.Penalty {
	return limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: d}
}

var (
	extend  = limiter.Penalty{Kind: limiter.PenaltyExtend}
	restart = limiter.Penalty{Kind: limiter.PenaltyRestart}
)

// burstThenPoll records n acceptances from 0 ms (2 ms apart, answered in
// 1 ms), then a rejection every pollMS from firstMS to untilMS, then, when
// againMS > 0, n acceptances from againMS. Retry-After: 1 on every
// rejection.
func burstThenPoll(n int, firstMS, pollMS, untilMS, againMS float64) *runBuilder {
	b := newRun("a", 0)
	for i := range n {
		b.add(float64(2*i), float64(2*i)+1, 200)
	}
	for at := firstMS; at <= untilMS; at += pollMS {
		b.add(at, at+1, 429)
	}
	if againMS > 0 {
		for i := range n {
			b.add(againMS+float64(2*i), againMS+float64(2*i)+1, 200)
		}
	}
	return b
}

// spread records 5 acceptances 700 ms apart, then a rejection every
// 100 ms for 6 s.
func spread() *runBuilder {
	b := newRun("a", 0)
	for i := range 5 {
		b.add(float64(700*i), float64(700*i)+1, 200)
	}
	for at := 2900.0; at <= 8900; at += 100 {
		b.add(at, at+1, 429)
	}
	return b
}

// uncertain sets the run's clock uncertainty.
func uncertain(b *runBuilder, u time.Duration) *runBuilder {
	b.run.Header.ClockUncertaintyNS = int64(u)
	return b
}

func withPenalty(e Endpoint, p limiter.Penalty) Endpoint { e.Penalty = p; return e }

// TestUndeclaredPenalty: a key kept refused for 6 s after 5 admissions
// under 5 in any 2 s is certain evidence of an undeclared penalty (and
// not under-admission, not window-limit-exceeded); declared as block:6s it
// is expected; declared as block:1s it is not. A smaller limit is
// under-admission, never a penalty.
func TestUndeclaredPenalty(t *testing.T) {
	long := burstThenPoll(5, 20, 100, 6020, 0)
	for _, tt := range []struct {
		name string
		e    Endpoint
		run  *runBuilder
		want []string
		pen  Certainty
	}{
		{"undeclared block", fiveIn2s, long, []string{IDUndeclaredPenalty}, Certain},
		{"declared block:6s", withPenalty(fiveIn2s, block(6*time.Second)), long, nil, ""},
		{"declared block:1s, blocked 6 s", withPenalty(fiveIn2s, block(time.Second)), long, []string{IDUndeclaredPenalty}, Certain},
		// Refused for 3 s: after the count fell below 5 (2.001 s), not
		// for a whole window more: no penalty; the refusals after
		// 2.001 s are under-admission.
		{"refused 3 s", fiveIn2s, burstThenPoll(5, 20, 100, 3020, 0), []string{IDUnderAdmission}, ""},
		// Refused until 4.02 s, seen with 50 ms of clock uncertainty:
		// the count fell below 5 by 2.051 s surely, 1.95 s possibly;
		// refusals after 3.95 s may be a window later, none surely is
		// (after 4.051 s).
		{"refused 4 s, uncertain", fiveIn2s, uncertain(burstThenPoll(5, 20, 100, 4020, 0), 50*time.Millisecond), []string{IDUnderAdmission}, Possible},
		// 3 admitted, then refused for 6 s under a declared 5: the count
		// never reached 5, so the refusals are under-admission only.
		{"smaller limit", fiveIn2s, burstThenPoll(3, 20, 100, 6020, 0), []string{IDUnderAdmission}, ""},
		// 5 admitted 700 ms apart (never 5 in 2 s), then refused for
		// 6 s: the refusals did not begin as the policy's own.
		{"spread admissions", fiveIn2s, spread(), []string{IDUnderAdmission}, ""},
		// Declared extend: the polls keep the window open, honestly.
		{"declared extend", withPenalty(fiveIn2s, extend), long, nil, ""},
		// Declared restart: every refusal moves the window's end.
		{"declared restart", withPenalty(fiveIn2s, restart), long, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyze(t, tt.e, Options{}, tt.run)
			if got := certainIDs(rep); !slices.Equal(got, tt.want) {
				t.Errorf("certain findings %v, want %v:%s", got, tt.want, describeFindings(rep))
			}
			if got := certainty(rep, IDUndeclaredPenalty); got != tt.pen {
				t.Errorf("undeclared-penalty %q, want %q:%s", got, tt.pen, describeFindings(rep))
			}
			for _, f := range rep.Findings {
				if f.ID == IDUndeclaredPenalty && (f.Check != CheckRecovery || f.Severity != SeverityWarning) {
					t.Errorf("undeclared-penalty with check %q, severity %s", f.Check, f.Severity)
				}
			}
			// Under a shared quota, possible at most.
			rep = analyze(t, tt.e, Options{SharedQuota: true}, tt.run)
			if got := certainty(rep, IDUndeclaredPenalty); got == Certain {
				t.Errorf("SharedQuota: undeclared-penalty certain:%s", describeFindings(rep))
			}
		})
	}
}

// TestUndeclaredPenaltyWitnesses: certain evidence starts only more than
// a window after the pessimistic count fell below N (when the first of
// the last five, answered at 1 ms, left the window: 2.001 s), so after
// 4.001 s.
func TestUndeclaredPenaltyWitnesses(t *testing.T) {
	rep := analyze(t, fiveIn2s, Options{}, burstThenPoll(5, 20, 100, 6020, 0))
	for _, f := range rep.Findings {
		if f.ID != IDUndeclaredPenalty {
			continue
		}
		// Polls at 20 + 100k ms: the first after 4001 ms is 4020.
		if f.Evidence.Count != 21 || f.Evidence.StartNS != 2001*ms || f.Evidence.Refs[0] != "a:45" {
			t.Errorf("evidence %d refs from %s, start %d ns; want 21 from a:45, start %d", f.Evidence.Count, f.Evidence.Refs[0], f.Evidence.StartNS, 2001*ms)
		}
		return
	}
	t.Fatalf("no undeclared-penalty:%s", describeFindings(rep))
}

// TestUndeclaredPenaltyOrder: an acceptance whose order with the late
// rejections is open (answered after they were sent) leaves the moment
// quota returned open: possible, not certain. A decision sequence that
// puts it after them makes it certain again; one that puts it before
// them does not, as its time is still open.
func TestUndeclaredPenaltyOrder(t *testing.T) {
	slow := func(decided int) *runBuilder {
		b := burstThenPoll(5, 20, 100, 6020, 0)
		b.add(30, 6100, 200) // a slow answer, decided anywhere in [30 ms, 6.1 s]
		if decided < 0 {
			return b
		}
		n := len(b.run.Results)
		for i := range b.run.Results {
			d := int64(i)
			switch {
			case i == n-1:
				d = int64(decided)
			case i >= decided:
				d = int64(i) + 1
			}
			b.run.Results[i].Decision = &d
		}
		return b
	}
	for _, tt := range []struct {
		name    string
		decided int
		want    Certainty
	}{
		{"order open", -1, Possible},
		{"decided last", 1000, Certain},
		{"decided right after the burst", 5, Possible},
	} {
		rep := analyze(t, fiveIn2s, Options{}, slow(tt.decided))
		if got := certainty(rep, IDUndeclaredPenalty); got != tt.want {
			t.Errorf("%s: undeclared-penalty %q, want %q:%s", tt.name, got, tt.want, describeFindings(rep))
		}
	}
}

// TestUndeclaredPenaltyBucket: a bucket of 2 at 1/s refused for 6 s after
// it was emptied. The pessimistic bucket holds a token again 1 s after the
// second acceptance; certain from a refill later.
func TestUndeclaredPenaltyBucket(t *testing.T) {
	e := Endpoint{Rate: 1, Capacity: 2, Headers: []string{"none"}}
	rep := analyze(t, e, Options{}, burstThenPoll(2, 20, 100, 6020, 0))
	if got := certainIDs(rep); !slices.Equal(got, []string{IDUndeclaredPenalty}) {
		t.Errorf("certain %v, want undeclared-penalty:%s", got, describeFindings(rep))
	}
	rep = analyze(t, withPenalty(e, block(6*time.Second)), Options{}, burstThenPoll(2, 20, 100, 6020, 0))
	if got := certainIDs(rep); len(got) > 0 {
		t.Errorf("declared block:6s: certain %v:%s", got, describeFindings(rep))
	}
}

// TestDeclaredBlockFreshStart: under a block shorter than the window, an
// honest key admits a whole quota when the block ends; declared, that is
// no window-limit-exceeded (nor, for a bucket, a burst); undeclared, the
// count is exceeded.
func TestDeclaredBlockFreshStart(t *testing.T) {
	run := func() *runBuilder { return burstThenPoll(5, 20, 50, 470, 600) }
	for _, tt := range []struct {
		name string
		e    Endpoint
		want []string
	}{
		{"sliding, undeclared", fiveIn2s, []string{IDWindowLimitExceeded}},
		{"sliding, block:500ms", withPenalty(fiveIn2s, block(500*time.Millisecond)), nil},
		{"fixed first-request, block:500ms", withPenalty(Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Headers: []string{"none"}}, block(500*time.Millisecond)), nil},
		{"fixed epoch, block:500ms", withPenalty(Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: limiter.AlignEpoch, Headers: []string{"none"}}, block(500*time.Millisecond)), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := analyze(t, tt.e, Options{}, run())
			if got := certainIDs(rep); !slices.Equal(got, tt.want) {
				t.Errorf("certain %v, want %v:%s", got, tt.want, describeFindings(rep))
			}
		})
	}
	// A bucket of 5 at 1/s blocked for 150 ms admits 5 again: 10 within
	// 208 ms (a burst is judged over at most 250 ms at 1/s).
	e := Endpoint{Rate: 1, Capacity: 5, Headers: []string{"none"}}
	bucketRun := func() *runBuilder { return burstThenPoll(5, 20, 50, 120, 200) }
	if got := certainIDs(analyze(t, e, Options{}, bucketRun())); !slices.Contains(got, IDBurstLimitExceeded) {
		t.Errorf("bucket, undeclared: certain %v, want burst-limit-exceeded", got)
	}
	if got := certainIDs(analyze(t, withPenalty(e, block(150*time.Millisecond)), Options{}, bucketRun())); len(got) > 0 {
		t.Errorf("bucket, block:150ms: certain %v", got)
	}
}

// TestFirstRequestWindowsAfterLongRefusal: fixed windows that start at a
// key's first request, and a key refused for 3 s (a penalty) that then
// admits 5, and 5 more 2 s after those: each window holds 5. Windows
// chained across the refusals would hold 10 (window-limit-exceeded); the
// penalty is the finding.
func TestFirstRequestWindowsAfterLongRefusal(t *testing.T) {
	e := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Headers: []string{"none"}}
	b := burstThenPoll(5, 20, 100, 4820, 0)
	// The first admission after the refusals at 4.9 s opens a window
	// [4.9, 6.9); the next opens at 6.9 s.
	for _, at := range []float64{4900, 5000, 5100, 5200, 5300, 6800, 6900, 7000, 7100, 7200, 7300} {
		status := 200
		if at == 6800 {
			status = 429
		}
		b.add(at, at+1, status)
	}
	rep := analyze(t, e, Options{}, b)
	if got := certainIDs(rep); !slices.Equal(got, []string{IDUndeclaredPenalty}) {
		t.Errorf("certain %v, want undeclared-penalty only:%s", got, describeFindings(rep))
	}
	// A window chained from the burst, without the long refusal, is
	// still judged: 5 admitted at 0 s and 5 more at 1 s.
	b = newRun("a", 0)
	for i := range 5 {
		b.add(float64(2*i), float64(2*i)+1, 200)
	}
	b.add(500, 501, 429)
	for i := range 5 {
		b.add(1000+float64(2*i), 1001+float64(2*i), 200)
	}
	if got := certainIDs(analyze(t, e, Options{}, b)); !slices.Contains(got, IDWindowLimitExceeded) {
		t.Errorf("short refusal: certain %v, want window-limit-exceeded", got)
	}
}

// TestRetryMovedByPenalty: under extend, a request between a refusal and
// its advertised retry moves the window's end: the refused retries are
// honest. Without a declared penalty they are retry-after-early.
func TestRetryMovedByPenalty(t *testing.T) {
	run := func() *runBuilder {
		b := newRun("a", 0)
		for i := range 5 {
			b.add(float64(2*i), float64(2*i)+1, 200)
		}
		b.add(20, 21, 429, "Retry-After: 2") // admitted again at 2.021 s, if nothing comes
		b.add(1000, 1001, 429, "Retry-After: 2")
		b.add(2100, 2101, 429, "Retry-After: 2")
		b.add(2200, 2201, 429, "Retry-After: 2")
		return b
	}
	if got := certainty(analyze(t, fiveIn2s, Options{}, run()), IDRetryAfterEarly); got != Certain {
		t.Errorf("undeclared: retry-after-early %q, want certain", got)
	}
	for _, p := range []limiter.Penalty{extend, restart} {
		if rep := analyze(t, withPenalty(fiveIn2s, p), Options{}, run()); len(certainIDs(rep)) > 0 {
			t.Errorf("declared %s: certain %v:%s", p, certainIDs(rep), describeFindings(rep))
		}
	}
}

// TestHeadersUnderDeclaredPenalty: a rate-limit header tells the state
// the limiter's count leaves, which a declared penalty may change after
// it was sent: a refusal that starts a block keeps the key refused past
// the advertised reset; a block shorter than the period admits a fresh
// quota within an advertised effective window; a window extend re-anchors
// carries a counter's count from up to two lengths back. An honest target
// of the declared penalty draws no certain finding.
func TestHeadersUnderDeclaredPenalty(t *testing.T) {
	const policy = `RateLimit-Policy: "default";q=5;w=2`
	rl := func(r int, t int) string { return fmt.Sprintf(`RateLimit: "default";r=%d;t=%d`, r, t) }
	cases := []struct {
		name string
		e    Endpoint
		run  func() *runBuilder
	}{
		{"a block outlasts the reset advertised before it",
			Endpoint{Limit: 5, Window: 2 * time.Second, Headers: []string{"draft-7"}, Penalty: block(3 * time.Second)},
			func() *runBuilder {
				d7 := func(r, t int) string { return fmt.Sprintf("RateLimit: limit=5, remaining=%d, reset=%d", r, t) }
				b := newRun("a", 0)
				for i := range 5 {
					b.add(float64(2*i), float64(2*i)+1, 200, d7(4-i, 2))
				}
				b.add(100, 101, 429, d7(0, 3), "Retry-After: 3") // the block runs to 3.1 s
				b.add(2100, 2101, 429, d7(0, 1), "Retry-After: 1")
				b.add(2200, 2201, 429, d7(0, 1), "Retry-After: 1")
				return b
			}},
		{"a short block admits a fresh quota within an effective window",
			Endpoint{Limit: 5, Window: 3 * time.Second, Headers: []string{"draft-11"}, Penalty: block(time.Second)},
			func() *runBuilder {
				b := newRun("a", 0)
				for i := range 5 {
					b.add(float64(2*i), float64(2*i)+1, 200, rl(4-i, 3), `RateLimit-Policy: "default";q=5;w=3`)
				}
				b.add(50, 51, 429, rl(0, 1), `RateLimit-Policy: "default";q=5;w=3`, "Retry-After: 1") // blocked to 1.05 s
				for i := range 5 {
					b.add(1100+float64(2*i), 1101+float64(2*i), 200, rl(4-i, 3), `RateLimit-Policy: "default";q=5;w=3`)
				}
				return b
			}},
		{"extend carries a counter's count across a pause of one window",
			Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: limiter.AlignFirstRequest,
				Headers: []string{"draft-8"}, Penalty: extend},
			func() *runBuilder {
				b := newRun("a", 0)
				for i := range 3 {
					b.add(float64(2*i), float64(2*i)+1, 200, rl(4-i, 2), policy)
				}
				// The counter rolled at 2.004 s with 3 behind it: at 2.5 s
				// it weighs ⌊3·0.752⌋ = 2 of them in.
				b.add(2500, 2501, 200, rl(2, 2), policy)
				return b
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if rep := analyze(t, tc.e, Options{}, tc.run()); len(certainIDs(rep)) > 0 {
				t.Errorf("declared %s: certain %v:%s", tc.e.Penalty, certainIDs(rep), describeFindings(rep))
			}
			undeclared := tc.e
			undeclared.Penalty = limiter.Penalty{}
			if rep := analyze(t, undeclared, Options{}, tc.run()); len(certainIDs(rep)) == 0 {
				t.Errorf("undeclared: no certain finding:%s", describeFindings(rep))
			}
		})
	}
}

// TestUnderAdmissionAfterAnUnknownStart: a run whose first response is
// admitted but advertises no remaining value says nothing of what others
// used before it (a smoke test, the previous CI job): a refusal that such
// traffic explains is no certain under-admission. Nothing from before the
// run counts a window after its first request (a sliding window), and what
// a bucket's acceptances surely drew bounds it whatever it held before;
// a first response advertising a whole quota proves the start.
func TestUnderAdmissionAfterAnUnknownStart(t *testing.T) {
	bucket := Endpoint{Rate: 0.25, Capacity: 5, Headers: []string{"none"}}
	draft8 := Endpoint{Limit: 5, Window: 2 * time.Second, Headers: []string{"draft-8"}}
	type at struct {
		ms     float64
		status int
		hdr    []string
	}
	whole := []string{`RateLimit: "default";r=4;t=2`, `RateLimit-Policy: "default";q=5;w=2`}
	for _, tt := range []struct {
		name    string
		e       Endpoint
		reqs    []at
		certain bool
	}{
		{"window: refused right after one admission", fiveIn2s, []at{{0, 200, nil}, {10, 429, nil}}, false},
		{"window: refused a window after the first request", fiveIn2s, []at{{0, 200, nil}, {1000, 429, nil}, {2100, 429, nil}}, true},
		{"window: the first response advertises a whole quota", draft8, []at{{0, 200, whole}, {10, 429, nil}}, true},
		{"bucket: refused after two admissions", bucket, []at{{0, 200, nil}, {5, 200, nil}, {10, 429, nil}}, false},
		{"bucket: refused after a token's refill", bucket, []at{{0, 200, nil}, {5, 200, nil}, {4600, 429, nil}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newRun("a", 0)
			for _, r := range tt.reqs {
				b.add(r.ms, r.ms+1, r.status, r.hdr...)
			}
			rep := analyze(t, tt.e, Options{}, b)
			if got := rep.Count(IDUnderAdmission, Certain) == 1; got != tt.certain {
				t.Errorf("certain under-admission %v, want %v:%s", got, tt.certain, describeFindings(rep))
			}
		})
	}
}
