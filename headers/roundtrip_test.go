package headers

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// randomQuotas draws 1–3 quotas with distinct limits (draft-6/-7 forbid two
// policies of one quota), names of any printable ASCII (quotes and
// backslashes included), and durations with nanoseconds to round.
func randomQuotas(r *rand.Rand) []Quota {
	n := 1 + r.IntN(3)
	qs := make([]Quota, 0, n)
	used := map[int64]bool{}
	for len(qs) < n {
		var q Quota
		name := make([]byte, r.IntN(12))
		for i := range name {
			name[i] = byte(0x20 + r.IntN(0x7f-0x20))
		}
		q.Policy = string(name)
		switch r.IntN(4) {
		case 0:
			q.Limit = maxSFInteger - r.Int64N(10)
		default:
			q.Limit = r.Int64N(1_000_000)
		}
		if used[q.Limit] {
			continue
		}
		used[q.Limit] = true
		if r.IntN(4) > 0 {
			q.Window = time.Duration(1 + r.Int64N(int64(48*time.Hour)))
		}
		q.Remaining = r.Int64N(q.Limit + 1)
		q.UntilMore = time.Duration(r.Int64N(int64(time.Hour)))
		q.UntilFull = time.Duration(r.Int64N(int64(48 * time.Hour)))
		q.Effective = time.Duration(r.Int64N(int64(time.Hour)))
		q.Cost = r.Int64N(3)
		if r.IntN(3) == 0 {
			q.Unit = registeredUnits[r.IntN(len(registeredUnits))]
		}
		if r.IntN(3) == 0 {
			q.PartitionKey = make([]byte, 1+r.IntN(16))
			for i := range q.PartitionKey {
				q.PartitionKey[i] = byte(r.IntN(256))
			}
		}
		qs = append(qs, q)
	}
	return qs
}

// up is d rounded up to whole seconds, as the formatter must.
func up(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// TestRoundTrip formats random quotas in each dialect and parses them back
// under the same dialect at the same instant: every value the dialect carries
// must come back, durations rounded up to whole seconds.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 400 {
		qs := randomQuotas(r)
		now := time.Unix(1_700_000_000+r.Int64N(100_000_000), r.Int64N(1e9))
		for _, d := range []Dialect{Draft8, Draft11, Draft12, Draft7, Draft6, XRateLimit, XRateLimitEpoch} {
			read := d // the dialect Parse reports: draft-11 is written in draft-8's syntax
			if d == Draft11 {
				read = Draft8
			}
			h := http.Header{}
			Set(h, d, now, qs...)
			p := Parse(h, now)
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("iteration %d, %s, quotas %+v:\n%sparsed:\n%s"+format, append([]any{iter, d, qs, formatHeader(h), dump(p)}, args...)...)
			}
			if len(p.Problems) != 0 {
				fail("want no problems")
			}
			if len(p.Dialects) != 1 || p.Dialects[0] != read {
				fail("want dialects [%s]", read)
			}
			wantPols, wantLims := expectRoundTrip(d, now, qs)
			if len(p.Policies) != len(wantPols) {
				fail("got %d policies, want %d", len(p.Policies), len(wantPols))
			}
			for i, want := range wantPols {
				if got := p.Policies[i]; got.Name != want.Name || got.Quota != want.Quota || got.Window != want.Window ||
					got.HasWindow != want.HasWindow || got.Unit != want.Unit || !bytes.Equal(got.PartitionKey, want.PartitionKey) || got.Dialect != read {
					fail("policy %d: want %+v", i, want)
				}
			}
			if len(p.Limits) != len(wantLims) {
				fail("got %d limits, want %d", len(p.Limits), len(wantLims))
			}
			for i, want := range wantLims {
				if got := p.Limits[i]; got.Name != want.Name || got.HasLimit != want.HasLimit || got.Limit != want.Limit ||
					!got.HasRemaining || got.Remaining != want.Remaining || !got.HasReset || got.Reset != want.Reset ||
					got.ResetIsEpoch != want.ResetIsEpoch || !bytes.Equal(got.PartitionKey, want.PartitionKey) || got.Dialect != read ||
					got.HasCost != want.HasCost || got.Cost != want.Cost {
					fail("limit %d: want %+v", i, want)
				}
			}
		}
	}
}

