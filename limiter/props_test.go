package limiter

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// checkStep checks every promise of a Decision d = Step(pre, now) → post
// against cfg: field ranges and their relations, rejected requests leaving
// the state alone, and the exactness of Remaining, UntilMore (hence
// RetryAfter), UntilFull and IdleAt, by stepping post at those instants and
// one microsecond before. It returns the first broken promise, or nil.
// Remaining is only checked by stepping when it is at most maxSteps.
func checkStep(cfg Config, pre State, now time.Time, post State, d Decision, maxSteps int64) error {
	lim := cfg.Quota()
	switch {
	case d.Limit != lim:
		return fmt.Errorf("Limit = %d, want %d", d.Limit, lim)
	case d.Remaining < 0 || d.Remaining > lim:
		return fmt.Errorf("Remaining = %d, not in [0, %d]", d.Remaining, lim)
	case d.Allowed && d.Remaining >= lim:
		return fmt.Errorf("admitted, yet Remaining = %d = Limit", d.Remaining)
	case (d.UntilMore == 0) != (d.Remaining > 0):
		return fmt.Errorf("UntilMore = %v with Remaining = %d", d.UntilMore, d.Remaining)
	case (d.RetryAfter > 0) == d.Allowed:
		return fmt.Errorf("RetryAfter = %v with Allowed = %v", d.RetryAfter, d.Allowed)
	case !d.Allowed && d.RetryAfter != d.UntilMore:
		return fmt.Errorf("RetryAfter = %v ≠ UntilMore = %v", d.RetryAfter, d.UntilMore)
	case d.UntilFull < d.UntilMore:
		return fmt.Errorf("UntilFull = %v < UntilMore = %v", d.UntilFull, d.UntilMore)
	case (d.UntilFull == 0) != (d.Remaining == lim):
		return fmt.Errorf("UntilFull = %v with Remaining = %d of %d", d.UntilFull, d.Remaining, lim)
	case d.Delay < 0 || (d.Delay > 0 && !(cfg.Algorithm == LeakyBucket && !cfg.NoDelay && d.Allowed)):
		return fmt.Errorf("Delay = %v (allowed %v)", d.Delay, d.Allowed)
	}
	countsRejected := cfg.CountRejected && (cfg.Algorithm == SlidingLog || cfg.Algorithm == SlidingWindowCounter || cfg.Algorithm == FixedWindow)
	if !d.Allowed && !countsRejected && cfg.Penalty.IsZero() {
		a, b := pre, post
		if cfg.ForgetIdle > 0 { // the request's time is recorded
			if !a.IsZero() && now.UnixMicro() >= a.Last+cfg.ForgetIdle.Microseconds() {
				a = State{} // forgotten
			}
			a.Last, b.Last = 0, 0
		}
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("rejection changed the state from %+v to %+v", pre, post)
		}
	}
	if wait := post.Block - now.UnixMicro(); cfg.Penalty.Kind == PenaltyBlock && !d.Allowed {
		if cfg.ForgetIdle > 0 {
			wait = min(wait, post.Last+cfg.ForgetIdle.Microseconds()-now.UnixMicro())
		}
		if post.Block <= now.UnixMicro() || d.RetryAfter != time.Duration(wait)*us {
			return fmt.Errorf("refused under a block, but the State's block ends at %d (now %d, RetryAfter %v)", post.Block, now.UnixMicro(), d.RetryAfter)
		}
	}
	if cfg.ForgetIdle > 0 && (post.Last < now.UnixMicro() || d.UntilFull > time.Duration(post.Last-now.UnixMicro())*us+cfg.ForgetIdle) {
		return fmt.Errorf("ForgetIdle %v: Last = %d (now %d), UntilFull = %v", cfg.ForgetIdle, post.Last, now.UnixMicro(), d.UntilFull)
	}
	at := func(x time.Duration) (State, Decision) { return cfg.Step(post, now.Add(x)) }
	if d.UntilMore > 0 {
		if _, d2 := at(d.UntilMore); !d2.Allowed {
			return fmt.Errorf("rejected at now+UntilMore (%v): %+v", d.UntilMore, d2)
		}
		if _, d2 := at(d.UntilMore - us); d2.Allowed {
			return fmt.Errorf("admitted at now+UntilMore−1µs (%v): %+v", d.UntilMore, d2)
		}
	}
	if err := checkGain(cfg, post, now, d); err != nil {
		return err
	}
	full := func(d Decision) bool { return d.Allowed && d.Remaining == lim-1 }
	if _, d2 := at(d.UntilFull); !full(d2) {
		return fmt.Errorf("not full at now+UntilFull (%v): %+v", d.UntilFull, d2)
	}
	if d.UntilFull > 0 {
		if _, d2 := at(d.UntilFull - us); full(d2) {
			return fmt.Errorf("already full at now+UntilFull−1µs (%v): %+v", d.UntilFull, d2)
		}
	}
	if d.Remaining <= maxSteps {
		st := post
		for i := range d.Remaining + 1 {
			var d2 Decision
			st, d2 = cfg.Step(st, now)
			if d2.Allowed != (i < d.Remaining) {
				return fmt.Errorf("Remaining = %d, but request %d more at now: allowed = %v", d.Remaining, i+1, d2.Allowed)
			}
		}
	}
	idle := cfg.IdleAt(post)
	if idle.Before(now) {
		idle = now
	}
	never := idle.Equal(time.UnixMicro(math.MaxInt64))
	if never != (cfg.Refill == RefillWhole && cfg.ForgetIdle == 0 && post.Block == 0) {
		return fmt.Errorf("IdleAt = %v: never is only for RefillWhole without ForgetIdle, outside a block", idle)
	}
	for _, x := range []time.Time{idle, idle.Add(1234567 * us)} {
		if never {
			break
		}
		s1, d1 := cfg.Step(post, x)
		s0, d0 := cfg.Step(State{}, x)
		if !reflect.DeepEqual(s1, s0) || d1 != d0 {
			return fmt.Errorf("at IdleAt %v (+%v): %+v %+v, but from the zero State %+v %+v", idle, x.Sub(idle), s1, d1, s0, d0)
		}
	}
	js, err := json.Marshal(post)
	if err != nil {
		return err
	}
	var back State
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(normLog(back), normLog(post)) {
		return fmt.Errorf("State %+v does not survive JSON (%s → %+v, %v)", post, js, back, err)
	}
	return nil
}

