package limiter

import (
	"fmt"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// t0 is the start of every table: a Unix time on a day boundary, so windows
// of a second, a minute or an hour aligned to the epoch have an edge at t0.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	us  = time.Microsecond
	ms  = time.Millisecond
	sec = time.Second
)

// req is one request of a spec table: when it arrives (after t0) and what
// the limiter must answer.
type req struct {
	at    time.Duration
	ok    bool
	rem   int64         // Decision.Remaining
	retry time.Duration // Decision.RetryAfter of a rejection
	delay time.Duration // Decision.Delay of an admitted request (leaky-bucket)
}

func (r req) String() string {
	s := fmt.Sprintf("{ok=%v rem=%d", r.ok, r.rem)
	if r.retry != 0 {
		s += fmt.Sprintf(" retry=%v", r.retry)
	}
	if r.delay != 0 {
		s += fmt.Sprintf(" delay=%v", r.delay)
	}
	return s + "}"
}

// n repeats r k times (k requests at the same instant with the same answer).
func n(k int, r req) []req {
	out := make([]req, k)
	for i := range out {
		out[i] = r
	}
	return out
}

// seq concatenates request lists.
func seq(parts ...[]req) []req {
	var out []req
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// run steps cfg through reqs from the zero State and checks every answer.
func run(t *testing.T, cfg Config, reqs []req) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", cfg, err)
	}
	var st State
	for i, r := range reqs {
		var d Decision
		st, d = cfg.Step(st, t0.Add(r.at))
		got := req{at: r.at, ok: d.Allowed, rem: d.Remaining, retry: d.RetryAfter, delay: d.Delay}
		if got != r {
			t.Errorf("request %d: Step(t0+%v) = %v, want %v", i+1, r.at, got, r)
		}
	}
}

func mustRate(t *testing.T, s string) float64 {
	t.Helper()
	r, err := units.ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNginxWorkedResults replays the worked results of nginx limit_req
// (ratelimit-standards.md §3.3), computed with nginx's integer formulas.
func TestNginxWorkedResults(t *testing.T) {
	oneRPM := mustRate(t, "1r/m")
	tests := []struct {
		name string
		cfg  Config
		reqs []req
	}{{
		name: "rate=1r/s burst=3 nodelay: 8 simultaneous → 4 pass, 4 rejected; then one per second",
		cfg:  Config{Algorithm: GCRA, Rate: 1, Capacity: 4},
		reqs: seq(
			[]req{{0, true, 3, 0, 0}, {0, true, 2, 0, 0}, {0, true, 1, 0, 0}, {0, true, 0, 0, 0}},
			n(4, req{0, false, 0, 1 * sec, 0}),
			[]req{
				{500 * ms, false, 0, 500 * ms, 0}, // recovery is not before T = 1 s
				{999 * ms, false, 0, 1 * ms, 0},
				{1 * sec, true, 0, 0, 0},
				{1500 * ms, false, 0, 500 * ms, 0},
				{2 * sec, true, 0, 0, 0},
				{6 * sec, true, 3, 0, 0}, // idle 4 s: full again
			},
		),
	}, {
		name: "leaky-bucket with nodelay decides as gcra",
		cfg:  Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true},
		reqs: seq(
			[]req{{0, true, 3, 0, 0}, {0, true, 2, 0, 0}, {0, true, 1, 0, 0}, {0, true, 0, 0, 0}},
			n(4, req{0, false, 0, 1 * sec, 0}),
		),
	}, {
		name: "rate=1r/s burst=3 (no nodelay): 1 at once, 3 delayed 1/2/3 s, 4 rejected",
		cfg:  Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4},
		reqs: seq(
			[]req{{0, true, 3, 0, 0}, {0, true, 2, 0, 1 * sec}, {0, true, 1, 0, 2 * sec}, {0, true, 0, 0, 3 * sec}},
			n(4, req{0, false, 0, 1 * sec, 0}),
			[]req{{1 * sec, true, 0, 0, 3 * sec}}, // the queue is still 3 deep
		),
	}, {
		name: "rate=1r/s burst=5 delay=2: 3 at once, 3 delayed 1/2/3 s, 2 rejected",
		cfg:  Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 6, Delay: 2},
		reqs: seq(
			[]req{{0, true, 5, 0, 0}, {0, true, 4, 0, 0}, {0, true, 3, 0, 0}},
			[]req{{0, true, 2, 0, 1 * sec}, {0, true, 1, 0, 2 * sec}, {0, true, 0, 0, 3 * sec}},
			n(2, req{0, false, 0, 1 * sec, 0}),
		),
	}, {
		name: "rate=1r/m burst=0: 0 s pass, 60 s reject, 62 s reject, 62.5 s pass (T = 62.5 s)",
		cfg:  Config{Algorithm: GCRA, Rate: oneRPM, Capacity: 1},
		reqs: []req{
			{0, true, 0, 0, 0},
			{60 * sec, false, 0, 2500 * ms, 0}, // excess 40
			{62 * sec, false, 0, 500 * ms, 0},  // excess 8
			{62500*ms - 1*us, false, 0, 1 * us, 0},
			{62500 * ms, true, 0, 0, 0},
		},
	}, {
		name: "rate=7r/m: 116 milli-requests/s, T = 8.6207 s → next pass at 8621 ms",
		cfg:  Config{Algorithm: GCRA, Rate: mustRate(t, "7r/m"), Capacity: 1},
		reqs: []req{
			{0, true, 0, 0, 0},
			{8620 * ms, false, 0, 1 * ms, 0},
			{8621 * ms, true, 0, 0, 0},
		},
	}, {
		name: "burst=0 at 10r/s: a second request 10 ms later is rejected",
		cfg:  Config{Algorithm: GCRA, Rate: 10, Capacity: 1},
		reqs: []req{{0, true, 0, 0, 0}, {10 * ms, false, 0, 90 * ms, 0}, {100 * ms, true, 0, 0, 0}},
	}, {
		name: "nginx's ms clock: 999 µs later is the same millisecond",
		cfg:  Config{Algorithm: GCRA, Rate: 1000, Capacity: 1},
		reqs: []req{{0, true, 0, 0, 0}, {999 * us, false, 0, 1 * us, 0}, {1 * ms, true, 0, 0, 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, tt.cfg, tt.reqs) })
	}
}