// expectRoundTrip states, independently of the formatter, what parsing a
// dialect's rendering of qs at now must give.
func expectRoundTrip(d Dialect, now time.Time, qs []Quota) ([]Policy, []Limit) {
	clean := func(s string) string { // non-printable bytes become '?'; none are drawn
		if s == "" {
			return "default"
		}
		return s
	}
	var pols []Policy
	var lims []Limit
	switch d {
	case Draft8, Draft11, Draft12:
		for _, q := range qs {
			pols = append(pols, Policy{Name: clean(q.Policy), Quota: q.Limit, Window: up(q.Window), HasWindow: q.Window > 0,
				Unit: q.Unit, PartitionKey: q.PartitionKey})
			l := Limit{Name: clean(q.Policy), Remaining: q.Remaining, Reset: up(q.UntilMore), PartitionKey: q.PartitionKey}
			if d != Draft8 {
				l.Reset = up(q.Effective) // the effective window
			}
			if d == Draft12 && q.Cost > 0 {
				l.Cost, l.HasCost = q.Cost, true
			}
			lims = append(lims, l)
		}
		return pols, lims
	}
	// The other dialects: the state of the quota with the fewest remaining,
	// policies for windowed quotas (named only in Envoy's list, which
	// x-ratelimit uses for several quotas).
	x := d == XRateLimit || d == XRateLimitEpoch
	e := qs[0]
	for _, q := range qs {
		if q.Remaining < e.Remaining {
			e = q
		}
	}
	for _, q := range qs {
		if q.Window > 0 && (!x || len(qs) > 1) {
			p := Policy{Quota: q.Limit, Window: up(q.Window), HasWindow: true}
			if x {
				p.Name = q.Policy
			}
			pols = append(pols, p)
		}
	}
	l := Limit{Limit: e.Limit, HasLimit: true, Remaining: e.Remaining, Reset: up(e.UntilFull)}
	if d == XRateLimitEpoch {
		// The reset moment is now + UntilFull rounded up to a whole second.
		at := now.Add(e.UntilFull)
		if at.Nanosecond() != 0 {
			at = at.Truncate(time.Second).Add(time.Second)
		}
		l.Reset, l.ResetIsEpoch = at.Sub(now), true
	}
	return pols, append(lims, l)
}

// TestEpochResetFromReceipt checks that an epoch reset is a delay from the
// receipt time, however late the response arrives, and never negative.
func TestEpochResetFromReceipt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	Set(h, XRateLimitEpoch, now, Quota{Limit: 10, Remaining: 0, UntilFull: 10 * time.Second})
	for _, tt := range []struct {
		latency, want time.Duration
	}{{0, 10 * time.Second}, {300 * time.Millisecond, 9700 * time.Millisecond}, {time.Minute, 0}} {
		p := Parse(h, now.Add(tt.latency))
		if len(p.Limits) != 1 || p.Limits[0].Reset != tt.want || !p.Limits[0].ResetIsEpoch {
			t.Errorf("received %v after the response: limits %+v; want reset %v (epoch)", tt.latency, p.Limits, tt.want)
		}
	}
}

// TestSetReplaces checks that Set replaces its dialect's fields, removes them
// when given no quota, and leaves other dialects alone.
func TestSetReplaces(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	h.Add("ratelimit", "stale") // a non-canonical key is replaced too
	Set(h, XRateLimit, now, Quota{Limit: 5, Remaining: 1, UntilFull: time.Second})
	Set(h, Draft8, now, Quota{Policy: "a", Limit: 9, Window: time.Minute, Remaining: 8})
	Set(h, Draft8, now, Quota{Policy: "b", Limit: 7, Window: time.Minute, Remaining: 6})
	want := "RateLimit: \"b\";r=6;t=0\nRateLimit-Policy: \"b\";q=7;w=60\n" +
		"X-RateLimit-Limit: 5\nX-RateLimit-Remaining: 1\nX-RateLimit-Reset: 1\n"
	if got := formatHeader(h); got != want {
		t.Errorf("after three Sets:\n%s\nwant\n%s", got, want)
	}
	Set(h, Draft8, now)
	if got := formatHeader(h); got != "X-RateLimit-Limit: 5\nX-RateLimit-Remaining: 1\nX-RateLimit-Reset: 1\n" {
		t.Errorf("after Set(draft-8) with no quota:\n%s", got)
	}
	Set(h, None, now, Quota{Limit: 1})
	if len(h) != 3 {
		t.Errorf("Set(None) changed the header: %v", h)
	}
}

// TestSetClamps checks the formatter's limits: negative values are 0,
// Integers stop at 15 digits, names lose non-ASCII bytes, delay resets stay
// below the epoch threshold.
func TestSetClamps(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	Set(h, Draft8, now, Quota{Policy: "caf\u00e9\n", Limit: 1 << 62, Window: -time.Second, Remaining: -4, UntilMore: -time.Hour})
	if got, want := Get(h, "RateLimit-Policy"), `"caf???";q=999999999999999`; got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if got, want := Get(h, "RateLimit"), `"caf???";r=0;t=0`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	Set(h, XRateLimit, now, Quota{Limit: 3, UntilFull: 100 * 365 * 24 * time.Hour})
	if got, want := Get(h, "X-RateLimit-Reset"), "999999999"; got != want {
		t.Errorf("X-RateLimit-Reset = %s, want %s (capped below the epoch threshold)", got, want)
	}
}
