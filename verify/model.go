package verify

import "github.com/rlprobe/rlprobe/limiter"

// Model is the strictest limiter that keeps e's promise, exactly at its
// bound: a fixed window of Limit per Window at e's alignment (first-request
// when unset) for a Fixed rule, a sliding log of Limit per Window for a
// Sliding one (N in any interval of length W), a token bucket of Capacity
// refilled at Rate for a bucket, each with e's Penalty. It is what a rule means when replayed,
// and the last step of the round trip limiter config → inference → rule →
// limiter config. Call it on a normalized rule (Burst folded into
// Capacity); the zero Config is returned for a rule that is neither.
func (e *Endpoint) Model() limiter.Config {
	switch {
	case e.IsBucket():
		return limiter.Config{Algorithm: limiter.TokenBucket, Rate: e.Rate, Capacity: e.capacity(), Penalty: e.Penalty}
	case e.Limit <= 0 || e.Window <= 0:
		return limiter.Config{}
	case e.WindowType == Fixed:
		align := e.Align
		if align == "" {
			align = limiter.AlignFirstRequest
		}
		c := limiter.Config{Algorithm: limiter.FixedWindow, Limit: e.Limit, Window: e.Window, Align: align, Penalty: e.Penalty}
		if align == limiter.AlignTimer {
			c.Phase = e.Phase
		}
		return c
	}
	return limiter.Config{Algorithm: limiter.SlidingLog, Limit: e.Limit, Window: e.Window, Penalty: e.Penalty}
}
