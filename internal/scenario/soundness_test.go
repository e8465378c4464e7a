package scenario

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// The soundness harness: honest reference servers, generated from an
// all-pairs covering array over the factors below, run the whole check
// suite and one pattern in a synctest bubble over in-memory connections,
// under injected disorder; no certain finding at warning or above may come
// of it. Servers with a deliberate fault must be caught, certainly, when
// nothing disturbs the run; under disorder the share caught is logged.
//
// Every case is a function of its seed (factor levels in the low bits,
// the fault above them, the random parameters in the high bits), so a
// failure prints a command that replays it alone:
//
//	go test ./internal/scenario -run 'TestSoundness$' -count=1 -v -args -seed=N
//
// RLPROBE_SOAK=1 runs ten times as many cases.

var soundSeed = flag.Uint64("seed", 0, "TestSoundness: replay only the case with this seed")

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
	fDialect:   {"headers", []string{"none", "x-ratelimit", "x-ratelimit-epoch", "draft-6", "draft-7", "draft-8"}},
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
	// of the harness's own, beyond serve's).
	optional bool
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
	{name: "retry-after=early", want: verify.IDRetryAfterEarly, also: []string{verify.IDRateLimitHeaderInconsistent}, fits: func(c *soundCase) bool {
		return rejectsAtOnce(c) && suiteOr(verify.CheckRetryAfter)(c)
	}},
	{name: "retry-after=late", want: verify.IDRetryAfterLate, fits: func(c *soundCase) bool {
		return rejectsAtOnce(c) && suiteOr(verify.CheckRetryAfter)(c)
	}},
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
	{name: "non-atomic", want: verify.IDRaceOverAdmission, found: true,
		also: []string{verify.IDWindowLimitExceeded, verify.IDBurstLimitExceeded, verify.IDRateLimitExceeded,
			verify.IDRateLimitHeaderInconsistent, verify.IDKeySpoofable, verify.IDNoLimitingObserved},
		fits: func(c *soundCase) bool {
			ch := c.level(fChecks)
			freshRace := c.level(fPattern) == "race" && (ch == "none" || c.level(fKey) != "global")
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
	{name: "spoofable-key", want: verify.IDKeySpoofable, optional: true,
		also: []string{verify.IDUnderAdmission, verify.IDRateLimitHeaderInconsistent, verify.IDRetryAfterEarly,
			verify.IDWindowLimitExceeded, verify.IDBurstLimitExceeded, verify.IDRateLimitExceeded},
		fits: func(c *soundCase) bool { return c.level(fKey) == "ip" && c.level(fChecks) == verify.CheckKeySpoof }},
}

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
	case "retry-after=early":
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
		// Epoch-aligned only: aligned to its first request, its windows
		// follow one another from that request on, which no policy of the
		// contract describes (fixed first-request windows restart at the
		// first request after each window).
		lc.Limit, lc.Window, lc.Align = c.limit, c.window, limiter.AlignEpoch
	case "token-bucket", "gcra", "leaky-bucket":
		lc.Rate, lc.Capacity = c.rate, c.capacity
	case "leaky-bucket-nodelay":
		lc.Algorithm, lc.Rate, lc.Capacity, lc.NoDelay = limiter.LeakyBucket, c.rate, c.capacity, true
	}
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
		e.Limit, e.Window, e.WindowType, e.Align = c.limit, c.window, verify.Fixed, limiter.AlignEpoch
		allowed = append(allowed, verify.IDUnderAdmission)
	default:
		e.Rate, e.Capacity = c.rate, c.capacity
	}
	return e, allowed
}

// soundOutcome is what one case gave.
type soundOutcome struct {
	c        *soundCase
	findings []verify.Finding
	bad      []verify.Finding // certain, warning or above, neither allowed nor the fault's
	found    bool             // the fault's finding is certain (fault cases)
	err      error
}

// replay is the command that runs case seed alone.
func replay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/scenario -run 'TestSoundness$' -count=1 -v -args -seed=%d", seed)
}

