package verify

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

const ms = int64(1e6)

// iv builds intervals from [lo, hi] pairs in milliseconds.
func ivs(pairs ...[2]int64) []Interval {
	out := make([]Interval, len(pairs))
	for i, p := range pairs {
		out[i] = Interval{Lo: p[0] * ms, Hi: p[1] * ms}
	}
	return out
}

func TestMaxInWindowHandComputed(t *testing.T) {
	tests := []struct {
		name              string
		iv                []Interval
		w                 int64 // ms
		certain, possible int
	}{
		{"empty", nil, 1000, 0, 0},
		{"one", ivs([2]int64{0, 1}), 1000, 1, 1},
		// Points 0, 500, 999 fit in 1000 ms; 1000 does not join 0
		// (half-open), but joins 500 and 999.
		{"points at the boundary", ivs([2]int64{0, 0}, [2]int64{500, 500}, [2]int64{999, 999}, [2]int64{1000, 1000}), 1000, 3, 3},
		// Two requests 990 ms apart with 10 ms of uncertainty each: the
		// certain span is max(hi) − min(lo) = 1000 − 0 = 1000, not < 1000;
		// the possible span max(lo) − min(hi) = 990 − 10 = 980 < 1000.
		{"uncertainty makes it possible only", ivs([2]int64{0, 10}, [2]int64{990, 1000}), 1000, 1, 2},
		// Same with 9 ms: certain span 999 < 1000.
		{"tight enough to be certain", ivs([2]int64{0, 9}, [2]int64{990, 999}), 1000, 2, 2},
		// A wide interval is possibly with everyone, certainly with no one.
		{"wide interval", ivs([2]int64{0, 5000}, [2]int64{2000, 2001}, [2]int64{2500, 2501}), 1000, 2, 3},
		// Edge straddle: 5 just before 2000, 5 just after: 10 in 40 ms.
		{"edge straddle", ivs(
			[2]int64{1980, 1981}, [2]int64{1982, 1983}, [2]int64{1984, 1985}, [2]int64{1986, 1987}, [2]int64{1988, 1989},
			[2]int64{2010, 2011}, [2]int64{2012, 2013}, [2]int64{2014, 2015}, [2]int64{2016, 2017}, [2]int64{2018, 2019},
		), 2000, 10, 10},
		// An honest sliding log at 5 per 2000 ms seen with 10 ms of
		// uncertainty: the second group may have arrived within 2000 ms
		// of the first (min hi 10, max lo 1995), but not certainly.
		{"sliding log with uncertainty", ivs(
			[2]int64{0, 10}, [2]int64{0, 10}, [2]int64{0, 10}, [2]int64{0, 10}, [2]int64{0, 10},
			[2]int64{1995, 2005}, [2]int64{1995, 2005}, [2]int64{1995, 2005}, [2]int64{1995, 2005}, [2]int64{1995, 2005},
		), 2000, 5, 10},
	}
	for _, tt := range tests {
		c, p := MaxInWindow(tt.iv, tt.w*ms)
		if c.Count != tt.certain || p.Count != tt.possible {
			t.Errorf("%s: MaxInWindow = certain %d, possible %d; want %d, %d", tt.name, c.Count, p.Count, tt.certain, tt.possible)
		}
		if c.Count > 0 && c.End-c.Start >= tt.w*ms {
			t.Errorf("%s: certain evidence spans %d ns, not < w", tt.name, c.End-c.Start)
		}
		if len(c.Members) != c.Count || len(p.Members) != p.Count {
			t.Errorf("%s: members %d/%d do not match counts %d/%d", tt.name, len(c.Members), len(p.Members), c.Count, p.Count)
		}
	}
}