// TestFixedWindow: Limit per window; windows aligned to the epoch or
// anchored at a key's first request.
func TestFixedWindow(t *testing.T) {
	epoch := Config{Algorithm: FixedWindow, Limit: 3, Window: 10 * sec, Align: AlignEpoch}
	anchored := Config{Algorithm: FixedWindow, Limit: 3, Window: 10 * sec} // first-request by default
	t.Run("epoch: window [t0, t0+10s) then a fresh one at the edge", func(t *testing.T) {
		run(t, epoch, []req{
			{4 * sec, true, 2, 0, 0},
			{5 * sec, true, 1, 0, 0},
			{6 * sec, true, 0, 0, 0},
			{7 * sec, false, 0, 3 * sec, 0}, // until the edge at t0+10s
			{10*sec - us, false, 0, 1 * us, 0},
			{10 * sec, true, 2, 0, 0},
		})
	})
	t.Run("first-request: the window opens at the first request", func(t *testing.T) {
		run(t, anchored, []req{
			{4 * sec, true, 2, 0, 0},
			{5 * sec, true, 1, 0, 0},
			{6 * sec, true, 0, 0, 0},
			{10 * sec, false, 0, 4 * sec, 0}, // window is [t0+4s, t0+14s)
			{14 * sec, true, 2, 0, 0},        // new window [t0+14s, t0+24s)
			{23 * sec, true, 1, 0, 0},
			{24 * sec, true, 2, 0, 0},
		})
	})
	t.Run("count-rejected changes no decision", func(t *testing.T) {
		c := epoch
		c.CountRejected = true
		run(t, c, []req{
			{0, true, 2, 0, 0}, {0, true, 1, 0, 0}, {0, true, 0, 0, 0},
			{1 * sec, false, 0, 9 * sec, 0}, {2 * sec, false, 0, 8 * sec, 0},
			{10 * sec, true, 2, 0, 0},
		})
	})
}

// TestSlidingLog: fewer than Limit counted in (now−W, now].
func TestSlidingLog(t *testing.T) {
	cfg := Config{Algorithm: SlidingLog, Limit: 3, Window: 10 * sec}
	run(t, cfg, []req{
		{0, true, 2, 0, 0},
		{2 * sec, true, 1, 0, 0},
		{4 * sec, true, 0, 0, 0},
		{5 * sec, false, 0, 5 * sec, 0},    // until t0 leaves the window
		{10 * sec, true, 0, 0, 0},          // t0 is out: (t0, t0+10s]
		{11 * sec, false, 0, 1 * sec, 0},   // until t0+2s leaves
		{12 * sec, true, 0, 0, 0},          //
		{25 * sec, true, 2, 0, 0},          // (15s, 25s] is empty again
		{25 * sec, true, 1, 0, 0},          //
		{25 * sec, true, 0, 0, 0},          //
		{25 * sec, false, 0, 10 * sec, 0},  //
		{35*sec - us, false, 0, 1 * us, 0}, // the three are in until 35s
		{35 * sec, true, 2, 0, 0},          // all three leave at once
		{35 * sec, true, 1, 0, 0},          //
		{35 * sec, true, 0, 0, 0},          //
		{35*sec + us, false, 0, 10*sec - us, 0},
	})
}

