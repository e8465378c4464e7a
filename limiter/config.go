package limiter

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/problem"
)

// Bounds Validate enforces. They keep every product Step forms within
// int64 and, for realistic times, below 2^53, so that a Lua port working in
// doubles stays exact.
const (
	// MaxCount bounds Limit and Capacity.
	MaxCount = 1_000_000_000
	// MaxRate bounds Rate, in requests per second (a refill interval of 1 µs).
	MaxRate = 1e6
	// MaxBucketSpan bounds Capacity/Rate: the time an empty bucket takes to
	// fill.
	MaxBucketSpan = 1e9 * time.Second
)

// windowed reports whether a counts requests per window (Limit, Window)
// rather than in a bucket (Rate, Capacity).
func (a Algorithm) windowed() bool {
	return a == FixedWindow || a == SlidingLog || a == SlidingWindowCounter
}

// nginx reports whether a uses nginx limit_req arithmetic.
func (a Algorithm) nginx() bool { return a == GCRA || a == LeakyBucket }

func (a Algorithm) known() bool { return a.windowed() || a == TokenBucket || a.nginx() }

// Validate reports whether c describes a limiter. It returns nil or a
// *problem.Error "limiter" holding every problem at once, each Field the
// JSON name of the Config field at fault ("limit", "window", "rate",
// "capacity", "nodelay", "delay", "align", "count_rejected", "penalty",
// "forget_idle", "refill", "phase", "algorithm"), which is also the serve
// flag's name with '-' for '_'. The problems are:
// missing or out-of-range parameters, and parameters that mean nothing for
// the algorithm (Capacity or Rate with a window algorithm, Limit or Window
// with a bucket, NoDelay or Delay with anything but LeakyBucket, Align with
// anything but FixedWindow and SlidingWindowCounter, CountRejected with a
// bucket, Delay ≥ Capacity, NoDelay with Delay) and the behaviours where
// they mean nothing: PenaltyBlock with LeakyBucket, PenaltyExtend and
// PenaltyRestart with a bucket, PenaltyExtend with AlignEpoch or AlignTimer
// (it re-anchors the window at every request), Refill with anything but
// TokenBucket and GCRA, Phase without AlignTimer or RefillInterval (or
// outside [0, period)), a negative ForgetIdle; durations must be whole
// microseconds.
func (c Config) Validate() error {
	var probs []problem.Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, problem.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	a := c.Algorithm
	if !a.known() {
		names := make([]string, len(Algorithms))
		for i, x := range Algorithms {
			names[i] = string(x)
		}
		if a == "" {
			bad("algorithm", "missing; one of %s", strings.Join(names, ", "))
		} else {
			bad("algorithm", "unknown %q; one of %s", string(a), strings.Join(names, ", "))
		}
		return problem.Join("limiter", probs)
	}
	if a.windowed() {
		switch {
		case c.Limit <= 0:
			bad("limit", "must be positive for %s, got %d", a, c.Limit)
		case c.Limit > MaxCount:
			bad("limit", "must be at most %d, got %d", MaxCount, c.Limit)
		}
		switch {
		case c.Window <= 0:
			bad("window", "must be positive for %s, got %v", a, c.Window)
		case c.Window%time.Microsecond != 0:
			bad("window", "must be a whole number of microseconds, got %v", c.Window)
		}
		if c.Rate != 0 {
			bad("rate", "not used by %s (a window algorithm takes limit and window)", a)
		}
		if c.Capacity != 0 {
			bad("capacity", "not used by %s (a window algorithm takes limit and window)", a)
		}
		switch c.Align {
		case "", AlignEpoch, AlignFirstRequest, AlignTimer:
			switch {
			case a == SlidingLog && c.Align != "":
				bad("align", "not used by %s, which has no window edges", a)
			case c.Penalty.Kind == PenaltyExtend && (c.Align == AlignEpoch || c.Align == AlignTimer):
				bad("align", "%s means nothing with penalty extend, which re-anchors the window at every request", c.Align)
			}
		default:
			bad("align", "unknown %q; one of %s, %s, %s", string(c.Align), AlignEpoch, AlignFirstRequest, AlignTimer)
		}
	} else {
		if c.Limit != 0 {
			bad("limit", "not used by %s (a bucket takes rate and capacity)", a)
		}
		if c.Window != 0 {
			bad("window", "not used by %s (a bucket takes rate and capacity)", a)
		}
		rateOK := false
		switch {
		case math.IsNaN(c.Rate) || c.Rate <= 0:
			bad("rate", "must be positive for %s, got %v", a, c.Rate)
		case c.Rate > MaxRate:
			bad("rate", "must be at most %v per second, got %v", float64(MaxRate), c.Rate)
		case a.nginx() && nginxRate(c.Rate) < 1:
			bad("rate", "%v per second is below nginx's resolution of 0.001 per second", c.Rate)
		default:
			rateOK = true
		}
		switch {
		case c.Capacity <= 0:
			bad("capacity", "must be positive for %s, got %d", a, c.Capacity)
		case c.Capacity > MaxCount:
			bad("capacity", "must be at most %d, got %d", MaxCount, c.Capacity)
		case rateOK && float64(c.Capacity)/c.Rate > MaxBucketSpan.Seconds():
			bad("capacity", "%d at %v per second takes longer than %v to refill", c.Capacity, c.Rate, MaxBucketSpan)
		}
		if c.Align != "" {
			bad("align", "not used by %s, which has no windows", a)
		}
		if c.CountRejected {
			bad("count_rejected", "not used by %s: rejected requests never take tokens", a)
		}
	}
	if a != LeakyBucket {
		if c.NoDelay {
			bad("nodelay", "only for %s (%s never delays)", LeakyBucket, a)
		}
		if c.Delay != 0 {
			bad("delay", "only for %s (%s never delays)", LeakyBucket, a)
		}
	} else {
		switch {
		case c.Delay < 0:
			bad("delay", "must not be negative, got %d", c.Delay)
		case c.NoDelay && c.Delay != 0:
			bad("delay", "delay=%d and nodelay are exclusive", c.Delay)
		case c.Capacity > 0 && c.Delay >= c.Capacity:
			bad("delay", "must be below capacity %d (at most burst = %d), got %d", c.Capacity, c.Capacity-1, c.Delay)
		}
	}
	c.validateBehaviours(bad)
	return problem.Join("limiter", probs)
}

