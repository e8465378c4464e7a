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