// TestSlidingWindowCounter: floor(prev·(W−elapsed)/W) + curr < Limit.
func TestSlidingWindowCounter(t *testing.T) {
	cfg := Config{Algorithm: SlidingWindowCounter, Limit: 4, Window: 10 * sec} // epoch by default
	run(t, cfg, []req{
		{9 * sec, true, 3, 0, 0},
		{9 * sec, true, 2, 0, 0},
		{9 * sec, true, 1, 0, 0},
		{9 * sec, true, 0, 0, 0},
		{9 * sec, false, 0, 1*sec + 1*us, 0},      // at t0+10s+1µs: floor(4·(10s−1µs)/10s) = 3
		{10 * sec, false, 0, 1 * us, 0},           // floor(4·10/10) + 0 = 4
		{10*sec + us, true, 0, 0, 0},              // 3 + 0 < 4; now 3 + 1 = 4
		{12500 * ms, false, 0, 1 * us, 0},         // floor(4·7.5/10) + 1 = 4
		{12500*ms + us, true, 0, 0, 0},            // 2 + 1 < 4
		{20 * sec, true, 1, 0, 0},                 // prev = 2: floor(2·10/10) + 0 = 2 → 3 after
		{30*sec + 1*us, true, 3, 0, 0},            // prev = 1: floor(1·(10s−1µs)/10s) = 0
		{50 * sec, true, 3, 0, 0},                 // two idle windows: nothing remembered
		{50 * sec, true, 2, 0, 0},                 //
		{50 * sec, true, 1, 0, 0},                 //
		{50 * sec, true, 0, 0, 0},                 //
		{59*sec + 999999*us, false, 0, 2 * us, 0}, // curr = 4 until the edge…
		{60 * sec, false, 0, 1 * us, 0},           // …and at the edge prev·(W−0)/W = 4
	})
	t.Run("anchored at the first request", func(t *testing.T) {
		c := cfg
		c.Align = AlignFirstRequest
		run(t, c, []req{
			{3 * sec, true, 3, 0, 0}, // window [3s, 13s)
			{3 * sec, true, 2, 0, 0},
			{3 * sec, true, 1, 0, 0},
			{3 * sec, true, 0, 0, 0},
			{12 * sec, false, 0, 1*sec + 1*us, 0},
			{13*sec + us, true, 0, 0, 0}, // next window [13s, 23s)
			{33 * sec, true, 3, 0, 0},    // ≥ 2 windows idle: re-anchored at 33s
			{43*sec - us, true, 2, 0, 0}, // still [33s, 43s)
			{43 * sec, true, 1, 0, 0},    // [43s, 53s): prev = 2, floor(2·10/10) + 1 = 3
		})
	})
}

// TestTokenBucket: capacity, continuous refill, initially full.
func TestTokenBucket(t *testing.T) {
	cfg := Config{Algorithm: TokenBucket, Rate: 2, Capacity: 3} // a token every 500 ms
	run(t, cfg, []req{
		{0, true, 2, 0, 0},
		{0, true, 1, 0, 0},
		{0, true, 0, 0, 0},
		{0, false, 0, 500 * ms, 0},
		{499 * ms, false, 0, 1 * ms, 0},
		{500 * ms, true, 0, 0, 0},
		{1250 * ms, true, 0, 0, 0}, // 1.5 tokens had accumulated: 0.5 left
		{1500 * ms, true, 0, 0, 0}, // 0.5 + 0.5
		{3 * sec, true, 2, 0, 0},   // full again at 3 s (not more than capacity)
		{10 * sec, true, 2, 0, 0},
	})
}

