package verify

import (
	"math"
	"net/http"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// Advertised returns the rules a response advertises, for checking a
// target against its own promise when no policy is declared: each
// RateLimit-Policy item with a window (q in any w, sliding); failing that,
// an advertised limit (RateLimit-Limit, X-RateLimit-Limit, draft-7 limit)
// on a response that is the first of a fresh quota (remaining = limit − 1),
// whose reset then gives the window, rounded up to whole seconds. It
// returns nil when the response advertises no usable policy. received is
// when the response arrived; an epoch or date reset is read against the
// response's Date when it has one (headers.ServerNow), so that a skew
// between the server's clock and the client's does not stretch or shrink
// the window.
func Advertised(h http.Header, received time.Time) []Endpoint {
	now, _ := headers.ServerNow(h, received)
	ph := headers.Parse(h, now)
	var out []Endpoint
	for _, p := range ph.Policies {
		if p.HasWindow && p.Quota > 0 && (p.Unit == "" || p.Unit == "requests") {
			out = append(out, Endpoint{Name: p.Name, Limit: p.Quota, Window: p.Window})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, l := range ph.Limits {
		if l.HasLimit && l.HasRemaining && l.HasReset && l.Limit > 0 && l.Remaining == l.Limit-1 && l.Reset > 0 {
			w := time.Duration(math.Ceil(l.Reset.Seconds())) * time.Second
			return []Endpoint{{Name: l.Name, Limit: l.Limit, Window: w}}
		}
	}
	return nil
}

// AnalyzeRun judges one run held in memory (a record file as Read returns
// it, or one being written) against p: Analyze over record.Merge(run).
func AnalyzeRun(run *record.Run, p Policy, opt Options) Report {
	return Analyze(record.Merge(run), p, opt)
}

// DemoPolicy is the policy `rlprobe demo` checks the nginx-like reference
// server against: rate 1/s, burst 3 (capacity 4), rejections with 429, no
// rate-limit headers expected. The demo server answers 503 without
// Retry-After, so AnalyzeRun of its burst reports reject-status-mismatch
// (error) and retry-after-missing (warning).
func DemoPolicy() Policy {
	return Policy{Version: PolicyVersion, Endpoints: []Endpoint{{
		Rate: 1, Capacity: 4, Status: http.StatusTooManyRequests, Key: KeyGlobal,
		Headers: []string{string(headers.None)}, RetryAfter: RetryAfterOptional,
	}}}
}
