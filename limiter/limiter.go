// Package limiter holds the rate-limiting algorithms rlprobe serves, models
// and infers: pure functions Step(state, now) → (state, Decision) over small
// serialisable states, and a Store that keys those states.
//
// Time is always an argument; nothing in this package reads the clock. Times
// are used at microsecond resolution (the unit the Redis port stores), so two
// calls whose now differ by less than 1 µs see the same instant.
package limiter

import "time"

// Algorithm names a server algorithm. The spellings are those of the
// contract (serve --algorithm).
type Algorithm string

// The algorithms.
const (
	// FixedWindow admits Limit requests per window of length Window. Windows
	// start at multiples of Window since the Unix epoch (AlignEpoch) or at a
	// key's first request after its previous window ended (AlignFirstRequest).
	FixedWindow Algorithm = "fixed-window"
	// SlidingLog admits a request when fewer than Limit requests are logged
	// in the trailing interval (now−Window, now]. Only accepted requests are
	// logged unless CountRejected is set.
	SlidingLog Algorithm = "sliding-log"
	// SlidingWindowCounter estimates the trailing count as
	// floor(prev·(Window−elapsed)/Window) + curr (Cloudflare, HAProxy) and
	// admits while the estimate is below Limit. With CountRejected, rejected
	// requests are counted too (HAProxy track-before-deny lockout).
	SlidingWindowCounter Algorithm = "sliding-window-counter"
	// TokenBucket holds Capacity tokens, initially full, refilled
	// continuously at Rate per second; a request takes one token.
	TokenBucket Algorithm = "token-bucket"
	// GCRA is nginx limit_req with nodelay, integer arithmetic exactly:
	// milli-requests, rate truncated to milli-requests per second, rejected
	// requests leave the state unchanged. Capacity = burst + 1. Never delays.
	GCRA Algorithm = "gcra"
	// LeakyBucket is nginx limit_req exactly: like GCRA, but excess requests
	// beyond the first Delay+1 (Delay = nginx delay=N, 0 by default) are
	// delayed by (excess − delay)/rate before being served, unless NoDelay.
	LeakyBucket Algorithm = "leaky-bucket"
)

// Algorithms lists every algorithm in the contract's order.
var Algorithms = []Algorithm{FixedWindow, SlidingLog, SlidingWindowCounter, TokenBucket, GCRA, LeakyBucket}

// Align says where fixed windows start.
type Align string

// Window alignments.
const (
	AlignEpoch        Align = "epoch"         // windows at multiples of Window since the Unix epoch
	AlignFirstRequest Align = "first-request" // a window starts at a key's first request
)

// Config is one limiter's algorithm and parameters. It is plain data: the
// same struct comes from flags, YAML or JSON. The zero value is not valid;
// call Validate.
type Config struct {
	Algorithm Algorithm `json:"algorithm"`
	// Limit is the number of requests admitted per Window (window algorithms).
	Limit int64 `json:"limit,omitempty"`
	// Window is the window length (window algorithms).
	Window time.Duration `json:"window,omitempty"`
	// Rate is the refill rate in requests per second (bucket algorithms).
	// GCRA and LeakyBucket truncate it to milli-requests per second as
	// nginx does (1r/m → 16 milli-requests/s, one request per 62.5 s).
	Rate float64 `json:"rate,omitempty"`
	// Capacity is how many requests a full bucket admits at once from idle
	// (bucket algorithms); nginx burst = Capacity − 1.
	Capacity int64 `json:"capacity,omitempty"`
	// NoDelay makes LeakyBucket reject or pass at once, never delay (nginx
	// nodelay); LeakyBucket with NoDelay decides exactly as GCRA.
	NoDelay bool `json:"nodelay,omitempty"`
	// Delay is nginx's delay=N for LeakyBucket: the first Delay excess
	// requests (Delay+1 requests from idle) are served at once.
	Delay int64 `json:"delay,omitempty"`
	// Align says where fixed windows (FixedWindow, SlidingWindowCounter)
	// start. Empty means AlignFirstRequest for FixedWindow and AlignEpoch
	// for SlidingWindowCounter.
	Align Align `json:"align,omitempty"`
	// CountRejected makes rejected requests count against the quota
	// (SlidingLog, SlidingWindowCounter, FixedWindow).
	CountRejected bool `json:"count_rejected,omitempty"`
}

// Decision is the outcome of one request. Which header field carries which
// value:
//
//	Limit       RateLimit-Policy q, RateLimit-Limit (-06), limit (-07), X-RateLimit-Limit
//	Remaining   RateLimit r (-08+), RateLimit-Remaining (-06), remaining (-07), X-RateLimit-Remaining
//	UntilMore   RateLimit t (-08+): seconds until additional quota is available
//	UntilFull   RateLimit-Reset (-06), reset (-07), X-RateLimit-Reset: until quota is fully restored
//	RetryAfter  Retry-After on a rejection
//
// Durations are exact; header formatting rounds them up to whole seconds.
type Decision struct {
	// Allowed reports whether the request is admitted.
	Allowed bool `json:"allowed"`
	// Delay is how long an admitted request waits before it is served
	// (LeakyBucket without NoDelay); zero otherwise.
	Delay time.Duration `json:"delay,omitempty"`
	// Limit is the advertised quota: Limit for window algorithms, Capacity
	// for buckets.
	Limit int64 `json:"limit"`
	// Remaining is the quota left after this request: how many more
	// requests would be admitted if they arrived now.
	Remaining int64 `json:"remaining"`
	// UntilMore is the time until at least one more request would be
	// admitted; zero while Remaining > 0.
	UntilMore time.Duration `json:"until_more"`
	// UntilFull is the time until the quota is fully restored (Remaining =
	// Limit) if no further request arrives.
	UntilFull time.Duration `json:"until_full"`
	// RetryAfter is, for a rejected request, the time until a retry is
	// really admitted (never earlier); zero for admitted requests.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}
