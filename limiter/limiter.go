// Package limiter holds the rate-limiting algorithms rlprobe serves, models
// and infers: pure functions Step(state, now) → (state, Decision) over small
// serialisable states, and a Store that keys those states.
//
// A [Config] names an algorithm and its parameters; [Config.Validate]
// reports every problem at once. [Config.Step] decides one request: it takes
// a key's [State] (the zero State for a key never seen) and the arrival time,
// and returns the key's next State and the [Decision]. [Store] keeps States
// per key in memory (sharded, expiring, capped) for a server.
//
// A Config may also name behaviours beyond the algorithm: a [Penalty]
// (block, extend, restart), idle eviction (ForgetIdle), whole-token or
// interval [Refill], and windows on a timer ([AlignTimer] with Phase).
// Step applies them, so whatever replays a Config replays them too.
//
// Time is always an argument; nothing in this package reads the clock. Times
// are used at microsecond resolution (the unit the Redis port stores), so two
// calls whose now differ by less than 1 µs see the same instant. GCRA and
// LeakyBucket follow nginx and use a millisecond clock (now in µs divided by
// 1000, rounded down). Arithmetic is on integers except where a float rate
// is turned into an integer once (the token bucket's refill interval in µs,
// nginx's milli-requests per second: [Config.Params]), so a port that takes
// those integers and does the same integer operations makes the same
// decisions for the same µs times.
//
// Times are absolute Unix times and are expected to lie after 1970: the zero
// State means "never seen", and a state written at the Unix epoch itself
// could be mistaken for it.
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
	// Limit is the number of requests admitted per Window (window
	// algorithms only), 1 to 1e9.
	Limit int64 `json:"limit,omitempty"`
	// Window is the window length (window algorithms only): a positive whole
	// number of microseconds.
	Window time.Duration `json:"window,omitempty"`
	// Rate is the refill rate in requests per second (bucket algorithms
	// only); see units.ParseRate for the contract's spellings. TokenBucket
	// refills one token every 1/Rate rounded to the nearest microsecond
	// (3/s → every 333333 µs), so rates up to 1e6/s are accepted but rates
	// above about 1000/s lose precision. GCRA and LeakyBucket truncate it to
	// milli-requests per second as nginx does (1r/m → 16 milli-requests/s,
	// one request per 62.5 s); they need at least 0.001/s. [Config.Params]
	// gives the resulting integers.
	Rate float64 `json:"rate,omitempty"`
	// Capacity is how many requests a full bucket admits at once from idle
	// (bucket algorithms only), 1 to 1e9; nginx burst = Capacity − 1.
	// Capacity/Rate may not exceed 1e9 seconds.
	Capacity int64 `json:"capacity,omitempty"`
	// NoDelay makes LeakyBucket reject or pass at once, never delay (nginx
	// nodelay); LeakyBucket with NoDelay decides exactly as GCRA.
	NoDelay bool `json:"nodelay,omitempty"`
	// Delay is nginx's delay=N for LeakyBucket: the first Delay excess
	// requests (Delay+1 requests from idle) are served at once, later ones
	// are delayed. 0 (nginx's default) delays every excess request;
	// Capacity−1 (= burst) never delays. Exclusive with NoDelay.
	Delay int64 `json:"delay,omitempty"`
	// Align says where fixed windows (FixedWindow, SlidingWindowCounter)
	// start. Empty means AlignFirstRequest for FixedWindow and AlignEpoch
	// for SlidingWindowCounter.
	Align Align `json:"align,omitempty"`
	// CountRejected makes rejected requests count against the quota
	// (SlidingLog, SlidingWindowCounter, FixedWindow). Under SlidingLog and
	// SlidingWindowCounter this locks out a client that keeps sending above
	// the limit; under FixedWindow it only changes the stored count, never a
	// decision. Bucket algorithms never count rejected requests.
	CountRejected bool `json:"count_rejected,omitempty"`
	// Penalty is what a refusal does to the key beyond counting (see
	// PenaltyKind); the zero Penalty is none.
	Penalty Penalty `json:"penalty,omitzero"`
	// ForgetIdle, when positive, drops a key's State once ForgetIdle has
	// passed since its last request (admitted or refused), so a returning
	// client starts from the zero State (a full bucket) early: idle
	// eviction as a cache with a TTL does it. Zero keeps a State until it
	// is equivalent to the zero State by itself.
	ForgetIdle time.Duration `json:"forget_idle,omitempty"`
	// Refill is how TokenBucket and GCRA regain tokens (see Refill); empty
	// is continuous.
	Refill Refill `json:"refill,omitempty"`
	// Phase places AlignTimer windows and RefillInterval ticks: they start
	// at Phase + k·period since the Unix epoch, 0 ≤ Phase < period.
	Phase time.Duration `json:"phase,omitempty"`
}

