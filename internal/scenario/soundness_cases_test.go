package scenario

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// The soundness harness's cases: factors, faults, seeds, and each case's
// server and policy (soundness_test.go runs them).

// soundCases is how many honest cases a run has at least (×10 in soak).
const soundCases = 300

// soundFactor is one dimension of the covering array.
type soundFactor struct {
	name   string
	levels []string
}

// Factor indexes.
const (
	fAlg = iota
	fAlign
	fDialect
	fStatus
	fRAFormat
	fKey
	fTransport
	fEcho
	fDisorder
	fPattern
	fChecks
	nFactors
)

var soundFactors = [nFactors]soundFactor{
	fAlg:       {"algorithm", []string{"fixed-window", "sliding-log", "sliding-window-counter", "token-bucket", "gcra", "leaky-bucket", "leaky-bucket-nodelay"}},
	fAlign:     {"align", []string{"epoch", "first-request"}},
	fDialect:   {"headers", []string{"none", "x-ratelimit", "x-ratelimit-epoch", "draft-6", "draft-7", "draft-8", "draft-11", "draft-12"}},
	fStatus:    {"status", []string{"429", "503"}},
	fRAFormat:  {"retry-after-format", []string{"seconds", "http-date"}},
	fKey:       {"key", []string{"global", "ip", "header"}},
	fTransport: {"transport", []string{"http1", "h2c"}},
	fEcho:      {"echo", []string{"on", "off"}},
	fDisorder:  {"disorder", []string{"none", "reorder", "jitter", "late", "all"}},
	fPattern:   {"pattern", []string{"burst", "steady", "edge", "recovery", "race", "ramp"}},
	// The suite's checks: all, one alone (--only), or none (the pattern
	// alone, as run + analyze).
	fChecks: {"checks", append([]string{"all", "none"}, verify.Checks...)},
}

// soundFault is a deliberate defect and the finding that must catch it.
type soundFault struct {
	name string
	want string
	// also are further findings the fault makes true; with found, any of
	// them counts as catching it.
	also  []string
	found bool
	// optional: a miss at zero disorder is reported, not failed (a fault
	// of the harness's own, beyond serve's); optionalIf makes it so for
	// the cases it reports true for.
	optional   bool
	optionalIf func(c *soundCase) bool
	// fits reports whether the fault can show in a case (a header fault
	// needs headers).
	fits func(c *soundCase) bool
}