// TestSoundness runs the harness; see the comment at the top of the file.
func TestSoundness(t *testing.T) {
	if *soundSeed != 0 {
		c, err := decodeCase(*soundSeed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %d: %s", c.seed, c)
		o := runSoundCase(t, c)
		for _, f := range o.findings {
			t.Logf("  %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
		}
		judgeSound(t, o)
		return
	}
	rounds, perFault := soundRounds(soundCases), 8
	if os.Getenv("RLPROBE_SOAK") == "1" {
		rounds, perFault = soundRounds(10*soundCases), 80
	}
	cases := soundCaseList(rounds, perFault)
	outcomes := make([]soundOutcome, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%04d", i), func(t *testing.T) {
				t.Parallel()
				outcomes[i] = runSoundCase(t, c)
				judgeSound(t, outcomes[i])
			})
		}
	})
	logSoundShares(t, outcomes)
}

// soundRounds returns how many covering arrays make at least n cases.
func soundRounds(n int) int {
	per := len(allPairs(factorSizes(), rand.New(rand.NewPCG(1, 0))))
	return (n + per - 1) / per
}

func factorSizes() []int {
	s := make([]int, nFactors)
	for f := range nFactors {
		s[f] = len(soundFactors[f].levels)
	}
	return s
}

// soundCaseList builds the cases: rounds covering arrays of honest cases,
// and for each fault the first perFault fitting rows of the arrays at zero
// disorder, and perFault with disorder.
func soundCaseList(rounds, perFault int) []*soundCase {
	var cases []*soundCase
	var first [][nFactors]int // every row, in order
	for r := range rounds {
		rng := rand.New(rand.NewPCG(uint64(r)+1, 0xa11))
		for _, row := range allPairs(factorSizes(), rng) {
			var lv [nFactors]int
			copy(lv[:], row)
			c, _ := decodeCase(encodeSeed(lv, 0, rng.Uint64()>>(seedLevelBits+seedFaultBits)))
			cases = append(cases, c)
			first = append(first, lv)
		}
	}
	rng := rand.New(rand.NewPCG(0xfa, 0x17))
	for k, f := range soundFaults {
		calm, rough := 0, 0
		for _, lv := range first {
			c, _ := decodeCase(encodeSeed(lv, k+1, rng.Uint64()>>(seedLevelBits+seedFaultBits)))
			if !f.fits(c) {
				continue
			}
			switch {
			case c.level(fDisorder) == "none" && calm < perFault:
				calm++
			case c.level(fDisorder) != "none" && rough < perFault:
				rough++
			case calm < perFault:
				lv[fDisorder] = 0
				c, _ = decodeCase(encodeSeed(lv, k+1, c.seed>>(seedLevelBits+seedFaultBits)))
				calm++
			default:
				continue
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// judgeSound fails the test for a false positive on an honest server, or a
// fault missed at zero disorder.
func judgeSound(t *testing.T, o soundOutcome) {
	t.Helper()
	c := o.c
	switch {
	case o.err != nil:
		t.Errorf("case %s\n  seed=%d: %v\n  replay: %s", c, c.seed, o.err, replay(c.seed))
	case len(o.bad) > 0:
		var lines []string
		for _, f := range o.bad {
			lines = append(lines, fmt.Sprintf("    %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message))
		}
		what := "honest server, certain finding"
		if c.fault > 0 {
			what = "server with fault " + c.faultName() + ", a certain finding the fault does not explain"
		}
		t.Errorf("%s:\n  case %s\n  seed=%d\n%s\n  replay: %s", what, c, c.seed, strings.Join(lines, "\n"), replay(c.seed))
	}
	if c.fault > 0 && !o.found && c.level(fDisorder) == "none" && !c.faultInfo().optional {
		var ids []string
		for _, f := range o.findings {
			ids = append(ids, fmt.Sprintf("%s/%s", f.ID, f.Certainty))
		}
		t.Errorf("fault %s not found certain (want %s; found %v):\n  case %s\n  seed=%d\n  replay: %s",
			c.faultName(), soundFaults[c.fault-1].want, ids, c, c.seed, replay(c.seed))
	}
}

// logSoundShares logs the totals: cases, false positives, and per fault
// the share found at zero disorder and under disorder.
func logSoundShares(t *testing.T, outs []soundOutcome) {
	honest, fp := 0, 0
	type share struct{ calm, calmFound, rough, roughFound int }
	per := make([]share, len(soundFaults))
	byID := map[string]int{}
	for _, o := range outs {
		if o.c == nil {
			continue
		}
		if o.c.fault == 0 {
			honest++
			if len(o.bad) > 0 || o.err != nil {
				fp++
			}
		}
		for _, f := range o.bad {
			byID[f.ID]++
		}
		if o.c.fault == 0 {
			continue
		}
		s := &per[o.c.fault-1]
		if o.c.level(fDisorder) == "none" {
			s.calm++
			if o.found {
				s.calmFound++
			}
		} else {
			s.rough++
			if o.found {
				s.roughFound++
			}
		}
	}
	t.Logf("soundness: %d cases, %d honest; %d honest cases with a certain finding at warning or above; such findings (faulty servers' included) by id: %v", len(outs), honest, fp, byID)
	for k, s := range per {
		t.Logf("  fault %-22s found %d/%d at zero disorder, %d/%d under disorder", soundFaults[k].name, s.calmFound, s.calm, s.roughFound, s.rough)
	}
}

// runSoundCase runs case c in a synctest bubble.
func runSoundCase(t *testing.T, c *soundCase) (out soundOutcome) {
	out.c = c
	synctest.Test(t, func(t *testing.T) {
		res, err := soundRun(t.Context(), c)
		// Let delayed writes on closed connections run out.
		time.Sleep(2 * (c.lateMax + c.jitterMax + linkDelay))
		if err != nil {
			out.err = err
			return
		}
		e, allowed := c.policy()
		pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{e}}
		if err := pol.Validate(); err != nil {
			out.err = fmt.Errorf("policy: %w", err)
			return
		}
		rep := verify.Analyze(record.Merge(res), pol.Normalize(), verify.Options{})
		out.findings = rep.Findings
		for _, f := range rep.Findings {
			if f.Certainty != verify.Certain {
				continue
			}
			if fl := c.faultInfo(); fl != nil && (f.ID == fl.want || fl.found && slices.Contains(fl.also, f.ID)) {
				out.found = true
			}
			if fl := c.faultInfo(); fl != nil && (f.ID == fl.want || slices.Contains(fl.also, f.ID)) {
				continue
			}
			if f.Severity.AtLeast(verify.SeverityWarning) && !slices.Contains(allowed, f.ID) {
				out.bad = append(out.bad, f)
			}
		}
	})
	return out
}

// soundRun serves c's server and probes it: the check suite, then the
// case's pattern on an identity of its own. It returns the record.
func soundRun(ctx context.Context, c *soundCase) (*record.Run, error) {
	rng := &lockedRand{r: rand.New(rand.NewPCG(c.seed, 0xd15))}
	pol, mem := c.server()
	hopt := testserver.HandlerOptions{EchoArrival: c.level(fEcho) == "on"}
	if c.disorder("reorder") {
		hopt.DecisionDelay = func(*http.Request) time.Duration { return rng.dur(c.reorderMax) }
	}
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Policy: pol}}, Handler: hopt,
		Memory: mem, H2C: c.level(fTransport) == "h2c"})
	if err != nil {
		return nil, err
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(&linkListener{Listener: ml, c: c, rng: rng}); err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.Background())

	// Start somewhere in a second of 2026: the bubble's clock starts in
	// 2000, before the Unix times X-RateLimit-Reset readers recognise as
	// epoch seconds (from 2001-09-09).
	time.Sleep(time.Until(soundEpoch) + c.phase)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // fake time
	defer cancel()
	zero := time.Now()
	base := probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: ml.Dial, TimerPacing: true,
		H2C: c.level(fTransport) == "h2c", AbortAfterErrors: -1}
	e, _ := c.policy()
	identities := 1
	switch c.level(fKey) {
	case "ip":
		base.SourceIPs = sourceIPs
		identities = len(sourceIPs)
	case "header":
		base.ClientHeader = keyHeader
		identities = 0
	}
	var seq atomic.Int64
	var engines []*probe.Engine
	defer func() {
		for _, p := range engines {
			p.Close()
		}
	}()
	newEngine := func(o probe.Options) (*soundEngine, error) {
		p, err := probe.New(o)
		if err != nil {
			return nil, err
		}
		engines = append(engines, p)
		return &soundEngine{p: p, zero: zero, seq: &seq}, nil
	}
	eng, err := newEngine(base)
	if err != nil {
		return nil, err
	}
	s := verify.Suite{Rule: e, Engine: eng, Zero: zero,
		Options: verify.SuiteOptions{Identities: identities, Spoofing: e.Key == verify.KeyIP}}
	if e.Key == verify.KeyIP {
		s.Spoof = func(header string) (verify.Engine, error) {
			o := base
			o.ClientHeader, o.ClientValues, o.SourceIPs = header, spoofValues, sourceIPs[:1]
			return newEngine(o)
		}
	}
	var results []record.Result
	if ch := c.level(fChecks); ch != "none" {
		if ch != "all" {
			s.Options.Only = []string{ch}
		}
		sr, err := s.Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("suite: %w", err)
		}
		results = sr.Results
	}
	ps, err := c.pattern(e, time.Now())
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	// The pattern on an identity nothing else used (the last one).
	client := 0
	switch c.level(fKey) {
	case "ip":
		client = len(sourceIPs) - 1
	case "header":
		client = 1000
	}
	for i := range ps.Sends {
		ps.Sends[i].Client = client
	}
	pres, err := eng.Run(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("pattern %s: %w", c.level(fPattern), err)
	}
	results = append(results, pres...)
	var sent int64
	for _, r := range results {
		if r.Outcome != record.OutcomeNotSent {
			sent++
		}
	}
	return &record.Run{Header: record.Header{Start: zero, Agent: "a1", Targets: base.URLs},
		Results: results, End: &record.End{Reason: record.ReasonCompleted, Scheduled: int64(len(results)), Sent: sent}}, nil
}

