package infer

import (
	"net/http"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// TestBusyRest: a first answer shows the limiter busy when it is refused,
// or advertises less than the quota − 1 a whole limiter leaves; the rest
// is the longest time it advertises, until the quota is whole when a reset
// or a window says so (a Retry-After alone is the time until one request).
func TestBusyRest(t *testing.T) {
	answer := func(status int, hdr ...string) record.Result {
		h := http.Header{}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Add(hdr[i], hdr[i+1])
		}
		return record.Result{Type: record.TypeResult, Outcome: record.OutcomeResponse, Status: status, TTFB: int64(time.Millisecond), Headers: h}
	}
	for _, tt := range []struct {
		name  string
		pre   record.Result
		busy  bool
		rest  time.Duration
		whole bool
	}{
		{"admitted, whole", answer(200, "RateLimit", `"d";r=9;t=10`, "RateLimit-Policy", `"d";q=10;w=10`), false, 0, false},
		{"admitted, no headers", answer(200), false, 0, false},
		{"admitted, others used some", answer(200, "RateLimit", `"d";r=4;t=3`, "RateLimit-Policy", `"d";q=10;w=10`), true, 10 * time.Second, true},
		{"refused, Retry-After", answer(429, "Retry-After", "7"), true, 7 * time.Second, false},
		{"refused, X-RateLimit reset", answer(429, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4"), true, 4 * time.Second, true},
		{"refused, Retry-After and a longer reset", answer(429, "Retry-After", "1", "RateLimit", `"d";r=0;t=5`), true, 5 * time.Second, true},
		{"refused, nothing advertised", answer(503), true, 0, false},
		{"neither", answer(404), false, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rest, whole, why, busy := BusyRest(tt.pre, origin, 0)
			if busy != tt.busy || rest != tt.rest || whole != tt.whole || busy != (why != "") {
				t.Errorf("BusyRest = %v, whole %v, %q, %v; want %v, whole %v, busy %v", rest, whole, why, busy, tt.rest, tt.whole, tt.busy)
			}
		})
	}
}
