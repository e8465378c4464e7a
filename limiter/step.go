package limiter

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// Step decides one request for a key whose state is st, arriving at now. It
// returns the key's next State and the Decision. st is the zero State for a
// key never seen. Step is a pure function: it reads no clock, keeps nothing,
// never writes to st (see [State]) and is safe to call from any goroutine.
//
// now is used at microsecond resolution (milliseconds for GCRA and
// LeakyBucket, as nginx). A now earlier than a time already in st is taken
// as that later time by the window algorithms (a key's clock never runs
// backwards); the token bucket simply sees fewer tokens; GCRA and
// LeakyBucket apply nginx's rules (a jump back of up to 60 s counts as no
// time passing, a longer one as 1 ms).
//
// The behaviours of c (Penalty, ForgetIdle, Refill, AlignTimer and Phase;
// see PenaltyKind and Refill) apply as their godoc says; [State] gives the
// layout they use.
//
// Rejected requests leave the State unchanged (the very State passed in)
// unless CountRejected counts them, a penalty triggers or ForgetIdle
// records the request's time. Decision.RetryAfter of a rejection is the
// exact time until a retry succeeds if nothing else arrives meanwhile:
// stepping the returned State at now+RetryAfter admits, one microsecond
// earlier rejects. This holds under every behaviour; under a penalty it is
// the wait of a client that does not retry sooner (see [Decision]).
//
// c should be valid (see Validate); for an invalid Config the result is
// unspecified, but Step does not panic.
func (c Config) Step(st State, now time.Time) (State, Decision) {
	m := c.compile()
	return m.step(st, now.UnixMicro(), false)
}

// A Stepper is a Config compiled once for many Steps: a replay of
// thousands of requests through one hypothesis. The zero Stepper is not
// usable; make one with [Config.Stepper].
type Stepper struct{ m model }

// Stepper compiles c for repeated steps.
func (c Config) Stepper() Stepper { return Stepper{m: c.compile()} }

// Step is [Config.Step] of the Config the Stepper was made from: the same
// State and Decision, st never written.
func (s Stepper) Step(st State, now time.Time) (State, Decision) {
	return s.m.step(st, now.UnixMicro(), false)
}

// StepOwned is Step for a caller that owns st's Log and never reads st
// again: the returned State may reuse (and overwrite) st.Log's array
// instead of copying it, which spares a SlidingLog of a large limit a copy
// of its log per request. The State and Decision are those of Step.
func (s Stepper) StepOwned(st State, now time.Time) (State, Decision) {
	return s.m.step(st, now.UnixMicro(), true)
}

// IdleAt returns an instant from which st decides exactly like the zero
// State: stepping st at or after IdleAt gives the same Decision and State
// as stepping State{}, so a store may forget the key then (and a Redis key
// may expire). It returns the zero Time for the zero State. For buckets it
// is the instant the bucket is full again; for FixedWindow the end of the
// window, for SlidingLog the instant the newest logged request leaves it,
// for SlidingWindowCounter the end of the window after the current one: at
// most two windows after the key's last request. During a block it is the
// block's end. Under RefillWhole a State is never equivalent to the zero
// State by itself (the grid of ticks is the key's), and IdleAt is the
// largest Time Step can represent (time.UnixMicro(math.MaxInt64)). Under
// ForgetIdle it is at most the key's last request plus ForgetIdle.
func (c Config) IdleAt(st State) time.Time {
	if st.IsZero() {
		return time.Time{}
	}
	m := c.compile()
	return time.UnixMicro(m.idleAt(st))
}

// decide steps st by the algorithm alone (with PenaltyExtend and
// PenaltyRestart); step (stepbehaviour.go) wraps it with ForgetIdle and
// the block.
func (m *model) decide(st State, now int64, inPlace bool) (State, Decision) {
	switch m.alg {
	case FixedWindow:
		return m.fixedWindow(st, now)
	case SlidingLog:
		return m.slidingLog(st, now, inPlace)
	case SlidingWindowCounter:
		return m.slidingWindowCounter(st, now)
	case TokenBucket, GCRA:
		if m.whole {
			return m.wholeBucket(st, now)
		}
		if m.alg == TokenBucket {
			return m.tokenBucket(st, now)
		}
		return m.nginx(st, now)
	case LeakyBucket:
		return m.nginx(st, now)
	}
	return st, Decision{}
}