var soundFaults = []soundFault{
	{name: "malformed-ratelimit", want: verify.IDRateLimitHeaderMalformed, fits: withHeaders},
	{name: "malformed-retry-after", want: verify.IDRetryAfterMalformed, fits: suiteOr(verify.CheckRetryAfter)},
	{name: "remaining-stuck", want: verify.IDRateLimitHeaderInconsistent, fits: func(c *soundCase) bool { return withHeaders(c) && rejectsAtOnce(c) }},
	{name: "policy-lie", want: verify.IDRateLimitPolicyMismatch, fits: withHeaders},
	{name: "cacheable-reject", want: verify.IDCacheable429, fits: rejects},
	// Race probes are not judged for Retry-After: the run needs other
	// rejections.
	{name: "retry-after=missing", want: verify.IDRetryAfterMissing, fits: func(c *soundCase) bool { return rejects(c) && c.level(fPattern) != "race" }},
	// Under draft-11/-12 an early Retry-After also ends before the
	// effective window.
	{name: "retry-after=early", want: verify.IDRetryAfterEarly, also: []string{verify.IDRateLimitHeaderInconsistent, verify.IDRetryAfterBeforeWindow}, fits: func(c *soundCase) bool {
		return rejectsAtOnce(c) && suiteOr(verify.CheckRetryAfter)(c)
	}},
	// An HTTP date is read against Date's whole second: 1 s shorter for
	// lateness, which a wait late by a window (4 s) does not always
	// exceed beyond the margin (half the advertised delay).
	{name: "retry-after=late", want: verify.IDRetryAfterLate, fits: func(c *soundCase) bool {
		return rejectsAtOnce(c) && suiteOr(verify.CheckRetryAfter)(c)
	}, optionalIf: func(c *soundCase) bool { return c.level(fRAFormat) == "http-date" }},
	// Lost updates over-admit (a race, or requests closer than the gap),
	// and their remaining values repeat. Only a rejection (the suite's
	// burst) or remaining values prove that the racers met a limit.
	// Lost updates also let the key-spoof check's requests through,
	// whatever address they claim.
	// A race after other checks on a global key meets a spent quota and
	// over-admits nothing; on a fresh identity without headers nothing
	// proves that identity limited (others' rejections do not); lost
	// updates may also admit all of a group's requests
	// (no-limiting-observed).
	// A race is certain only when paced requests each on a new
	// connection were refused within the quota (one limiter per
	// connection route): the suite's burst and race checks send them, on
	// connections of their own (Send.Conn).
	{name: "non-atomic", want: verify.IDRaceOverAdmission, found: true,
		also: []string{verify.IDWindowLimitExceeded, verify.IDBurstLimitExceeded, verify.IDRateLimitExceeded,
			verify.IDRateLimitHeaderInconsistent, verify.IDKeySpoofable, verify.IDNoLimitingObserved},
		fits: func(c *soundCase) bool {
			ch := c.level(fChecks)
			freshRace := c.level(fPattern) == "race" && ch == verify.CheckBurst && c.level(fKey) != "global"
			if !rejectsAtOnce(c) {
				return false
			}
			if !withHeaders(c) {
				return ch == "all" && c.level(fKey) == "global"
			}
			return ch == "all" || ch == verify.CheckRace || freshRace
		}},
	// Keyed on a header any client can set, under a per-IP policy: every
	// request without it shares one quota, which a per-IP policy does not
	// grant (so under-admission, and remaining values below the per-IP
	// model's, are true too). The key-spoof check runs alone: after the
	// whole suite, the shared quota is spent by other addresses, so the
	// probing address's own quota is never shown exhausted, and fresh
	// quota for a spoofed address proves nothing.
	// The spoofed requests also take the probing address past its quota
	// (the count findings). Whether the address's own quota was shown
	// spent depends on windows and queues: misses are reported only.
	// Every address without the header is one key: the paced series'
	// clients (the check's control for one limiter per connection) share
	// it, which is key-collapsed as well.
	{name: "spoofable-key", want: verify.IDKeySpoofable, optional: true,
		also: []string{verify.IDKeyCollapsed, verify.IDUnderAdmission, verify.IDRateLimitHeaderInconsistent, verify.IDRetryAfterEarly,
			verify.IDWindowLimitExceeded, verify.IDBurstLimitExceeded, verify.IDRateLimitExceeded},
		fits: func(c *soundCase) bool { return c.level(fKey) == "ip" && c.level(fChecks) == verify.CheckKeySpoof }},
}

// The header audits of issue 24 (the faults of servers in the wild).
var _ = func() int {
	soundFaults = append(soundFaults,
		// Implausible needs an acceptance after the rejection: the
		// suite's recovery (or retry-after) polls until one. A Retry-After
		// in ms is also late, which implausible absorbs.
		// A wait of milliseconds in ms ("10") only reads as late.
		soundFault{name: "retry-after-ms", want: verify.IDRetryAfterImplausible, also: []string{verify.IDRetryAfterLate}, found: true,
			fits: func(c *soundCase) bool {
				ch := c.level(fChecks)
				return rejectsAtOnce(c) && (ch == "all" || ch == verify.CheckRecovery || ch == verify.CheckRetryAfter)
			}},
		soundFault{name: "retry-after-zero", want: verify.IDRetryAfterEarly,
			also: []string{verify.IDRateLimitHeaderInconsistent, verify.IDRetryAfterBeforeWindow},
			fits: func(c *soundCase) bool { return rejectsAtOnce(c) && suiteOr(verify.CheckRetryAfter)(c) }},
		soundFault{name: "retry-after-on-success", want: verify.IDRetryAfterOnSuccess, fits: func(*soundCase) bool { return true }},
		soundFault{name: "remaining-off-by-one", want: verify.IDRateLimitHeaderInconsistent, optional: true,
			fits: func(c *soundCase) bool { return withHeaders(c) && rejectsAtOnce(c) }},
	)
	return 0
}()