// pattern returns the case's pattern for rule e, to start at now.
func (c *soundCase) pattern(e verify.Endpoint, now time.Time) (patterns.Schedule, error) {
	q := int(e.Quota())
	period := e.Period()
	switch c.level(fPattern) {
	case "burst":
		return patterns.Burst(2*q+2, period/4)
	case "steady":
		return patterns.Steady(2*float64(q)/period.Seconds(), 2*period)
	case "edge":
		// q on each side of the next whole-period edge of the clock.
		next := now.Truncate(period).Add(period)
		if next.Sub(now) < 200*time.Millisecond {
			next = next.Add(period)
		}
		s, err := patterns.Edge(q, 100*time.Millisecond, 100*time.Millisecond)
		s.Start = next.Add(-100 * time.Millisecond)
		return s, err
	case "recovery":
		b, err := patterns.Burst(q+2, 0)
		if err != nil {
			return b, err
		}
		r, err := patterns.Recovery(max(period/10, 10*time.Millisecond), 2*period)
		if err != nil {
			return r, err
		}
		return patterns.Sequence(b, r)
	case "race":
		return patterns.Race(q+max(2, q/2), 1, patterns.Barrier)
	case "ramp":
		return patterns.Ramp(0, 3*float64(q)/period.Seconds(), 2*period)
	}
	return patterns.Schedule{}, errors.New("unknown pattern")
}