// plainIdleAt returns the Unix µs from which st, a State of the algorithm
// alone (no block, not RefillWhole), is equivalent to the zero State.
func (m *model) plainIdleAt(st State) int64 {
	switch m.alg {
	case FixedWindow:
		return sat(st.At, m.w)
	case SlidingLog:
		if len(st.Log) == 0 {
			return math.MinInt64
		}
		return sat(st.Log[len(st.Log)-1], m.w)
	case SlidingWindowCounter:
		if st.Count == 0 && st.Prev == 0 {
			return math.MinInt64
		}
		return sat(st.At, sat(m.w, m.w))
	case TokenBucket:
		return st.At
	case GCRA, LeakyBucket:
		full := sat(st.At, ceilDiv(satMul(sat(st.Count, 1000), 1000), m.rateM))
		return satMul(full, 1000)
	}
	return math.MinInt64
}

// fixedWindow: At = window start, Count = requests counted in it.
func (m *model) fixedWindow(st State, now int64) (State, Decision) {
	in := st
	if st.Count == 0 || now >= sat(st.At, m.w) {
		st = State{At: m.windowStart(now)}
	}
	ok := st.Count < m.limit
	if !ok && !m.countRejected {
		st = in
	} else {
		st.Count++
	}
	if m.restamp(ok) {
		st = State{At: max(st.At, now), Count: st.Count}
	}
	d := Decision{Allowed: ok, Limit: m.limit, Remaining: max(m.limit-st.Count, 0)}
	end := sat(st.At, m.w) - now
	d.UntilFull = usDur(end)
	if d.Remaining == 0 {
		d.UntilMore = d.UntilFull
	}
	if d.Remaining < m.limit {
		d.UntilGain = d.UntilFull
	}
	if !ok {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// slidingLog: Log = counted times in the trailing window, oldest first.
func (m *model) slidingLog(st State, now int64, inPlace bool) (State, Decision) {
	log := st.Log
	t := now // the key's clock never runs backwards
	if n := len(log); n > 0 && log[n-1] > t {
		t = log[n-1]
	}
	first, _ := slices.BinarySearch(log, sat(sat(t, -m.w), 1)) // first time > t−W
	live := log[first:]
	ok := int64(len(live)) < m.limit
	if ok || m.countRejected {
		keep := min(len(live), int(m.limit-1)) // the newest limit−1, then t
		live = live[len(live)-keep:]
		if inPlace {
			n := copy(log, live)
			live = append(log[:n], t)
		} else {
			next := make([]int64, keep+1)
			copy(next, live)
			next[keep] = t
			live = next
		}
		st = State{Log: live}
	}
	if m.restamp(ok) { // every counted time becomes t
		next := make([]int64, len(live))
		if inPlace && cap(log) >= len(live) {
			next = log[:len(live)]
		}
		for i := range next {
			next[i] = t
		}
		live = next
		st = State{Log: live}
	}
	d := Decision{Allowed: ok, Limit: m.limit, Remaining: m.limit - int64(len(live))}
	if len(live) > 0 {
		d.UntilFull = usDur(sat(live[len(live)-1], m.w) - now)
		d.UntilGain = usDur(sat(live[0], m.w) - now)
	}
	if d.Remaining == 0 {
		d.UntilMore = usDur(sat(live[0], m.w) - now)
	}
	if !ok {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// slidingWindowCounter: At = current window start, Count = its count,
// Prev = previous window's count.
func (m *model) slidingWindowCounter(st State, now int64) (State, Decision) {
	in := st
	w := m.w
	at, curr, prev := st.At, st.Count, st.Prev
	idle := curr == 0 && prev == 0
	// Windows roll by W from At (aligned windows are aligned because a
	// fresh one starts aligned; a re-anchored one rolls from its anchor).
	switch {
	case idle || now >= sat(at, sat(w, w)):
		at, curr, prev = m.windowStart(now), 0, 0
	case now >= sat(at, w):
		at, curr, prev = sat(at, w), 0, curr
	}
	e := min(max(now-at, 0), w) // a clock running backwards stays at the window start
	ok := mulDiv(prev, w-e, w)+curr < m.limit
	if ok || m.countRejected {
		curr++
		st = State{At: at, Count: curr, Prev: prev}
	} else {
		st = in
	}
	if m.restamp(ok) { // the estimate becomes a window starting now
		at, curr, prev = max(at, now), mulDiv(prev, w-e, w)+curr, 0
		e = 0
		st = State{At: at, Count: curr}
	}
	est := mulDiv(prev, w-e, w) + curr
	d := Decision{Allowed: ok, Limit: m.limit, Remaining: max(m.limit-est, 0)}
	d.UntilMore = usDur(m.swcUntilBelow(m.limit, at, curr, prev, e, now))
	d.UntilFull = usDur(m.swcUntilBelow(1, at, curr, prev, e, now))
	if est > 0 {
		d.UntilGain = usDur(m.swcUntilBelow(min(est, m.limit), at, curr, prev, e, now))
	}
	if !ok {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// swcUntilBelow returns how long (µs from now) until the estimate
// floor(prev·(W−e)/W) + curr of the window starting at at falls below k,
// given it is e µs into that window now and nothing else arrives.
func (m *model) swcUntilBelow(k, at, curr, prev, e, now int64) int64 {
	w := m.w
	if mulDiv(prev, w-e, w)+curr < k {
		return 0
	}
	if curr < k {
		// The previous window's share decays within this window:
		// prev·(W−x) < (k−curr)·W ⇔ x > (prev−k+curr)·W/prev.
		x := mulDiv(prev-k+curr, w, prev) + 1
		return sat(at, min(x, w)) - now // at the next edge the estimate is curr < k
	}
	// This window's count becomes the previous one at the next edge:
	// curr·(W−x) < k·W ⇔ x > (curr−k)·W/curr.
	x := mulDiv(curr-k, w, curr) + 1
	return sat(sat(at, w), x) - now
}

// tokenBucket: At = the instant the bucket is full again.
func (m *model) tokenBucket(st State, now int64) (State, Decision) {
	tat := max(st.At, now)
	if st.IsZero() {
		tat = now
	}
	slack := satMul(m.limit-1, m.interval) // how far ahead of now At may be
	ok := tat-now <= slack
	if ok {
		tat = sat(tat, m.interval)
		st = State{At: tat}
	}
	ahead := tat - now
	d := Decision{Allowed: ok, Limit: m.limit, Remaining: max(m.limit-ceilDiv(ahead, m.interval), 0)}
	d.UntilFull = usDur(ahead)
	if d.Remaining == 0 {
		d.UntilMore = usDur(ahead - slack)
	}
	if used := min(ceilDiv(ahead, m.interval), m.limit); used > 0 {
		d.UntilGain = usDur(ahead - satMul(used-1, m.interval)) // until ⌈ahead/I⌉ drops below used
	}
	if !ok {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// nginx: At = last (ms), Count = excess (milli-requests); the arithmetic of
// ngx_http_limit_req_lookup and _account.
func (m *model) nginx(st State, nowUS int64) (State, Decision) {
	ms := floorDiv(nowUS, 1000)
	d := Decision{Limit: m.limit}
	var excess int64
	if st.IsZero() {
		// First request: nginx creates the node with excess 0.
		st = State{At: ms}
		d.Allowed = true
	} else {
		var el int64
		excess, el = m.nginxExcess(st, ms)
		if excess <= m.burstM {
			d.Allowed = true
			st.Count = excess
			if el != 0 {
				st.At = ms
			}
		}
	}
	if d.Allowed && excess > m.delayM {
		d.Delay = time.Duration((excess-m.delayM)*1000/m.rateM) * time.Millisecond
	}
	// What the next request at now would see.
	next, _ := m.nginxExcess(st, ms)
	if next <= m.burstM {
		d.Remaining = (m.burstM-next)/1000 + 1
		// Remaining grows once the excess falls to burst − 1000·Remaining.
		if target := m.burstM - 1000*d.Remaining; target >= 0 {
			at := sat(st.At, ceilDiv(satMul(st.Count+1000-target, 1000), m.rateM))
			d.UntilGain = usDur(satMul(at, 1000) - nowUS)
		}
	} else {
		need := st.Count + 1000 - m.burstM // milli-requests to leak first
		at := sat(st.At, ceilDiv(satMul(need, 1000), m.rateM))
		d.UntilMore = usDur(satMul(at, 1000) - nowUS)
		d.UntilGain = d.UntilMore
	}
	if next > 0 {
		at := sat(st.At, ceilDiv(satMul(st.Count+1000, 1000), m.rateM))
		d.UntilFull = usDur(satMul(at, 1000) - nowUS)
	}
	if !d.Allowed {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// nginxExcess returns the excess a request at ms would leave on an existing
// node, max(0, excess − rate·el/1000 + 1000), and the elapsed ms el it
// counts (nginx's clamping of a clock that ran backwards).
func (m *model) nginxExcess(st State, ms int64) (excess, el int64) {
	el = ms - st.At
	switch {
	case el < -60000:
		el = 1
	case el < 0:
		el = 0
	}
	e := st.Count - mulDiv(m.rateM, el, 1000) + 1000
	return max(e, 0), el
}

// usDur converts µs to a Duration, clamping at 0 and at the largest
// Duration.
func usDur(us int64) time.Duration {
	if us <= 0 {
		return 0
	}
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// floorDiv returns a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns a/b rounded up, for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// mulDiv returns floor(a·b/c) for a, b ≥ 0 and c > 0 without intermediate
// overflow, saturating at MaxInt64. Negative a or b count as 0.
func mulDiv(a, b, c int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// sat returns a+b saturated to the int64 range.
func sat(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// satMul returns a·b saturated to the int64 range, for b ≥ 0.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if b > 0 && (a > math.MaxInt64/b || a < math.MinInt64/b) {
		if a > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return a * b
}
