package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestBucketBandNginxArithmetic: a server with nginx's arithmetic (the
// limiter's GCRA: last time in whole milliseconds, rate in whole
// milli-requests) at 1,000 per minute, capacity 1,000, driven at twice its
// rate for four minutes, ends some tokens short of the declared bucket and
// says so honestly: no certain ratelimit-header-inconsistent. A server
// whose remaining is 0 from the start still is one.
func TestBucketBandNginxArithmetic(t *testing.T) {
	e := Endpoint{Rate: 1000.0 / 60, Capacity: 1000, Status: 429}
	for _, tc := range []struct {
		name string
		lie  bool
		want int
	}{
		{"honest nginx arithmetic", false, 0},
		{"remaining 0 from the start", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := limiter.Config{Algorithm: limiter.GCRA, Rate: e.Rate, Capacity: e.Capacity}
			var st limiter.State
			b := newRun("a", 0)
			// A burst of the capacity, then 4 minutes at twice the rate,
			// 30.0003 ms apart (never on a whole millisecond): each of the
			// 4,000 admissions loses almost a milli-request of refill.
			for i := 0; i < 1000+8000; i++ {
				ms := float64(i) * 0.01
				if i >= 1000 {
					ms = 10 + float64(i-1000)*30.0003
				}
				var d limiter.Decision
				st, d = cfg.Step(st, t0.Add(time.Duration(ms*float64(time.Millisecond))))
				rem := d.Remaining
				if tc.lie {
					rem = 0
				}
				hdr := []string{fmt.Sprintf(`RateLimit: "default";r=%d;t=1`, rem), `RateLimit-Policy: "default";q=1000;w=60`}
				status := 200
				if !d.Allowed {
					status = 429
				}
				b.add(ms, ms+0.005, status, hdr...)
			}
			rep := analyze(t, e, Options{}, b)
			if got := rep.Count(IDRateLimitHeaderInconsistent, Certain); got != tc.want {
				t.Errorf("certain %s: %d, want %d; findings:%s", IDRateLimitHeaderInconsistent, got, tc.want, describeFindings(rep))
			}
		})
	}
}

// TestBucketUnderAdmissionSparesNginxArithmetic: an nginx-style bucket
// (ngx_http_limit_req) keeps time in whole milliseconds and tokens in
// whole milli-requests, and honestly holds a few thousandths of a token
// fewer than the declared bucket: a refusal within that of the first
// whole token is no certain under-admission; one well past it is.
func TestBucketUnderAdmissionSparesNginxArithmetic(t *testing.T) {
	e := Endpoint{Rate: 0.25, Capacity: 5, Headers: []string{"none"}}
	for _, tc := range []struct {
		name    string
		rejectS float64 // the refusal, seconds after the burst
		certain bool
	}{
		{"a hair past the first token", 4.02, false},
		{"a third of a token past it", 5.4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRun("a", 0)
			for i := range 5 {
				b.add(float64(2*i), float64(2*i)+1, 200)
			}
			at := 1000 * tc.rejectS
			b.add(at, at+1, 429)
			rep := analyze(t, e, Options{}, b)
			if got := rep.Count(IDUnderAdmission, Certain) == 1; got != tc.certain {
				t.Errorf("certain under-admission %v, want %v:%s", got, tc.certain, describeFindings(rep))
			}
		})
	}
}

// TestBucketRateSparesNginxMilliseconds: nginx keeps its clock in whole
// milliseconds, so over any span it may count up to a millisecond's more
// refill than the declared bucket: the ninth admission of a 2/s bucket of
// 4, half a millisecond before 2.5 s, is no certain excess (real nginx did
// this under -race in CI); the ninth at 2.4 s is.
func TestBucketRateSparesNginxMilliseconds(t *testing.T) {
	e := Endpoint{Rate: 2, Capacity: 4, Headers: []string{"none"}}
	for _, tc := range []struct {
		name    string
		lastMS  float64
		certain bool
	}{
		{"half a millisecond early", 2499.6, false},
		{"a tenth of a second early", 2400, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRun("a", 0)
			for i := range 4 {
				b.add(0.1*float64(i), 0.1*float64(i)+0.1, 200)
			}
			for _, at := range []float64{500.5, 1000.5, 1500.5, 2000.5, tc.lastMS} {
				b.add(at, at+0.1, 200)
			}
			rep := analyze(t, e, Options{}, b)
			got := rep.Count(IDRateLimitExceeded, Certain)+rep.Count(IDBurstLimitExceeded, Certain) > 0
			if got != tc.certain {
				t.Errorf("a certain excess %v, want %v:%s", got, tc.certain, describeFindings(rep))
			}
		})
	}
}

// TestBucketBusyBeforeTheRun: a token bucket of 5 at 1/s that other
// traffic drained by `used` tokens just before the run answers a burst of
// 8 honestly — fewer admitted, lower remaining values, from its first
// response on: neither a certain ratelimit-header-inconsistent nor a
// certain under-admission (the run's first response shows the doubt). A
// server that advertises 0 throughout while admitting the whole burst
// still lies certainly: its later admissions drew tokens it said it did
// not have (bucketNeed).
func TestBucketBusyBeforeTheRun(t *testing.T) {
	e := Endpoint{Rate: 1, Capacity: 5, Status: 429, Headers: []string{"draft-8"}}
	for _, tc := range []struct {
		name         string
		used         int
		zero         bool // advertise remaining 0 on every response
		inconsistent bool
	}{
		{"at rest", 0, false, false},
		{"3 used before", 3, false, false},
		{"4 used before", 4, false, false},
		{"at rest, remaining 0 throughout", 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := limiter.Config{Algorithm: limiter.TokenBucket, Rate: e.Rate, Capacity: e.Capacity}
			var st limiter.State
			for range tc.used {
				st, _ = cfg.Step(st, t0.Add(-time.Millisecond))
			}
			b := newRun("a", 0)
			for i := range 8 {
				ms := float64(i) * 10
				var d limiter.Decision
				st, d = cfg.Step(st, t0.Add(time.Duration(ms*float64(time.Millisecond))))
				rem, status := d.Remaining, 200
				if tc.zero {
					rem = 0
				}
				if !d.Allowed {
					status = 429
				}
				b.add(ms, ms+1, status, fmt.Sprintf(`RateLimit: "default";r=%d;t=1`, rem), `RateLimit-Policy: "default";q=5;w=5`, "Retry-After: 1")
			}
			rep := analyze(t, e, Options{}, b)
			if got := rep.Count(IDRateLimitHeaderInconsistent, Certain) > 0; got != tc.inconsistent {
				t.Errorf("certain %s %v, want %v; findings:%s", IDRateLimitHeaderInconsistent, got, tc.inconsistent, describeFindings(rep))
			}
			if rep.Count(IDUnderAdmission, Certain) > 0 {
				t.Errorf("a certain %s from a busy start:%s", IDUnderAdmission, describeFindings(rep))
			}
		})
	}
}