// rejects: the case's traffic surely meets rejections: a suite step that
// exceeds the quota, or a pattern other than the edge (quota on each side).
func rejects(c *soundCase) bool {
	switch ch := c.level(fChecks); {
	case c.level(fPattern) != "edge", ch == "all":
		return true
	case ch == verify.CheckEdge:
		return !c.isBucket() // a bucket has no edge: the step is skipped
	case ch == verify.CheckKeySpoof:
		return c.level(fKey) == "ip"
	case ch == "none":
		return false
	}
	return true
}

// suiteOr: the checks run include check (the suite entire or check
// alone), or one that needs a rejection.
func suiteOr(check string) func(c *soundCase) bool {
	return func(c *soundCase) bool { return c.level(fChecks) == "all" || c.level(fChecks) == check }
}
func withHeaders(c *soundCase) bool { return c.level(fDialect) != "none" }

// rejectsAtOnce: not the delaying leaky bucket, which queues excess
// requests (answering them late) before it rejects any, so that its
// remaining and Retry-After values describe the queue rather than a quota
// a retry can measure; its faults are caught on the other algorithms.
func rejectsAtOnce(c *soundCase) bool { return c.level(fAlg) != "leaky-bucket" }

// Seed layout: bits 0–20 the factor levels (mixed radix, factor 0 least
// significant), bits 21–24 the fault (0 = honest, k = soundFaults[k-1]),
// bits 25–63 the case's random parameters.
// The product of the factors' sizes must fit in seedLevelBits (a test
// checks it).
const (
	seedLevelBits = 21
	seedFaultBits = 4
)

// soundCase is one generated case.
type soundCase struct {
	seed   uint64
	levels [nFactors]int
	fault  int // 0 honest, else 1 + index into soundFaults

	// Drawn from the seed.
	limit      int64
	window     time.Duration
	rate       float64
	capacity   int64
	phase      time.Duration // start offset past an epoch second
	reorderMax time.Duration // decision delays up to this
	jitterMax  time.Duration // link delays up to this beyond the base
	lateMax    time.Duration // a late answer is delayed up to this

	// penalty is the server's penalty, declared in the policy too
	// (soundness_penalty_test.go); zero for the other cases.
	penalty limiter.Penalty
	// deploy runs the server as several instances
	// (soundness_deploy_test.go); zero for the other cases.
	deploy testserver.Deployment
}

func (c *soundCase) level(f int) string { return soundFactors[f].levels[c.levels[f]] }

func (c *soundCase) faultInfo() *soundFault {
	if c.fault == 0 {
		return nil
	}
	return &soundFaults[c.fault-1]
}

func (c *soundCase) faultName() string {
	if c.fault == 0 {
		return ""
	}
	return soundFaults[c.fault-1].name
}

// encodeSeed packs levels, fault and the random part into a seed.
func encodeSeed(levels [nFactors]int, fault int, rnd uint64) uint64 {
	code := uint64(0)
	for f := nFactors - 1; f >= 0; f-- {
		code = code*uint64(len(soundFactors[f].levels)) + uint64(levels[f])
	}
	return rnd<<(seedLevelBits+seedFaultBits) | uint64(fault)<<seedLevelBits | code
}