// TestWindowEdge is the edge probe (P3): a burst of Limit just before a
// window edge, another at the edge. A fixed window passes 2N within 100 ms;
// the sliding algorithms and buckets pass N.
func TestWindowEdge(t *testing.T) {
	const N = 5
	tests := []struct {
		cfg  Config
		want int
	}{
		{Config{Algorithm: FixedWindow, Limit: N, Window: 10 * sec, Align: AlignEpoch}, 2 * N},
		{Config{Algorithm: FixedWindow, Limit: N, Window: 10 * sec, Align: AlignFirstRequest}, N}, // no edge at t0+10s
		{Config{Algorithm: SlidingLog, Limit: N, Window: 10 * sec}, N},
		{Config{Algorithm: SlidingWindowCounter, Limit: N, Window: 10 * sec}, N},
		{Config{Algorithm: TokenBucket, Rate: N / 10.0, Capacity: N}, N},
		{Config{Algorithm: GCRA, Rate: N / 10.0, Capacity: N}, N},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%s", tt.cfg.Algorithm, tt.cfg.Align)
		t.Run(name, func(t *testing.T) {
			var st State
			passed := 0
			for _, at := range []time.Duration{9900 * ms, 10 * sec} {
				for range N {
					var d Decision
					st, d = tt.cfg.Step(st, t0.Add(at))
					if d.Allowed {
						passed++
					}
				}
			}
			if passed != tt.want {
				t.Errorf("%d requests at t0+9.9s and %d at t0+10s: %d passed, want %d", N, N, passed, tt.want)
			}
		})
	}
}

// avail returns how many requests a burst at at would pass, from st,
// without changing st.
func avail(cfg Config, st State, at time.Time) int {
	k := 0
	for ; k < 1000; k++ {
		var d Decision
		st, d = cfg.Step(st, at)
		if !d.Allowed {
			break
		}
	}
	return k
}

// TestRecoveryShape is the recovery probe (P4): exhaust, then measure what
// a burst would get at later instants. Each algorithm has its own shape.
func TestRecoveryShape(t *testing.T) {
	type probe struct {
		at    time.Duration
		avail int
	}
	tests := []struct {
		name    string
		cfg     Config
		exhaust []time.Duration // admitted requests that exhaust the quota
		probes  []probe
	}{{
		name:    "fixed-window: a step at the edge",
		cfg:     Config{Algorithm: FixedWindow, Limit: 4, Window: 10 * sec, Align: AlignEpoch},
		exhaust: []time.Duration{1 * sec, 2 * sec, 3 * sec, 4 * sec},
		probes:  []probe{{5 * sec, 0}, {10*sec - us, 0}, {10 * sec, 4}, {15 * sec, 4}},
	}, {
		name:    "sliding-log: mirrors the send times, shifted by W",
		cfg:     Config{Algorithm: SlidingLog, Limit: 4, Window: 10 * sec},
		exhaust: []time.Duration{0, 1 * sec, 2 * sec, 3 * sec},
		probes:  []probe{{10*sec - us, 0}, {10 * sec, 1}, {11*sec - us, 1}, {11 * sec, 2}, {12 * sec, 3}, {13 * sec, 4}, {30 * sec, 4}},
	}, {
		name:    "sliding-window-counter: a linear ramp from the next edge, one per W/N",
		cfg:     Config{Algorithm: SlidingWindowCounter, Limit: 4, Window: 10 * sec},
		exhaust: []time.Duration{9 * sec, 9 * sec, 9 * sec, 9 * sec},
		probes: []probe{
			{10 * sec, 0}, {10*sec + us, 1}, {12500 * ms, 1}, {12500*ms + us, 2},
			{15 * sec, 2}, {15*sec + us, 3}, {17500 * ms, 3}, {17500*ms + us, 4}, {20 * sec, 4},
		},
	}, {
		name:    "token-bucket: one per 1/rate from exhaustion",
		cfg:     Config{Algorithm: TokenBucket, Rate: 0.4, Capacity: 4},
		exhaust: []time.Duration{3 * sec, 3 * sec, 3 * sec, 3 * sec},
		probes:  []probe{{5500*ms - us, 0}, {5500 * ms, 1}, {8 * sec, 2}, {10500 * ms, 3}, {13 * sec, 4}, {60 * sec, 4}},
	}, {
		name:    "gcra: one per T from exhaustion",
		cfg:     Config{Algorithm: GCRA, Rate: 1, Capacity: 4},
		exhaust: []time.Duration{3 * sec, 3 * sec, 3 * sec, 3 * sec},
		probes:  []probe{{3999 * ms, 0}, {4 * sec, 1}, {5 * sec, 2}, {7 * sec, 4}, {60 * sec, 4}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for _, at := range tt.exhaust {
				var d Decision
				st, d = tt.cfg.Step(st, t0.Add(at))
				if !d.Allowed {
					t.Fatalf("exhausting request at t0+%v rejected", at)
				}
			}
			for _, p := range tt.probes {
				if got := avail(tt.cfg, st, t0.Add(p.at)); got != p.avail {
					t.Errorf("a burst at t0+%v passes %d, want %d", p.at, got, p.avail)
				}
			}
		})
	}
}