func normLog(s State) State {
	if len(s.Log) == 0 {
		s.Log = nil
	}
	return s
}

// propertyConfigs covers every algorithm with awkward parameters: rates
// whose interval is not a whole µs or ms, windows not a whole second,
// capacities of 1.
func propertyConfigs() []Config {
	var cs []Config
	for _, alg := range []Algorithm{FixedWindow, SlidingLog, SlidingWindowCounter} {
		for _, lim := range []int64{1, 3, 7} {
			for _, w := range []time.Duration{1 * sec, 2500*ms + 7*us} {
				for _, align := range []Align{"", AlignEpoch, AlignFirstRequest} {
					if alg == SlidingLog && align != "" {
						continue
					}
					for _, cr := range []bool{false, true} {
						cs = append(cs, Config{Algorithm: alg, Limit: lim, Window: w, Align: align, CountRejected: cr})
					}
				}
			}
		}
	}
	for _, rate := range []float64{1, 3, 0.7, 250, 1.0 / 60, 7.0 / 60} {
		for _, c := range []int64{1, 4, 9} {
			cs = append(cs,
				Config{Algorithm: TokenBucket, Rate: rate, Capacity: c},
				Config{Algorithm: GCRA, Rate: rate, Capacity: c},
				Config{Algorithm: LeakyBucket, Rate: rate, Capacity: c},
				Config{Algorithm: LeakyBucket, Rate: rate, Capacity: c, Delay: c / 2},
				Config{Algorithm: LeakyBucket, Rate: rate, Capacity: c, NoDelay: true},
			)
		}
	}
	return append(cs, behaviourConfigs()...)
}