// decodeCase rebuilds the case of a seed.
func decodeCase(seed uint64) (*soundCase, error) {
	c := &soundCase{seed: seed}
	code := seed & (1<<seedLevelBits - 1)
	for f := range nFactors {
		n := uint64(len(soundFactors[f].levels))
		c.levels[f] = int(code % n)
		code /= n
	}
	if code != 0 {
		return nil, fmt.Errorf("seed %d: factor code out of range", seed)
	}
	if seed&(1<<seedLevelBits-1) != encodeSeed(c.levels, 0, 0) {
		return nil, fmt.Errorf("seed %d: factor code out of range", seed)
	}
	c.fault = int(seed >> seedLevelBits & (1<<seedFaultBits - 1))
	if c.fault > len(soundFaults) {
		return nil, fmt.Errorf("seed %d: fault %d out of range", seed, c.fault)
	}
	rng := rand.New(rand.NewPCG(seed>>(seedLevelBits+seedFaultBits), 0x5eed))
	c.limit = 2 + rng.Int64N(5)                             // 2…6
	c.window = time.Duration(1+rng.IntN(3)) * time.Second   // 1…3 s
	c.rate = []float64{1, 2, 4, 5, 10}[rng.IntN(5)]         // per second
	c.capacity = 1 + rng.Int64N(5)                          // 1…5
	c.phase = time.Duration(rng.Int64N(int64(time.Second))) // any phase
	c.reorderMax = []time.Duration{5, 20, 50}[rng.IntN(3)] * time.Millisecond
	c.jitterMax = []time.Duration{2, 10, 30}[rng.IntN(3)] * time.Millisecond
	c.lateMax = time.Duration(200+rng.IntN(1300)) * time.Millisecond
	switch c.faultName() {
	case "retry-after=late":
		// Late by a window is visible only when the window is long enough
		// to accept a request 2 s before the advertised moment.
		c.window = 3 * time.Second
		c.capacity, c.rate = 4*c.capacity, 1
	case "retry-after=early", "retry-after-zero":
		// Half the wait, truncated, is visibly early only for waits of a
		// few seconds: an HTTP date rounds a wait under a second up to the
		// next whole second, which a 1 s epoch window ends at anyway (a
		// bucket's wait is one refill: 4 s at 0.25/s).
		c.window = 3 * time.Second
		c.capacity, c.rate = max(c.capacity, 3), 0.25
	case "remaining-stuck", "non-atomic":
		// A remaining stuck at quota − 1 is within the verifier's ±1 of
		// the truth for a quota of 2; a race needs room to over-admit.
		c.limit = max(c.limit, 3)
		c.capacity = max(c.capacity, 3)
		if c.faultName() == "non-atomic" {
			// The suite's paced series must fit half a period with
			// their requests further apart than the race gap (20 ms)
			// and its round trip, or the lost updates reach them too
			// and nothing shows one limiter per connection: a bucket of
			// 3 at 10/s refills in 0.3 s.
			c.rate = min(c.rate, 4)
		}
	}
	return c, nil
}

func (c *soundCase) String() string {
	var b strings.Builder
	for f := range nFactors {
		if f > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", soundFactors[f].name, c.level(f))
	}
	if c.fault > 0 {
		fmt.Fprintf(&b, " fault=%s", c.faultName())
	}
	if !c.penalty.IsZero() {
		fmt.Fprintf(&b, " penalty=%s", c.penalty)
	}
	if d := c.deploy; d.Instances > 0 {
		fmt.Fprintf(&b, " instances=%d store=%s balance=%s", d.Instances, cmpStr(string(d.Store), "local"), cmpStr(string(d.Balance), "connection"))
	}
	if c.isBucket() {
		fmt.Fprintf(&b, " rate=%g/s capacity=%d", c.rate, c.capacity)
	} else {
		fmt.Fprintf(&b, " limit=%d window=%v", c.limit, c.window)
	}
	return b.String()
}

func (c *soundCase) isBucket() bool {
	switch c.level(fAlg) {
	case "token-bucket", "gcra", "leaky-bucket", "leaky-bucket-nodelay":
		return true
	}
	return false
}

func (c *soundCase) disorder(kind string) bool {
	d := c.level(fDisorder)
	return d == kind || d == "all"
}

// keyHeader is the request header of the header key.
const keyHeader = "X-Api-Key"

// sourceIPs are the client addresses of the ip key.
var sourceIPs = func() []netip.Addr {
	out := make([]netip.Addr, 64)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)})
	}
	return out
}()

// spoofValues are the addresses the key-spoof check claims.
var spoofValues = func() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)}).String()
	}
	return out
}()