// Quota returns the advertised quota: Limit for window algorithms, Capacity
// for buckets (0 for an unknown algorithm).
func (c Config) Quota() int64 {
	switch {
	case c.Algorithm.windowed():
		return c.Limit
	case c.Algorithm.known():
		return c.Capacity
	}
	return 0
}

// AdvertisedWindow returns the window advertised with the quota
// (RateLimit-Policy w): Window for window algorithms; for buckets the time
// an empty bucket takes to fill, in whole seconds rounded up and at least
// 1 s: max(1 s, ceil(Capacity/Rate) s), with GCRA and LeakyBucket using
// nginx's truncated rate (capacity 1 at 1r/m → 63 s). It returns 0 for an
// invalid Config.
func (c Config) AdvertisedWindow() time.Duration {
	if c.Algorithm.windowed() {
		return max(c.Window, 0)
	}
	if !c.Algorithm.known() || c.Capacity <= 0 || !(c.Rate > 0) {
		return 0
	}
	var secs float64
	if c.Algorithm.nginx() {
		rm := nginxRate(c.Rate)
		if rm < 1 {
			return 0
		}
		secs = float64(ceilDiv(min(c.Capacity, MaxCount)*1000, rm))
	} else {
		x := float64(c.Capacity) / c.Rate
		secs = math.Ceil(x - x*1e-12) // 10/(10/3.0) is 3.0000000000000004
	}
	secs = min(max(secs, 1), MaxBucketSpan.Seconds())
	return time.Duration(secs) * time.Second
}

// nginxRate returns rate in milli-requests per second, truncated as nginx
// does (rate·1000/scale in integers). A relative tolerance of 1e-12 absorbs
// the float error of rates given as decimals (2.3/s → 2300, not 2299) and of
// per-minute rates (3/60 → 50).
func nginxRate(rate float64) int64 {
	if !(rate > 0) {
		return 0
	}
	x := math.Floor(rate * 1000 * (1 + 1e-12))
	if x > MaxRate*1000 {
		return MaxRate * 1000
	}
	return int64(x)
}

// model is a Config compiled to the integers Step works in. compile never
// fails: an invalid Config is clamped to something Step can run without
// panicking.
type model struct {
	alg           Algorithm
	limit         int64 // Limit or Capacity, ≥ 1
	w             int64 // window in µs, ≥ 1
	epoch         bool  // windows aligned to the Unix epoch
	countRejected bool
	interval      int64 // token-bucket: µs per token, ≥ 1
	rateM         int64 // nginx: milli-requests per second, ≥ 1
	burstM        int64 // nginx: burst·1000
	delayM        int64 // nginx: delay·1000; MaxInt64 = never delay
	phase         int64 // aligned windows start at phase + k·w µs, 0 ≤ phase < w
	penalty       PenaltyKind
	block         int64 // PenaltyBlock: µs, ≥ 1
	forget        int64 // ForgetIdle: µs; 0 = never
	whole         bool  // RefillWhole
}

