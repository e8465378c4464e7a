package limiter

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// The tables below read as the behaviours' specification: each request
// {at, ok, remaining, retry-after} after t0, from the zero State.

func block(d time.Duration) Penalty { return Penalty{Kind: PenaltyBlock, Duration: d} }

var (
	extend  = Penalty{Kind: PenaltyExtend}
	restart = Penalty{Kind: PenaltyRestart}
)

// TestPenaltyBlock: the first refusal starts a block of D from itself;
// every request during it is refused (RetryAfter = the block's end) and
// none extends it; afterwards the key starts from the zero State.
func TestPenaltyBlock(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "fixed-window: refused until the block ends, though a new window opened meanwhile",
		cfg:  Config{Algorithm: FixedWindow, Limit: 3, Window: 10 * sec, Align: AlignEpoch, Penalty: block(30 * sec)},
		reqs: seq(
			[]req{{0, true, 2, 0, 0}, {0, true, 1, 0, 0}, {0, true, 0, 0, 0}},
			[]req{
				{1 * sec, false, 0, 30 * sec, 0},   // the block: until t0+31s
				{5 * sec, false, 0, 26 * sec, 0},   // not extended
				{10 * sec, false, 0, 21 * sec, 0},  // a new window, still blocked
				{31*sec - us, false, 0, us, 0},     //
				{31 * sec, true, 2, 0, 0},          // the zero State: window [30s, 40s)
				{31 * sec, true, 1, 0, 0},          //
				{31 * sec, true, 0, 0, 0},          //
				{31 * sec, false, 0, 30 * sec, 0},  // a new block
				{61 * sec, true, 2, 0, 0},          //
				{61*sec + us, true, 1, 0, 0},       //
				{70*sec - us, true, 0, 0, 0},       //
				{70 * sec, true, 2, 0, 0},          // window [70s, 80s): no refusal, no block
				{100 * sec, true, 2, 0, 0},         //
				{100 * sec, true, 1, 0, 0},         //
				{100 * sec, true, 0, 0, 0},         //
				{100 * sec, false, 0, 30 * sec, 0}, //
			},
		),
	}, {
		name: "sliding-log: the log is forgotten with the block",
		cfg:  Config{Algorithm: SlidingLog, Limit: 2, Window: 10 * sec, Penalty: block(5 * sec)},
		reqs: []req{
			{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{1 * sec, false, 0, 5 * sec, 0},
			{6 * sec, true, 1, 0, 0}, // without the block, t0's two stay until 10 s
			{6 * sec, true, 0, 0, 0},
		},
	}, {
		name: "sliding-window-counter",
		cfg:  Config{Algorithm: SlidingWindowCounter, Limit: 2, Window: 10 * sec, Penalty: block(3 * sec)},
		reqs: []req{
			{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{1 * sec, false, 0, 3 * sec, 0},
			{4 * sec, true, 1, 0, 0},
		},
	}, {
		name: "token-bucket: no token flows back during the block",
		cfg:  Config{Algorithm: TokenBucket, Rate: 1, Capacity: 2, Penalty: block(10 * sec)},
		reqs: []req{
			{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{0, false, 0, 10 * sec, 0},
			{2 * sec, false, 0, 8 * sec, 0}, // the bucket alone would be full
			{10 * sec, true, 1, 0, 0},
		},
	}, {
		name: "gcra",
		cfg:  Config{Algorithm: GCRA, Rate: 1, Capacity: 2, Penalty: block(10 * sec)},
		reqs: []req{
			{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{500 * ms, false, 0, 10 * sec, 0},
			{10500*ms - us, false, 0, us, 0},
			{10500 * ms, true, 1, 0, 0},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestPenaltyExtend: every request moves the window end to now + W; the
// count resets only after W with no request at all.
func TestPenaltyExtend(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "fixed-window: the window is [last request, last request + W)",
		cfg:  Config{Algorithm: FixedWindow, Limit: 2, Window: 10 * sec, Penalty: extend},
		reqs: []req{
			{0, true, 1, 0, 0},
			{5 * sec, true, 0, 0, 0},             // the end is now 15 s
			{9 * sec, false, 0, 10 * sec, 0},     // 19 s
			{18 * sec, false, 0, 10 * sec, 0},    // 28 s: a retry before the end moves it again
			{28*sec - us, false, 0, 10 * sec, 0}, // 38 s − 1 µs
			{38 * sec, true, 1, 0, 0},            // W of silence: a fresh window
		},
	}, {
		name: "sliding-log: every logged time becomes the latest request's",
		cfg:  Config{Algorithm: SlidingLog, Limit: 2, Window: 10 * sec, Penalty: extend},
		reqs: []req{
			{0, true, 1, 0, 0},
			{5 * sec, true, 0, 0, 0},          // log [5s, 5s]
			{14 * sec, false, 0, 10 * sec, 0}, // plain, t0 would have left at 10 s; now [14s, 14s]
			{24 * sec, true, 1, 0, 0},         // both left at 24 s
			{24 * sec, true, 0, 0, 0},
		},
	}, {
		name: "sliding-window-counter: the estimate stays while requests keep coming, then decays",
		cfg:  Config{Algorithm: SlidingWindowCounter, Limit: 2, Window: 10 * sec, Penalty: extend},
		reqs: []req{
			{2 * sec, true, 1, 0, 0},             // window [2s, 12s), count 1
			{4 * sec, true, 0, 0, 0},             // [4s, 14s), count 2
			{13 * sec, false, 0, 10*sec + us, 0}, // [13s, 23s), count 2: at 23 s + 1 µs floor(2·(W−1µs)/W) = 1
			{23*sec + us, true, 0, 0, 0},         // the estimate 1 + 1 = 2 becomes a window at 23 s + 1 µs
			{33*sec + 2*us, true, 0, 0, 0},       // W of silence: it rolled into the previous window, floor(2·(W−1µs)/W) + 1 = 2
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestPenaltyRestart: only a refused request moves the window end to
// now + W; admitted requests leave it where it was.
func TestPenaltyRestart(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "fixed-window anchored: admissions keep the window",
		cfg:  Config{Algorithm: FixedWindow, Limit: 2, Window: 10 * sec, Penalty: restart},
		reqs: []req{
			{0, true, 1, 0, 0},
			{9 * sec, true, 0, 0, 0},
			{10 * sec, true, 1, 0, 0}, // window [10s, 20s)
			{11 * sec, true, 0, 0, 0},
			{12 * sec, false, 0, 10 * sec, 0}, // [12s, 22s)
			{21 * sec, false, 0, 10 * sec, 0}, // [21s, 31s)
			{31 * sec, true, 1, 0, 0},
		},
	}, {
		name: "fixed-window aligned: a restarted window ends W after the refusal, the next is aligned",
		cfg:  Config{Algorithm: FixedWindow, Limit: 2, Window: 10 * sec, Align: AlignEpoch, Penalty: restart},
		reqs: []req{
			{1 * sec, true, 1, 0, 0},
			{2 * sec, true, 0, 0, 0},
			{3 * sec, false, 0, 10 * sec, 0},  // until 13 s
			{10 * sec, false, 0, 10 * sec, 0}, // the edge at 10 s does not help: until 20 s
			{20 * sec, true, 1, 0, 0},         // the aligned window [20s, 30s)
			{25 * sec, true, 0, 0, 0},
			{29 * sec, false, 0, 10 * sec, 0},
			{39 * sec, true, 1, 0, 0}, // [30s, 40s)
			{39 * sec, true, 0, 0, 0},
			{40 * sec, true, 1, 0, 0},
		},
	}, {
		name: "sliding-log: a refusal re-stamps the log",
		cfg:  Config{Algorithm: SlidingLog, Limit: 2, Window: 10 * sec, Penalty: restart},
		reqs: []req{
			{0, true, 1, 0, 0},
			{1 * sec, true, 0, 0, 0},
			{5 * sec, false, 0, 10 * sec, 0}, // log [5s, 5s]
			{10 * sec, false, 0, 10 * sec, 0},
			{20 * sec, true, 1, 0, 0},
			{21 * sec, true, 0, 0, 0}, // admissions log as usual: [20s, 21s]
			{30 * sec, true, 0, 0, 0},
		},
	}, {
		name: "sliding-window-counter anchored: the estimate becomes a window at the refusal",
		cfg:  Config{Algorithm: SlidingWindowCounter, Limit: 2, Window: 10 * sec, Align: AlignFirstRequest, Penalty: restart},
		reqs: []req{
			{0, true, 1, 0, 0},
			{1 * sec, true, 0, 0, 0},
			{5 * sec, false, 0, 10*sec + us, 0}, // window [5s, 15s) with count 2
			{15*sec + us, true, 0, 0, 0},        // rolled: floor(2·(W−1µs)/W) = 1, + 1
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestPenaltyNeverPausing: a client sending 2 per second against 3 per
// 10 s gets 3 in total under extend (it never pauses for W) and under
// restart (its refusals keep moving the window); the algorithm alone gives
// 3 per window.
func TestPenaltyNeverPausing(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingLog, SlidingWindowCounter} {
		for _, p := range []Penalty{{}, extend, restart} {
			cfg := Config{Algorithm: alg, Limit: 3, Window: 10 * sec, Penalty: p}
			t.Run(fmt.Sprintf("%s/%s", alg, p.Kind), func(t *testing.T) {
				var st State
				got := make([]int, 6)
				for i := range 2 * 10 * len(got) {
					var d Decision
					st, d = cfg.Step(st, t0.Add(time.Duration(i)*500*ms))
					if d.Allowed {
						got[i/20]++
					}
				}
				want := []int{3, 3, 3, 3, 3, 3}
				if !p.IsZero() {
					want = []int{3, 0, 0, 0, 0, 0}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("admitted per 10 s = %v, want %v", got, want)
				}
			})
		}
	}
}

// TestForgetIdle: a key is forgotten ForgetIdle after its last request,
// admitted or refused; RetryAfter never exceeds that.
func TestForgetIdle(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "token-bucket: a full bucket after 3 s of silence, not 10 s of refill",
		cfg:  Config{Algorithm: TokenBucket, Rate: 0.1, Capacity: 2, ForgetIdle: 3 * sec},
		reqs: []req{
			{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{0, false, 0, 3 * sec, 0},       // refill alone: 10 s
			{2 * sec, false, 0, 3 * sec, 0}, // a refusal is a request too
			{5*sec - us, false, 0, 3 * sec, 0},
			{8*sec - us, true, 1, 0, 0},
			{8*sec - us, true, 0, 0, 0},
		},
	}, {
		name: "gcra",
		cfg:  Config{Algorithm: GCRA, Rate: 0.1, Capacity: 1, ForgetIdle: 4 * sec},
		reqs: []req{
			{0, true, 0, 0, 0},
			{1 * sec, false, 0, 4 * sec, 0}, // nginx alone: 9 s
			{5 * sec, true, 0, 0, 0},
		},
	}, {
		name: "fixed-window",
		cfg:  Config{Algorithm: FixedWindow, Limit: 1, Window: time.Hour, ForgetIdle: 30 * sec},
		reqs: []req{{0, true, 0, 0, 0}, {10 * sec, false, 0, 30 * sec, 0}, {40 * sec, true, 0, 0, 0}},
	}, {
		name: "sliding-log",
		cfg:  Config{Algorithm: SlidingLog, Limit: 1, Window: time.Hour, ForgetIdle: 30 * sec},
		reqs: []req{{0, true, 0, 0, 0}, {30 * sec, true, 0, 0, 0}, {40 * sec, false, 0, 30 * sec, 0}},
	}, {
		name: "sliding-window-counter",
		cfg:  Config{Algorithm: SlidingWindowCounter, Limit: 1, Window: time.Hour, ForgetIdle: 30 * sec},
		reqs: []req{{0, true, 0, 0, 0}, {29 * sec, false, 0, 30 * sec, 0}, {59 * sec, true, 0, 0, 0}},
	}, {
		name: "a block is forgotten too",
		cfg:  Config{Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Penalty: block(time.Hour), ForgetIdle: 30 * sec},
		reqs: []req{{0, true, 0, 0, 0}, {1 * sec, false, 0, 30 * sec, 0}, {31 * sec, true, 0, 0, 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestRefillWhole: one token at each tick t₀ + k/rate of the key's own
// grid, kept while the bucket is full.
func TestRefillWhole(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "token-bucket: drained again at 5 s, the next token comes at the grid's 5.5 s, not 6 s",
		cfg:  Config{Algorithm: TokenBucket, Rate: 1, Capacity: 2, Refill: RefillWhole},
		reqs: []req{
			{500 * ms, true, 1, 0, 0}, // t₀ = 0.5 s: ticks at 1.5 s, 2.5 s, …
			{1 * sec, true, 0, 0, 0},
			{1200 * ms, false, 0, 300 * ms, 0},
			{1500 * ms, true, 0, 0, 0},
			{5 * sec, true, 1, 0, 0}, // full since 3.5 s
			{5 * sec, true, 0, 0, 0},
			{5 * sec, false, 0, 500 * ms, 0}, // continuous: 1 s
			{5500 * ms, true, 0, 0, 0},
		},
	}, {
		name: "gcra: the same on nginx's millisecond clock",
		cfg:  Config{Algorithm: GCRA, Rate: 1, Capacity: 2, Refill: RefillWhole},
		reqs: []req{
			{500 * ms, true, 1, 0, 0},
			{1 * sec, true, 0, 0, 0},
			{1200 * ms, false, 0, 300 * ms, 0},
			{1500 * ms, true, 0, 0, 0},
			{5 * sec, true, 1, 0, 0},
			{5 * sec, true, 0, 0, 0},
			{5 * sec, false, 0, 500 * ms, 0},
			{5500 * ms, true, 0, 0, 0},
		},
	}, {
		name: "gcra at 7r/m: tick k at ceil(k·10⁶/116) ms",
		cfg:  Config{Algorithm: GCRA, Rate: 7.0 / 60, Capacity: 1, Refill: RefillWhole},
		reqs: []req{
			{0, true, 0, 0, 0},
			{0, false, 0, 8621 * ms, 0},
			{8621 * ms, true, 0, 0, 0},
			{9 * sec, false, 0, 8242 * ms, 0}, // tick 2 at 17242 ms
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestRefillInterval: the whole capacity at each tick Phase + k·C/rate of
// a timer shared by every key; a fixed window from outside.
func TestRefillInterval(t *testing.T) {
	tb := Config{Algorithm: TokenBucket, Rate: 1, Capacity: 3, Refill: RefillInterval, Phase: 500 * ms} // ticks at …, t0+0.5s, t0+3.5s
	run(t, tb, seq(
		[]req{{0, true, 2, 0, 0}, {0, true, 1, 0, 0}, {0, true, 0, 0, 0}, {0, false, 0, 500 * ms, 0}},
		[]req{{500 * ms, true, 2, 0, 0}, {3 * sec, true, 1, 0, 0}, {3 * sec, true, 0, 0, 0}, {3 * sec, false, 0, 500 * ms, 0}, {3500 * ms, true, 2, 0, 0}},
	))
	g := Config{Algorithm: GCRA, Rate: 2, Capacity: 3, Refill: RefillInterval} // period 1.5 s
	run(t, g, seq(
		[]req{{1 * sec, true, 2, 0, 0}, {1 * sec, true, 1, 0, 0}, {1 * sec, true, 0, 0, 0}, {1 * sec, false, 0, 500 * ms, 0}},
		[]req{{1500 * ms, true, 2, 0, 0}},
	))
	if p := tb.RefillPeriod(); p != 3*sec {
		t.Errorf("RefillPeriod of 3 at 1/s = %v, want 3s", p)
	}
	if p := (Config{Algorithm: GCRA, Rate: 7.0 / 60, Capacity: 1}).RefillPeriod(); p != 8620690*us {
		t.Errorf("RefillPeriod of 1 at 7r/m = %v, want 8.62069s (10⁹/116 µs rounded up)", p)
	}
}

// TestAlignTimer: windows start at Phase + k·W.
func TestAlignTimer(t *testing.T) {
	fw := Config{Algorithm: FixedWindow, Limit: 2, Window: 10 * sec, Align: AlignTimer, Phase: 3 * sec}
	run(t, fw, []req{
		{0, true, 1, 0, 0}, {0, true, 0, 0, 0},
		{1 * sec, false, 0, 2 * sec, 0}, // window [−7s, 3s)
		{3 * sec, true, 1, 0, 0},
	})
	swc := Config{Algorithm: SlidingWindowCounter, Limit: 2, Window: 10 * sec, Align: AlignTimer, Phase: 3 * sec}
	run(t, swc, []req{
		{3 * sec, true, 1, 0, 0}, {3 * sec, true, 0, 0, 0},
		{4 * sec, false, 0, 9*sec + us, 0}, // the edge at 13 s, then 1 µs of decay
		{13*sec + us, true, 0, 0, 0},
	})
}

// TestStoreForgetIdle: a Store drops a key idle for ForgetIdle, and the
// key comes back with a full quota.
func TestStoreForgetIdle(t *testing.T) {
	cfg := Config{Algorithm: FixedWindow, Limit: 1, Window: time.Hour, ForgetIdle: time.Second}
	s := NewStore(cfg, StoreOptions{})
	for i := range 10 {
		s.Decide("k"+strconv.Itoa(i), t0)
	}
	if d := s.Decide("k0", t0.Add(500*ms)); d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("k0 at +0.5s: %+v, want refused with RetryAfter 1s", d)
	}
	s.Decide("other", t0.Add(1200*ms))
	if n := s.Len(); n != 2 {
		t.Errorf("at +1.2s: Len() = %d, want 2 (k0, refused at +0.5s, and other)", n)
	}
	if d := s.Decide("k0", t0.Add(1500*ms)); !d.Allowed {
		t.Errorf("k0 at +1.5s, idle for 1 s: %+v, want a full quota", d)
	}
}
