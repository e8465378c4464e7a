package limiter

import "math"

// step decides one request: ForgetIdle first (a key idle for ForgetIdle
// starts from the zero State), then a running block (every request before
// its end is refused), then the algorithm (with PenaltyExtend and
// PenaltyRestart applied inside it), then a new block if the algorithm
// refused under PenaltyBlock.
func (m *model) step(st State, now int64, inPlace bool) (State, Decision) {
	if m.forget > 0 && !st.IsZero() && now >= sat(st.Last, m.forget) {
		st = State{}
	}
	last := max(st.Last, now)
	var d Decision
	switch {
	case st.Block != 0 && now < st.Block:
		d = m.blocked(st.Block, now) // st stays
	default:
		if st.Block != 0 {
			st = State{} // the block is over: the key starts afresh
		}
		st, d = m.decide(st, now, inPlace)
		if !d.Allowed && m.penalty == PenaltyBlock {
			st = State{Block: sat(now, m.block)}
			d = m.blocked(st.Block, now)
		}
	}
	if m.forget > 0 {
		st.Last = last
		// At Last+ForgetIdle the key is forgotten: a full quota then.
		left := usDur(sat(last, m.forget) - now)
		if d.UntilMore > left {
			d.UntilMore = left
		}
		if d.UntilFull > left {
			d.UntilFull = left
		}
		if d.UntilGain > left {
			d.UntilGain = left
		}
		if !d.Allowed {
			d.RetryAfter = d.UntilMore
		}
	}
	return st, d
}

// blocked is the Decision of a request refused by a block ending at end
// (> now): nothing is admitted before end, everything is at end.
func (m *model) blocked(end, now int64) Decision {
	left := usDur(end - now)
	return Decision{Limit: m.limit, UntilMore: left, UntilFull: left, UntilGain: left, RetryAfter: left}
}

// idleAt returns the Unix µs from which st is equivalent to the zero State
// (math.MinInt64 for the zero State, math.MaxInt64 for never).
func (m *model) idleAt(st State) int64 {
	if st.IsZero() {
		return math.MinInt64
	}
	var at int64
	switch {
	case st.Block != 0:
		at = st.Block
	case m.whole:
		at = math.MaxInt64 // the key's tick grid is never forgotten by itself
	default:
		at = m.plainIdleAt(st)
	}
	if m.forget > 0 {
		// Not before Last: a later request records its own time, as a
		// request on the zero State does.
		at = min(max(at, st.Last), sat(st.Last, m.forget))
	}
	return at
}

// restamp reports whether a request of outcome ok re-anchors the window at
// its time (PenaltyExtend: every request; PenaltyRestart: a refused one).
func (m *model) restamp(ok bool) bool {
	return m.penalty == PenaltyExtend || (m.penalty == PenaltyRestart && !ok)
}

// windowStart returns where a fresh window opened by a request at now
// starts: now, or the aligned edge at or before it (phase + k·w).
func (m *model) windowStart(now int64) int64 {
	if !m.epoch {
		return now
	}
	return sat(now, -floorMod(sat(now, -m.phase), m.w))
}

// floorMod returns a mod b in [0, b), for b > 0.
func floorMod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// wholeBucket is TokenBucket or GCRA under RefillWhole: At = t₀ (µs for
// the token bucket, ms for GCRA), Prev = ticks credited, Count = tokens
// held; tick k at t₀ + m.tickAt(k) adds a token, up to the capacity.
func (m *model) wholeBucket(st State, nowUS int64) (State, Decision) {
	now, unit := nowUS, int64(1)
	if m.alg == GCRA {
		now, unit = floorDiv(nowUS, 1000), 1000
	}
	in := st
	if st.IsZero() {
		st = State{At: now, Count: m.limit}
	}
	credited := max(m.ticks(now-st.At), st.Prev) // a clock running backwards sees no tick
	tokens := min(sat(st.Count, credited-st.Prev), m.limit)
	d := Decision{Allowed: tokens >= 1, Limit: m.limit}
	if d.Allowed {
		tokens--
		st = State{At: st.At, Count: tokens, Prev: credited}
	} else {
		st = in
	}
	d.Remaining = tokens
	tick := func(k int64) int64 { return satMul(sat(st.At, m.tickAt(k)), unit) - nowUS }
	if tokens == 0 {
		d.UntilMore = usDur(tick(credited + 1))
	}
	if tokens < m.limit {
		d.UntilGain = usDur(tick(credited + 1))
	}
	if tokens < m.limit {
		d.UntilFull = usDur(tick(credited + m.limit - tokens))
	}
	if !d.Allowed {
		d.RetryAfter = d.UntilMore
	}
	return st, d
}

// ticks returns how many refill ticks fall within el (µs for the token
// bucket, ms for GCRA) after t₀; 0 for el < 0.
func (m *model) ticks(el int64) int64 {
	if el <= 0 {
		return 0
	}
	if m.alg == GCRA {
		return mulDiv(m.rateM, el, 1_000_000)
	}
	return el / m.interval
}

// tickAt returns the offset from t₀ of tick k: the least el with
// ticks(el) ≥ k.
func (m *model) tickAt(k int64) int64 {
	if m.alg == GCRA {
		return ceilDiv(satMul(k, 1_000_000), m.rateM)
	}
	return satMul(k, m.interval)
}