// server returns the reference server's route and backend settings for c.
func (c *soundCase) server() (testserver.Policy, testserver.MemoryConfig) {
	lc := limiter.Config{Algorithm: limiter.Algorithm(c.level(fAlg))}
	switch c.level(fAlg) {
	case "fixed-window":
		lc.Limit, lc.Window, lc.Align = c.limit, c.window, limiter.Align(c.level(fAlign))
	case "sliding-log":
		lc.Limit, lc.Window = c.limit, c.window
	case "sliding-window-counter":
		lc.Limit, lc.Window, lc.Align = c.limit, c.window, c.counterAlign()
	case "token-bucket", "gcra", "leaky-bucket":
		lc.Rate, lc.Capacity = c.rate, c.capacity
	case "leaky-bucket-nodelay":
		lc.Algorithm, lc.Rate, lc.Capacity, lc.NoDelay = limiter.LeakyBucket, c.rate, c.capacity, true
	}
	lc.Penalty = c.penalty
	p := testserver.Policy{Limiter: lc, Dialects: []headers.Dialect{headers.Dialect(c.level(fDialect))},
		RetryAfterFormat: headers.RetryAfterFormat(c.level(fRAFormat))}
	p.Status = 429
	if c.level(fStatus) == "503" {
		p.Status = 503
	}
	switch c.level(fKey) {
	case "ip":
		p.Key = testserver.KeyIP
	case "header":
		p.Key = testserver.KeyHeaderPrefix + keyHeader
	}
	var mem testserver.MemoryConfig
	switch f := c.faultName(); f {
	case "":
	case "non-atomic":
		mem = testserver.MemoryConfig{NonAtomic: true, RaceGap: 20 * time.Millisecond}
	case "spoofable-key":
		p.Key = testserver.KeyHeaderPrefix + "X-Forwarded-For"
	default:
		if mode, ok := strings.CutPrefix(f, "retry-after="); ok {
			p.RetryAfter = testserver.RetryAfterMode(mode)
		} else {
			p.Faults = []testserver.Fault{testserver.Fault(f)}
		}
	}
	return p, mem
}

// counterAlign returns the alignment of c's sliding-window counter:
// epoch, except under PenaltyExtend, which anchors every window at a
// request. Aligned to its first request without extend, a counter's
// windows follow one another from that request on, which no policy of the
// contract describes (fixed first-request windows restart at the first
// request after each window); under extend a window ends only after W
// with no request, and the counter, weighing the window before, admits
// no more than the fixed window of the same anchors.
func (c *soundCase) counterAlign() limiter.Align {
	if c.penalty.Kind == limiter.PenaltyExtend {
		return limiter.AlignFirstRequest
	}
	return limiter.AlignEpoch
}

// policy returns the policy c's algorithm provably keeps, and the findings
// that are true of an honest server of that algorithm.
func (c *soundCase) policy() (verify.Endpoint, []string) {
	e := verify.Endpoint{Status: 429}
	if c.level(fStatus) == "503" {
		e.Status = 503
	}
	switch c.level(fKey) {
	case "ip":
		e.Key = verify.KeyIP
	case "header":
		e.Key = "header:" + keyHeader
	}
	if d := c.level(fDialect); d != "none" {
		e.Headers = []string{d}
	}
	var allowed []string
	switch c.level(fAlg) {
	case "fixed-window":
		e.Limit, e.Window, e.WindowType, e.Align = c.limit, c.window, verify.Fixed, limiter.Align(c.level(fAlign))
	case "sliding-log":
		e.Limit, e.Window = c.limit, c.window
	case "sliding-window-counter":
		// It keeps N per epoch window, and honestly rejects early after a
		// busy previous window: under-admission is true of it.
		e.Limit, e.Window, e.WindowType, e.Align = c.limit, c.window, verify.Fixed, c.counterAlign()
		allowed = append(allowed, verify.IDUnderAdmission)
	default:
		e.Rate, e.Capacity = c.rate, c.capacity
	}
	e.Penalty = c.penalty
	return e, allowed
}

// cmpStr returns s, or def when s is empty.
func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