// TestSustainedOverLimit is probe P2: 2 requests/s for 60 s against 10 per
// 10 s. Where rejected requests count (HAProxy track-before-deny, a sliding
// log that logs before counting), the client is locked out after the first
// window; otherwise acceptance settles at the limit.
func TestSustainedOverLimit(t *testing.T) {
	tests := []struct {
		cfg  Config
		want []int // admitted per 10 s window
	}{
		{Config{Algorithm: SlidingWindowCounter, Limit: 10, Window: 10 * sec}, []int{10, 10, 10, 10, 10, 10}},
		{Config{Algorithm: SlidingWindowCounter, Limit: 10, Window: 10 * sec, CountRejected: true}, []int{10, 0, 0, 0, 0, 0}},
		{Config{Algorithm: SlidingWindowCounter, Limit: 10, Window: 10 * sec, Align: AlignFirstRequest, CountRejected: true}, []int{10, 0, 0, 0, 0, 0}},
		{Config{Algorithm: SlidingLog, Limit: 10, Window: 10 * sec}, []int{10, 10, 10, 10, 10, 10}},
		{Config{Algorithm: SlidingLog, Limit: 10, Window: 10 * sec, CountRejected: true}, []int{10, 0, 0, 0, 0, 0}},
		{Config{Algorithm: FixedWindow, Limit: 10, Window: 10 * sec, Align: AlignEpoch}, []int{10, 10, 10, 10, 10, 10}},
		{Config{Algorithm: FixedWindow, Limit: 10, Window: 10 * sec, Align: AlignEpoch, CountRejected: true}, []int{10, 10, 10, 10, 10, 10}},
		{Config{Algorithm: TokenBucket, Rate: 1, Capacity: 10}, []int{19, 10, 10, 10, 10, 10}},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s/%s/count-rejected=%v", tt.cfg.Algorithm, tt.cfg.Align, tt.cfg.CountRejected)
		t.Run(name, func(t *testing.T) {
			var st State
			got := make([]int, len(tt.want))
			for i := range 2 * 10 * len(tt.want) {
				var d Decision
				st, d = tt.cfg.Step(st, t0.Add(time.Duration(i)*500*ms))
				if d.Allowed {
					got[i/20]++
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("admitted per window = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecisionHeaders pins UntilMore and UntilFull, the values behind the
// RateLimit t and reset parameters.
func TestDecisionHeaders(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		at      []time.Duration // requests before and including the one checked
		wantRem int64
		more    time.Duration
		full    time.Duration
	}{
		{"fixed-window: reset is the edge", Config{Algorithm: FixedWindow, Limit: 3, Window: 10 * sec, Align: AlignEpoch},
			[]time.Duration{2 * sec, 4 * sec}, 1, 0, 6 * sec},
		{"fixed-window exhausted: more at the edge", Config{Algorithm: FixedWindow, Limit: 2, Window: 10 * sec, Align: AlignEpoch},
			[]time.Duration{2 * sec, 4 * sec}, 0, 6 * sec, 6 * sec},
		{"sliding-log: more when the oldest leaves, full when the newest does", Config{Algorithm: SlidingLog, Limit: 2, Window: 10 * sec},
			[]time.Duration{2 * sec, 4 * sec}, 0, 8 * sec, 10 * sec},
		{"sliding-window-counter: more just after the edge, full once the estimate is 0", Config{Algorithm: SlidingWindowCounter, Limit: 2, Window: 10 * sec},
			[]time.Duration{2 * sec, 4 * sec}, 0, 6*sec + us, 11*sec + us},
		{"token-bucket: more after one interval, full after capacity intervals", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 3},
			[]time.Duration{0, 0, 0}, 0, 1 * sec, 3 * sec},
		{"gcra: full after (excess+1000)/rate", Config{Algorithm: GCRA, Rate: 2, Capacity: 3},
			[]time.Duration{0, 0}, 1, 0, 1 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			var d Decision
			for _, at := range tt.at {
				st, d = tt.cfg.Step(st, t0.Add(at))
			}
			if d.Remaining != tt.wantRem || d.UntilMore != tt.more || d.UntilFull != tt.full || d.Limit != tt.cfg.Quota() {
				t.Errorf("last decision = %+v, want Limit %d Remaining %d UntilMore %v UntilFull %v",
					d, tt.cfg.Quota(), tt.wantRem, tt.more, tt.full)
			}
		})
	}
}