// bruteWindow is the definition, O(n²).
func bruteWindow(iv []Interval, w int64) (int, int) {
	c, p := 0, 0
	for _, a := range iv {
		nc, np := 0, 0
		for _, b := range iv {
			if b.Lo >= a.Lo && b.Hi < a.Lo+w {
				nc++
			}
			if b.Hi >= a.Hi && b.Lo < a.Hi+w {
				np++
			}
		}
		c, p = max(c, nc), max(p, np)
	}
	return c, p
}

func randomIntervals(r *rand.Rand, n int) []Interval {
	out := make([]Interval, n)
	for i := range out {
		lo := r.Int64N(100)
		out[i] = Interval{Lo: lo, Hi: lo + r.Int64N(8)}
	}
	return out
}

func TestMaxInWindowMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		iv := randomIntervals(r, 1+r.IntN(30))
		w := 1 + r.Int64N(40)
		c, p := MaxInWindow(iv, w)
		bc, bp := bruteWindow(iv, w)
		if c.Count != bc || p.Count != bp {
			t.Fatalf("trial %d: w=%d %v: got %d/%d, definition %d/%d", trial, w, iv, c.Count, p.Count, bc, bp)
		}
		for _, m := range c.Members {
			if iv[m].Lo < c.Start || iv[m].Hi > c.End {
				t.Fatalf("trial %d: member %v outside certain evidence [%d, %d]", trial, iv[m], c.Start, c.End)
			}
		}
	}
}

func TestFixedWindowsEpoch(t *testing.T) {
	// Windows of 2 s at multiples of 2 s since the epoch; the run starts
	// at Unix time 1001.5 s, so relative 0.5 s is an edge (1002 s).
	origin := int64(1001500) * ms
	w := 2000 * ms
	iv := ivs(
		[2]int64{100, 101}, [2]int64{200, 201}, [2]int64{300, 301}, // window [−1500, 500)
		[2]int64{499, 501}, // straddles the edge at 500: possible in both
		[2]int64{600, 601}, [2]int64{700, 701},
	)
	wins := EpochWindows(origin, iv[0].Lo, iv[len(iv)-1].Hi, w)
	if len(wins) != 2 || wins[1].StartLo != 500*ms {
		t.Fatalf("EpochWindows = %+v; want 2 windows, the second at 500 ms", wins)
	}
	c, p := MaxInFixedWindows(iv, wins)
	if c.Count != 3 || p.Count != 4 {
		t.Errorf("MaxInFixedWindows = certain %d, possible %d; want 3, 4", c.Count, p.Count)
	}
}

func TestFirstRequestWindows(t *testing.T) {
	w := 1000 * ms
	tests := []struct {
		name   string
		all    []Interval
		starts [][2]int64 // ms
	}{
		// Requests at 0, 300, 1200 (new window), 2100 (in [1200, 2200)),
		// 2300 (new window).
		{"points", ivs([2]int64{0, 0}, [2]int64{300, 300}, [2]int64{1200, 1200}, [2]int64{2100, 2100}, [2]int64{2300, 2300}),
			[][2]int64{{0, 0}, {1200, 1200}, {2300, 2300}}},
		// A request straddling the end (990..1010) may or may not start
		// the next window; the next certain arrival is 1500.
		{"straddle", ivs([2]int64{0, 0}, [2]int64{990, 1010}, [2]int64{1500, 1500}),
			[][2]int64{{0, 0}, {1000, 1500}}},
		// Busy before the first request: its window opened up to 1 s
		// before; the next opens at the first arrival after 1…2000 ms
		// (1300 or 2200), and from a silence of a window on it is sure.
		{"busy", ivs([2]int64{1000, 1000}, [2]int64{1300, 1300}, [2]int64{2200, 2200}, [2]int64{5000, 5000}),
			[][2]int64{{0, 1000}, {1300, 2200}, {5000, 5000}}},
	}
	for _, tt := range tests {
		got := FirstRequestWindows(tt.all, w, tt.name == "busy")
		var gs [][2]int64
		for _, x := range got {
			gs = append(gs, [2]int64{x.StartLo / ms, x.StartHi / ms})
		}
		if !slices.Equal(gs, tt.starts) {
			t.Errorf("%s: window starts %v; want %v", tt.name, gs, tt.starts)
		}
	}
}