// behaviourConfigs covers the behaviours (penalties, idle eviction, the
// refills, timer alignment) on every algorithm that takes them, with
// awkward durations.
func behaviourConfigs() []Config {
	var cs []Config
	blocks := []Penalty{{Kind: PenaltyBlock, Duration: 2500*ms + 3*us}, {Kind: PenaltyBlock, Duration: 40 * sec}}
	for _, alg := range []Algorithm{FixedWindow, SlidingLog, SlidingWindowCounter} {
		for _, lim := range []int64{1, 3} {
			for _, w := range []time.Duration{1 * sec, 2500*ms + 7*us} {
				base := Config{Algorithm: alg, Limit: lim, Window: w}
				for _, p := range append(blocks, Penalty{Kind: PenaltyExtend}, Penalty{Kind: PenaltyRestart}) {
					for _, cr := range []bool{false, true} {
						c := base
						c.Penalty, c.CountRejected = p, cr
						cs = append(cs, c)
						if p.Kind == PenaltyRestart && alg != SlidingLog {
							c.Align = AlignEpoch
							cs = append(cs, c)
						}
					}
				}
				for _, fi := range []time.Duration{300*ms + 1*us, 3 * w} {
					c := base
					c.ForgetIdle = fi
					cs = append(cs, c)
					c.Penalty = blocks[0]
					cs = append(cs, c)
					if alg != FixedWindow {
						c.Penalty = Penalty{Kind: PenaltyExtend}
						cs = append(cs, c)
					}
				}
				if alg != SlidingLog {
					c := base
					c.Align, c.Phase = AlignTimer, w/3-w/3%us
					cs = append(cs, c)
					c.Penalty = Penalty{Kind: PenaltyRestart}
					cs = append(cs, c)
				}
			}
		}
	}
	for _, rate := range []float64{1, 3, 0.7, 7.0 / 60} {
		for _, capacity := range []int64{1, 4} {
			for _, alg := range []Algorithm{TokenBucket, GCRA} {
				base := Config{Algorithm: alg, Rate: rate, Capacity: capacity}
				for _, refill := range []Refill{RefillContinuous, RefillWhole, RefillInterval} {
					c := base
					c.Refill = refill
					if refill == RefillInterval {
						c.Phase = base.RefillPeriod() / 3
						c.Phase -= c.Phase % us
					}
					cs = append(cs, c)
					for _, p := range blocks {
						b := c
						b.Penalty = p
						cs = append(cs, b)
					}
					for _, fi := range []time.Duration{700 * ms, 5 * sec} {
						f := c
						f.ForgetIdle = fi
						cs = append(cs, f)
						f.Penalty = blocks[0]
						cs = append(cs, f)
					}
				}
			}
		}
	}
	return cs
}

// arrivals returns k arrival times after t0 for a limiter whose natural
// period is about p: bursts, gaps around p, long idles, and now and then a
// clock that runs backwards.
func arrivals(rng *rand.Rand, k int, p time.Duration) []time.Time {
	out := make([]time.Time, k)
	now := t0.Add(time.Duration(rng.Int64N(int64(10 * sec))))
	for i := range out {
		switch x := rng.IntN(100); {
		case x < 35: // same instant
		case x < 60:
			now = now.Add(time.Duration(rng.Int64N(int64(p/4) + 1)))
		case x < 85:
			now = now.Add(time.Duration(rng.Int64N(int64(2*p) + 1)))
		case x < 95:
			now = now.Add(time.Duration(rng.Int64N(int64(20*p) + 1)))
		default:
			now = now.Add(-time.Duration(rng.Int64N(int64(3*p) + 1)))
		}
		out[i] = now.Truncate(us) // Step reads µs; keep the check's arithmetic exact
	}
	return out
}

// naturalPeriod is the time one more request takes to become available.
func naturalPeriod(c Config) time.Duration {
	if c.Algorithm.windowed() {
		return c.Window / time.Duration(c.Limit)
	}
	return time.Duration(float64(sec) / c.Rate)
}

// TestDecisionPromises drives every algorithm with randomised arrivals and
// checks each decision with checkStep: in particular that a retry at
// now+RetryAfter is admitted and one at now+RetryAfter−1µs is not.
func TestDecisionPromises(t *testing.T) {
	steps := 300
	if testing.Short() {
		steps = 60
	}
	for i, cfg := range propertyConfigs() {
		name := fmt.Sprintf("%d/%s", i, cfg.Algorithm)
		t.Run(name, func(t *testing.T) {
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var st State
			rejected := 0
			for _, now := range arrivals(rng, steps, naturalPeriod(cfg)) {
				post, d := cfg.Step(st, now)
				if err := checkStep(cfg, st, now, post, d, 64); err != nil {
					t.Fatalf("%+v\nStep(%+v, t0+%v) = %+v, %+v:\n%v", cfg, st, now.Sub(t0), post, d, err)
				}
				if !d.Allowed {
					rejected++
				}
				st = post
			}
			if rejected == 0 {
				t.Errorf("no request was rejected: the arrivals test nothing")
			}
		})
	}
}