// soundEngine is a verify.Engine over a probe engine: offset 0 of an
// unanchored schedule is a little after now; Seqs are unique across the
// case's engines.
type soundEngine struct {
	p    *probe.Engine
	zero time.Time
	seq  *atomic.Int64
}

func (e *soundEngine) Run(ctx context.Context, s patterns.Schedule) ([]record.Result, error) {
	begin := time.Now().Add(20 * time.Millisecond)
	if !s.Start.IsZero() {
		if s.Start.Before(time.Now()) {
			return nil, fmt.Errorf("schedule due %v ago", time.Since(s.Start))
		}
		begin = s.Start
	}
	sends := make([]probe.Send, len(s.Sends))
	for i, x := range s.Sends {
		sends[i] = probe.Send{At: x.At, Client: x.Client, Phase: x.Phase, Batch: x.Batch}
	}
	res, err := e.p.Run(ctx, e.zero, begin, sends, nil)
	for i := range res {
		res[i].Seq = e.seq.Add(1) - 1
	}
	return res, err
}

// lockedRand is a rand shared by the server's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// dur returns a duration in [0, d].
func (l *lockedRand) dur(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.r.Int64N(int64(d) + 1))
}

func (l *lockedRand) chance(p float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

// soundEpoch is when cases start (plus their phase).
var soundEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// linkDelay is the base one-way delay of the in-memory link: answers
// arrive a little after decisions, as on any network, so a decision's
// bounds [last byte written, first byte read] are never a single instant.
const linkDelay = time.Millisecond

// linkListener wraps the server's side of every connection in a link that
// delays the bytes each way (see linkConn).
type linkListener struct {
	net.Listener
	c   *soundCase
	rng *lockedRand
}

func (l *linkListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newLinkConn(conn, l.c, l.rng), nil
}

// chunk is bytes in flight, delivered at at.
type chunk struct {
	b  []byte
	at time.Time
}

// linkConn is the server's end of a link that delays what the server
// reads (the request in flight: the client has written it, the server has
// not yet received it) and what it writes (the answer in flight), in
// order: linkDelay, plus jitter up to jitterMax under disorder "jitter",
// plus, one answer in ten, up to lateMax under disorder "late".
//
// Both directions are buffered by pumps, so neither side's writes wait for
// the delays: a writer blocked on a net.Pipe while holding a lock (as the
// HTTP/2 client does) would stop a synctest bubble's clock, since waiting
// for a mutex is not durable blocking.
type linkConn struct {
	net.Conn
	c   *soundCase
	rng *lockedRand

	in   chan chunk // from the reader pump
	rerr error      // the pipe's read error, set before in is closed
	buf  []byte     // the rest of the chunk being read

	mu        sync.Mutex
	deadline  time.Time
	dlChanged chan struct{} // closed and replaced when the deadline changes
	out       chan chunk    // to the writer pump; nil once closed
	lastOut   time.Time
	closed    chan struct{}
}

func newLinkConn(conn net.Conn, c *soundCase, rng *lockedRand) *linkConn {
	l := &linkConn{Conn: conn, c: c, rng: rng, in: make(chan chunk, 1024), out: make(chan chunk, 1024),
		dlChanged: make(chan struct{}), closed: make(chan struct{})}
	go l.readPump()
	go l.writePump(l.out)
	return l
}

func (l *linkConn) delay(answer bool) time.Duration {
	d := linkDelay
	if l.c.disorder("jitter") {
		d += l.rng.dur(l.c.jitterMax)
	}
	if answer && l.c.disorder("late") && l.rng.chance(0.1) {
		d += l.rng.dur(l.c.lateMax)
	}
	return d
}

// readPump reads the pipe as fast as the client writes and queues the
// bytes with their delivery time.
func (l *linkConn) readPump() {
	var last time.Time
	for {
		b := make([]byte, 32<<10)
		n, err := l.Conn.Read(b)
		if n > 0 {
			at := time.Now().Add(l.delay(false))
			if at.Before(last) {
				at = last
			}
			last = at
			l.in <- chunk{b[:n], at}
		}
		if err != nil {
			l.rerr = err
			close(l.in)
			return
		}
	}
}

// writePump writes the queued answers into the pipe at their delivery
// time, then closes the pipe once the connection is closed.
func (l *linkConn) writePump(out chan chunk) {
	failed := false
	for ch := range out {
		if d := time.Until(ch.at); d > 0 {
			time.Sleep(d)
		}
		if !failed {
			if _, err := l.Conn.Write(ch.b); err != nil {
				failed = true
			}
		}
	}
	l.Conn.Close()
}

func (l *linkConn) Read(p []byte) (int, error) {
	for len(l.buf) == 0 {
		l.mu.Lock()
		dl, changed := l.deadline, l.dlChanged
		l.mu.Unlock()
		var expire <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expire = t.C
		}
		select {
		case ch, ok := <-l.in:
			if !ok {
				return 0, l.rerr
			}
			if d := time.Until(ch.at); d > 0 {
				time.Sleep(d)
			}
			l.buf = ch.b
		case <-expire:
			return 0, os.ErrDeadlineExceeded
		case <-changed:
		case <-l.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *linkConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == nil {
		return 0, net.ErrClosed
	}
	at := time.Now().Add(l.delay(true))
	if at.Before(l.lastOut) {
		at = l.lastOut
	}
	l.lastOut = at
	select {
	case l.out <- chunk{slices.Clone(p), at}:
		return len(p), nil
	case <-l.closed:
		return 0, net.ErrClosed
	}
}

// Close stops reads and writes; answers already written are still
// delivered before the pipe closes.
func (l *linkConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == nil {
		return net.ErrClosed
	}
	close(l.out)
	l.out = nil
	close(l.closed)
	return nil
}

func (l *linkConn) SetDeadline(t time.Time) error { return l.SetReadDeadline(t) }

func (l *linkConn) SetReadDeadline(t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = t
	close(l.dlChanged)
	l.dlChanged = make(chan struct{})
	return nil
}

// SetWriteDeadline does nothing: writes never block.
func (l *linkConn) SetWriteDeadline(time.Time) error { return nil }