// Decision is the outcome of one request. Which header field carries which
// value:
//
//	Limit       RateLimit-Policy q, RateLimit-Limit (-06), limit (-07), X-RateLimit-Limit
//	Remaining   RateLimit r (-08+), RateLimit-Remaining (-06), remaining (-07), X-RateLimit-Remaining
//	UntilMore   RateLimit t (-08…-10): seconds until additional quota is available
//	UntilGain   RateLimit t (-11), w (-12): the effective window
//	UntilFull   RateLimit-Reset (-06), reset (-07), X-RateLimit-Reset: until quota is fully restored
//	RetryAfter  Retry-After on a rejection
//
// Durations are exact (to the microsecond; to the millisecond boundary of
// nginx's clock for GCRA and LeakyBucket); header formatting rounds them up
// to whole seconds. UntilMore, UntilFull and RetryAfter assume no other
// request for the key arrives meanwhile: they are the wait of a client that
// stays silent until then. This matters under a penalty, where a request
// moves the limit: during a block they run to the block's end; under
// PenaltyExtend a retry before the window end is refused and moves the end
// again (so does a refused retry under PenaltyRestart), so RetryAfter is
// the wait with no request meanwhile, never less. Under ForgetIdle none
// exceeds the time until the key is forgotten.
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
	// UntilGain is the time until Remaining would grow if no further
	// request for the key arrived: the effective window of draft -11
	// (RateLimit t) and -12 (w), within which no more than Remaining
	// requests are admitted. It equals UntilMore when Remaining is 0, and is
	// 0 when nothing is used (Remaining = Limit, nothing to regain). For a
	// window it runs to the window's end (fixed window), until the oldest
	// logged request leaves (sliding log) or until the estimate drops
	// (sliding-window counter); for a bucket, to the next token.
	UntilGain time.Duration `json:"until_gain,omitempty"`
	// RetryAfter is, for a rejected request, the time until a retry is
	// really admitted (never earlier); zero for admitted requests.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
}

// State is one key's limiter state: a few integers (a short log for
// SlidingLog), serialisable as JSON. The zero State is a key never seen, or
// idle for so long that nothing about it matters; [Config.IdleAt] says when
// a State becomes equivalent to the zero State again, so that a store may
// drop the key.
//
// Times in a State are Unix microseconds, except for GCRA and LeakyBucket,
// whose times are Unix milliseconds as in nginx. The layout per algorithm
// (W = Window in µs, N = Limit, C = Capacity):
//
//   - fixed-window: At = start of the current window, Count = requests
//     counted in it. A request at or after At+W opens a new window (at the
//     epoch-aligned multiple of W, or at the request itself); it is
//     admitted while Count < N.
//   - sliding-log: Log = the counted request times still inside the
//     trailing window, oldest first, at most N of them. A request at now
//     drops times ≤ now−W and is admitted while fewer than N remain.
//   - sliding-window-counter: At = start of the current window, Count = its
//     count, Prev = the previous window's count. A request at elapsed
//     e = now−At is admitted while floor(Prev·(W−e)/W) + Count < N. Windows
//     roll by W; after two idle windows both counts are zero (anchored
//     windows restart at the request).
//   - token-bucket: At = the instant the bucket is full again (GCRA's
//     theoretical arrival time). With I the refill interval in µs, the bucket
//     holds C − ceil((At−now)/I) whole tokens at now; a request is admitted
//     when At−now ≤ (C−1)·I and sets At to max(At, now) + I.
//   - gcra and leaky-bucket: At = nginx's last (ms), Count = nginx's excess
//     (milli-requests). With rate in milli-requests per second, a request at
//     ms computes excess' = max(0, excess − rate·(ms−last)/1000 + 1000) and is
//     rejected when excess' > 1000·(C−1); otherwise excess = excess' and
//     last = ms. As in nginx, a gap ms−last below −60000 counts as 1 ms,
//     other negative gaps as 0, and last only moves when the counted gap is
//     not 0. A key's first request sets excess = 0, last = ms.
//
// The behaviours of a Config (see behaviour.go) change the layout so:
//
//   - Penalty block: Block = the end of the key's block (Unix µs, for
//     every algorithm), the other fields zero. A request before Block is
//     refused and changes nothing; one at or after it steps the zero State.
//   - Penalty extend and restart (window algorithms): the trigger (every
//     request under extend, a refused one under restart) re-anchors the
//     counted state at t = max(now, the State's latest time), so nothing
//     counted expires before t+W: fixed-window sets At = t (Count stays);
//     sliding-log rewrites every logged time to t (so they all expire
//     together at t+W); sliding-window-counter folds its estimate into a
//     window starting at t: At = t, Count = floor(Prev·(W−e)/W) + Count,
//     Prev = 0, after which windows roll by W from t (the counted requests
//     become the previous window at t+W and decay over the next W).
//   - ForgetIdle: Last = the time of the key's latest request, admitted or
//     refused (Unix µs, the latest seen if the clock ran backwards); zero
//     without ForgetIdle. A request at or after Last+ForgetIdle steps the
//     zero State.
//   - RefillWhole (token-bucket in µs, gcra in ms): At = t₀, the key's
//     first request since its State was last zero, Prev = the ticks
//     already credited, Count = the whole tokens held. Tick k falls at
//     t₀ + k·I (token-bucket, I the refill interval in µs) or at
//     t₀ + ceil(k·10⁶/rate) ms (gcra, rate in milli-requests per second);
//     each tick adds one token, up to C. The grid of ticks is the key's
//     for as long as its State is kept.
//   - RefillInterval: the fixed-window layout (µs, for gcra too), with
//     windows of Capacity per period P on the timer Phase + k·P.
//
// Rejected requests leave the State as it was, except where CountRejected
// counts them, a penalty triggers (or runs) or ForgetIdle records the
// request's time. A State is a value: Step never writes to a Log it was
// given (the State it returns may share it).
type State struct {
	At    int64   `json:"at,omitempty"`
	Count int64   `json:"count,omitempty"`
	Prev  int64   `json:"prev,omitempty"`
	Log   []int64 `json:"log,omitempty"`
	// Block is the end of a block (PenaltyBlock), Unix µs; 0 when none.
	Block int64 `json:"block,omitempty"`
	// Last is the time of the key's latest request, Unix µs, kept only
	// under ForgetIdle; 0 otherwise.
	Last int64 `json:"last,omitempty"`
}

// IsZero reports whether s is the zero State (a key never seen).
func (s State) IsZero() bool {
	return s.At == 0 && s.Count == 0 && s.Prev == 0 && len(s.Log) == 0 && s.Block == 0 && s.Last == 0
}