// FuzzStep checks checkStep's promises for random configurations and
// arrival sequences; invalid configurations must still not panic.
func FuzzStep(f *testing.F) {
	f.Add(uint8(0), uint16(3), uint32(1_000_000), uint8(0), uint8(0), uint8(0), []byte{0, 0, 0, 0, 0, 0, 1, 0, 1})
	f.Add(uint8(1), uint16(2), uint32(2_500_007), uint8(4), uint8(0), uint8(0), []byte{9, 9, 1, 0, 0, 2, 7, 7, 3})
	f.Add(uint8(2), uint16(5), uint32(10_000_000), uint8(5), uint8(0), uint8(0), []byte{1, 200, 2, 0, 0, 0, 3, 1, 1})
	f.Add(uint8(3), uint16(4), uint32(333_333), uint8(0), uint8(0), uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 1})
	f.Add(uint8(4), uint16(4), uint32(1_000_000), uint8(0), uint8(0), uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 244, 1})
	f.Add(uint8(5), uint16(6), uint32(1_000_000), uint8(0), uint8(2), uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(4), uint16(1), uint32(60_000_000), uint8(0), uint8(0), uint8(0), []byte{0, 0, 0, 0xea, 0x60, 3, 0x27, 0x10, 3})
	f.Add(uint8(5), uint16(0), uint32(0), uint8(0xff), uint8(9), uint8(0), []byte{})
	f.Add(uint8(0), uint16(3), uint32(1_000_000), uint8(1), uint8(0), uint8(1), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 5, 3})
	f.Add(uint8(1), uint16(2), uint32(2_500_007), uint8(0), uint8(0), uint8(2|4), []byte{9, 9, 1, 0, 0, 2, 7, 7, 3, 0, 1, 1, 0, 1, 3})
	f.Add(uint8(2), uint16(5), uint32(10_000_000), uint8(0), uint8(0), uint8(3|32), []byte{1, 200, 2, 0, 0, 0, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(3), uint16(4), uint32(333_333), uint8(0), uint8(0), uint8(8|1), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 1})
	f.Add(uint8(4), uint16(4), uint32(1_000_000), uint8(0), uint8(0), uint8(16|4), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 244, 1})
	f.Fuzz(func(t *testing.T, alg uint8, count uint16, spanUS uint32, flags uint8, delay uint8, behave uint8, times []byte) {
		cfg := Config{Algorithm: Algorithms[int(alg)%len(Algorithms)]}
		if flags&0x80 != 0 { // nonsense mixtures, to exercise Validate
			cfg.Limit, cfg.Window, cfg.Rate, cfg.Capacity = int64(count), time.Duration(spanUS)*us, float64(delay), int64(count)
		} else if cfg.Algorithm.windowed() {
			cfg.Limit, cfg.Window = int64(count), time.Duration(spanUS)*us
		} else {
			cfg.Capacity = int64(count)
			if spanUS > 0 {
				cfg.Rate = 1e6 / float64(spanUS)
			}
		}
		switch flags & 3 {
		case 1:
			cfg.Align = AlignEpoch
		case 2:
			cfg.Align = AlignFirstRequest
		}
		cfg.CountRejected = flags&4 != 0
		cfg.NoDelay = flags&8 != 0
		cfg.Delay = int64(delay)
		// behave: bits 0–1 the penalty, 2 ForgetIdle, 3–4 the refill, 5
		// AlignTimer; durations from spanUS.
		span := time.Duration(spanUS) * us
		switch behave & 3 {
		case 1:
			cfg.Penalty = Penalty{Kind: PenaltyBlock, Duration: 3*span + 7*us}
		case 2:
			cfg.Penalty = Penalty{Kind: PenaltyExtend}
		case 3:
			cfg.Penalty = Penalty{Kind: PenaltyRestart}
		}
		if behave&4 != 0 {
			cfg.ForgetIdle = 2*span + 1*us
		}
		cfg.Refill = []Refill{"", RefillWhole, RefillInterval, "x"}[behave>>3&3]
		if behave&32 != 0 {
			cfg.Align, cfg.Phase = AlignTimer, span/3
		}
		if cfg.Refill == RefillInterval {
			cfg.Phase = cfg.RefillPeriod() / 3
		}
		if flags&0x40 == 0 { // mostly, drop what the algorithm does not take
			if !cfg.Algorithm.windowed() || cfg.Algorithm == SlidingLog {
				cfg.Align = ""
			}
			if !cfg.Algorithm.windowed() {
				cfg.CountRejected = false
			}
			if cfg.Algorithm != LeakyBucket {
				cfg.NoDelay, cfg.Delay = false, 0
			} else if cfg.NoDelay || cfg.Delay >= cfg.Capacity {
				cfg.Delay = 0
			}
			switch k := cfg.Penalty.Kind; {
			case k == PenaltyBlock && cfg.Algorithm == LeakyBucket,
				(k == PenaltyExtend || k == PenaltyRestart) && !cfg.Algorithm.windowed():
				cfg.Penalty = Penalty{}
			case k == PenaltyExtend && cfg.Align != "":
				cfg.Align = AlignFirstRequest
			}
			if cfg.Algorithm != TokenBucket && cfg.Algorithm != GCRA || cfg.Refill == "x" {
				cfg.Refill = ""
			}
			if cfg.Align != AlignTimer && cfg.Refill != RefillInterval {
				cfg.Phase = 0
			}
			cfg.Phase -= cfg.Phase % us
		}
		valid := cfg.Validate() == nil
		now := t0
		var st State
		for i := 0; i+3 <= len(times) && i < 3*100; i += 3 {
			gap := time.Duration(binary.BigEndian.Uint16(times[i:]))
			switch times[i+2] % 5 {
			case 0:
				gap *= us
			case 1:
				gap *= ms
			case 2:
				gap *= 10 * ms
			case 3:
				gap *= sec
			case 4:
				gap *= -ms
			}
			now = now.Add(gap)
			post, d := cfg.Step(st, now)
			if !valid {
				continue // only: no panic
			}
			if err := checkStep(cfg, st, now, post, d, 200); err != nil {
				t.Fatalf("%+v\nStep(%+v, t0+%v) = %+v, %+v:\n%v", cfg, st, now.Sub(t0), post, d, err)
			}
			st = post
		}
	})
}