func (c Config) compile() model {
	m := model{alg: c.Algorithm, countRejected: c.CountRejected, penalty: c.Penalty.Kind}
	m.block = max(c.Penalty.Duration.Microseconds(), 1)
	m.forget = max(c.ForgetIdle.Microseconds(), 0)
	if c.Algorithm.windowed() {
		m.limit = min(max(c.Limit, 1), MaxCount)
		m.w = max(c.Window.Microseconds(), 1)
		m.epoch = c.Align == AlignEpoch || c.Align == AlignTimer || (c.Align == "" && c.Algorithm == SlidingWindowCounter)
		if c.Align == AlignTimer {
			m.phase = floorMod(c.Phase.Microseconds(), m.w)
		}
		return m
	}
	m.limit = min(max(c.Capacity, 1), MaxCount)
	switch c.Algorithm {
	case TokenBucket:
		iv := 1e6 / c.Rate
		switch {
		case !(iv >= 1): // NaN, rates above 1e6/s
			m.interval = 1
		case iv > float64(MaxBucketSpan.Microseconds()/m.limit):
			m.interval = MaxBucketSpan.Microseconds() / m.limit
		default:
			m.interval = int64(math.Round(iv))
		}
		m.interval = max(m.interval, 1)
	case GCRA, LeakyBucket:
		m.rateM = max(nginxRate(c.Rate), 1)
		m.burstM = (m.limit - 1) * 1000
		m.delayM = math.MaxInt64
		if c.Algorithm == LeakyBucket && !c.NoDelay {
			m.delayM = min(max(c.Delay, 0), m.limit) * 1000
		}
	}
	switch {
	case c.Algorithm != TokenBucket && c.Algorithm != GCRA:
	case c.Refill == RefillWhole:
		m.whole = true
	case c.Refill == RefillInterval:
		// A fixed window of Capacity per period on the timer.
		m.w = m.refillPeriod()
		m.alg, m.epoch, m.phase = FixedWindow, true, floorMod(c.Phase.Microseconds(), m.w)
	}
	return m
}

// refillPeriod returns the time a bucket takes to fill from empty in µs,
// the period of RefillInterval: C·I for the token bucket, C·10⁹/rate
// rounded up for GCRA (rate in milli-requests per second).
func (m *model) refillPeriod() int64 {
	if m.alg == TokenBucket {
		return max(satMul(m.limit, m.interval), 1)
	}
	return max(ceilDiv(satMul(m.limit, 1_000_000_000), m.rateM), 1)
}

// RefillPeriod returns the period of RefillInterval for c, the time its
// bucket takes to fill from empty: Capacity times the token bucket's refill
// interval (see Params.IntervalUS), or for GCRA Capacity·10⁹/RateMilli µs
// rounded up. Phase must lie in [0, RefillPeriod). It returns 0 unless c is
// a TokenBucket or GCRA.
func (c Config) RefillPeriod() time.Duration {
	if c.Algorithm != TokenBucket && c.Algorithm != GCRA {
		return 0
	}
	c.Refill = ""
	m := c.compile()
	return usDur(m.refillPeriod())
}

// Params are the integers Step computes with, derived once from a Config's
// floats and durations. A port of Step (the Redis Lua script) that takes
// these values, rather than deriving its own from Rate, makes the same
// decisions; every product Step forms from them and realistic times stays
// below 2^53.
type Params struct {
	// Limit is Limit (window algorithms) or Capacity (buckets).
	Limit int64 `json:"limit"`
	// WindowUS is the window in µs (window algorithms).
	WindowUS int64 `json:"window_us,omitempty"`
	// Epoch reports whether windows are aligned to the Unix epoch
	// (FixedWindow, SlidingWindowCounter).
	Epoch bool `json:"epoch,omitempty"`
	// CountRejected is Config.CountRejected (window algorithms).
	CountRejected bool `json:"count_rejected,omitempty"`
	// IntervalUS is the token bucket's refill interval: round(1e6/Rate) µs,
	// halves rounded up.
	IntervalUS int64 `json:"interval_us,omitempty"`
	// RateMilli is nginx's rate in milli-requests per second,
	// floor(Rate·1000·(1+1e-12)) (GCRA, LeakyBucket).
	RateMilli int64 `json:"rate_milli,omitempty"`
	// BurstMilli is nginx's burst·1000 = (Capacity−1)·1000.
	BurstMilli int64 `json:"burst_milli,omitempty"`
	// DelayMilli is nginx's delay·1000 for LeakyBucket, or −1 when requests
	// are never delayed (GCRA, NoDelay).
	DelayMilli int64 `json:"delay_milli,omitempty"`
}

// Params returns the integers Step uses for c (see [Params]); c should be
// valid.
func (c Config) Params() Params {
	m := c.compile()
	p := Params{Limit: m.limit}
	switch {
	case c.Algorithm.windowed():
		p.WindowUS, p.Epoch, p.CountRejected = m.w, m.epoch, m.countRejected
	case c.Algorithm == TokenBucket:
		p.IntervalUS = m.interval
	case c.Algorithm.nginx():
		p.RateMilli, p.BurstMilli, p.DelayMilli = m.rateM, m.burstM, m.delayM
		if m.delayM == math.MaxInt64 {
			p.DelayMilli = -1
		}
	}
	return p
}