func TestMaxBucketExcessHandComputed(t *testing.T) {
	tests := []struct {
		name     string
		iv       []Interval
		rate     float64 // per second
		maxLen   int64   // ms, 0 = any
		capacity int64
		count    int   // certain count at the worst interval
		bound    int64 // capacity + ⌊rate·L⌋ there
		violated bool
	}{
		// nginx rate=1r/s burst=3: 4 at once then one per second is
		// exactly at the bound.
		{"honest bucket", ivs([2]int64{0, 1}, [2]int64{0, 1}, [2]int64{0, 1}, [2]int64{0, 1},
			[2]int64{1001, 1002}, [2]int64{2001, 2002}, [2]int64{3001, 3002}), 1, 0, 4, 4, 4, false},
		// 6 at once against capacity 4.
		{"burst too big", ivs([2]int64{0, 1}, [2]int64{0, 1}, [2]int64{0, 1}, [2]int64{0, 1}, [2]int64{0, 1}, [2]int64{1, 2}),
			1, 0, 4, 6, 4, true},
		// Rate 2/s against a declared 1/s, capacity 1: over 4 s, 9
		// accepted against 1 + 4 = 5.
		{"rate too high", ivs([2]int64{0, 1}, [2]int64{500, 501}, [2]int64{1000, 1001}, [2]int64{1500, 1501},
			[2]int64{2000, 2001}, [2]int64{2500, 2501}, [2]int64{3000, 3001}, [2]int64{3500, 3501}, [2]int64{3999, 4000}),
			1, 0, 1, 9, 4, true},
		// The same, looked at only within 250 ms: no violation visible.
		{"rate too high, short intervals only", ivs([2]int64{0, 1}, [2]int64{500, 501}, [2]int64{1000, 1001}),
			1, 250, 1, 1, 1, false},
	}
	for _, tt := range tests {
		c, _ := MaxBucketExcess(tt.iv, tt.rate, tt.maxLen*ms)
		got := c.Excess > float64(tt.capacity)+1e-9
		if c.Count != tt.count || got != tt.violated {
			t.Errorf("%s: worst certain set %d (excess %.3f, length %d ns, bound %d); want %d, violated %v",
				tt.name, c.Count, c.Excess, c.Length, c.Bound(tt.capacity, tt.rate), tt.count, tt.violated)
		}
		if b := c.Bound(tt.capacity, tt.rate); tt.violated && int64(c.Count) <= b {
			t.Errorf("%s: violated but count %d ≤ bound %d", tt.name, c.Count, b)
		}
	}
}

// bruteBucket is the definition over all (start, end) pairs, O(n³).
func bruteBucket(iv []Interval, r float64, maxLen int64) (float64, float64) {
	if maxLen <= 0 {
		maxLen = math.MaxInt64
	}
	bc, bp := math.Inf(-1), math.Inf(-1)
	for _, a := range iv {
		for _, b := range iv {
			if s, e := a.Lo, b.Hi; e >= s && e-s < maxLen {
				n := 0
				for _, x := range iv {
					if x.Lo >= s && x.Hi <= e {
						n++
					}
				}
				bc = max(bc, float64(n)-r*float64(e-s))
			}
			if s, e := a.Hi, b.Lo; max(0, e-s) < maxLen {
				n := 0
				for _, x := range iv {
					if x.Hi >= s && x.Lo <= e {
						n++
					}
				}
				bp = max(bp, float64(n)-r*float64(max(0, e-s)))
			}
		}
	}
	return bc, bp
}

func TestMaxBucketExcessMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 1500 {
		iv := randomIntervals(r, 1+r.IntN(20))
		rate := 0.05 + r.Float64()*0.5 // per ns here: scale by 1e9 below
		var maxLen int64
		if r.IntN(2) == 0 {
			maxLen = 1 + r.Int64N(30)
		}
		c, p := MaxBucketExcess(iv, rate*1e9, maxLen)
		bc, bp := bruteBucket(iv, rate, maxLen)
		if math.IsInf(bc, -1) { // no interval short enough
			if c.Count != 0 {
				t.Fatalf("trial %d: no certain interval under maxLen %d, got a set of %d", trial, maxLen, c.Count)
			}
			bc = 0
		}
		if math.Abs(c.Excess-bc) > 1e-6 || math.Abs(p.Excess-bp) > 1e-6 {
			t.Fatalf("trial %d: rate %.3f maxLen %d %v: got %.3f/%.3f, definition %.3f/%.3f", trial, rate, maxLen, iv, c.Excess, p.Excess, bc, bp)
		}
		if want := float64(c.Count) - rate*float64(c.Length); math.Abs(want-c.Excess) > 1e-6 {
			t.Fatalf("trial %d: certain evidence count %d length %d gives %.3f, reported %.3f", trial, c.Count, c.Length, want, c.Excess)
		}
	}
}

func BenchmarkMaxInWindow(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	iv := make([]Interval, 5000)
	for i := range iv {
		lo := r.Int64N(600e9)
		iv[i] = Interval{lo, lo + r.Int64N(2e6)}
	}
	for b.Loop() {
		MaxInWindow(iv, 60e9)
	}
}

func BenchmarkMaxBucketExcess(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	iv := make([]Interval, 5000)
	for i := range iv {
		lo := r.Int64N(600e9)
		iv[i] = Interval{lo, lo + r.Int64N(2e6)}
	}
	for b.Loop() {
		MaxBucketExcess(iv, 10, 0)
	}
}

// bruteUnknown tries every phase (integer times).
func bruteUnknown(iv []Interval, w int64) (int, int) {
	certain, possible := math.MaxInt, 0
	lo, hi := iv[0].Lo, iv[0].Hi
	for _, x := range iv {
		lo, hi = min(lo, x.Lo), max(hi, x.Hi)
	}
	for phase := int64(0); phase < w; phase++ {
		bc, bp := 0, 0
		for k := floorDiv(lo-phase, w) - 1; k <= floorDiv(hi-phase, w)+1; k++ {
			win := Window{StartLo: phase + k*w, StartHi: phase + k*w, Length: w}
			c, p := 0, 0
			for _, x := range iv {
				if win.certainly(x) {
					c++
				}
				if win.possibly(x) {
					p++
				}
			}
			bc, bp = max(bc, c), max(bp, p)
		}
		certain, possible = min(certain, bc), max(possible, bp)
	}
	return certain, possible
}

func TestMaxInUnknownWindows(t *testing.T) {
	// Hand-computed: w = 10, arrivals at 0, 5, 9, 14. Phase 0 puts 0, 5, 9
	// in [0, 10) and phase 5 puts 5, 9, 14 in [5, 15); every other phase
	// holds at most two in a window, and always two somewhere: two are
	// certain whatever the alignment, three possible.
	iv := []Interval{{0, 0}, {5, 5}, {9, 9}, {14, 14}}
	c, p, _, _ := MaxInUnknownWindows(iv, 10)
	if c != 2 || p != 3 {
		t.Errorf("MaxInUnknownWindows = %d, %d; want 2, 3", c, p)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 500 {
		iv := randomIntervals(r, 1+r.IntN(15))
		w := 1 + r.Int64N(30)
		c, p, cph, pph := MaxInUnknownWindows(iv, w)
		bc, bp := bruteUnknown(iv, w)
		if c != bc || p != bp || cph < 0 || cph >= w || pph < 0 || pph >= w {
			t.Fatalf("trial %d: w=%d %v: got %d/%d (phases %d/%d), brute force %d/%d", trial, w, iv, c, p, cph, pph, bc, bp)
		}
	}
}