// checkGain checks UntilGain by stepping post: one microsecond before it
// no more than Remaining is available, at it more is (available at x being
// what a request at x finds: its own Remaining + 1 when admitted, 0 when
// refused). Under a penalty that moves the limit on every request the
// probe itself changes what it measures, so only the relations are checked.
func checkGain(cfg Config, post State, now time.Time, d Decision) error {
	lim := cfg.Quota()
	switch {
	case d.Remaining == 0 && d.UntilGain != d.UntilMore:
		return fmt.Errorf("UntilGain = %v ≠ UntilMore = %v with Remaining 0", d.UntilGain, d.UntilMore)
	case (d.UntilGain == 0) != (d.Remaining == lim):
		return fmt.Errorf("UntilGain = %v with Remaining = %d of %d", d.UntilGain, d.Remaining, lim)
	case d.UntilGain > d.UntilFull:
		return fmt.Errorf("UntilGain = %v > UntilFull = %v", d.UntilGain, d.UntilFull)
	}
	if d.UntilGain == 0 || cfg.Penalty.Kind == PenaltyExtend {
		return nil
	}
	avail := func(x time.Duration) int64 {
		if _, d2 := cfg.Step(post, now.Add(x)); d2.Allowed {
			return d2.Remaining + 1
		}
		return 0
	}
	if a := avail(d.UntilGain - us); a > d.Remaining {
		return fmt.Errorf("%d available at now+UntilGain−1µs (%v), more than Remaining %d", a, d.UntilGain, d.Remaining)
	}
	if a := avail(d.UntilGain); a <= d.Remaining {
		return fmt.Errorf("only %d available at now+UntilGain (%v), Remaining %d", a, d.UntilGain, d.Remaining)
	}
	return nil
}
