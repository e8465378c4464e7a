package limiter

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
)

func TestValidateAccepts(t *testing.T) {
	for _, c := range []Config{
		{Algorithm: FixedWindow, Limit: 100, Window: time.Minute},
		{Algorithm: FixedWindow, Limit: 1, Window: time.Microsecond, Align: AlignEpoch, CountRejected: true},
		{Algorithm: SlidingLog, Limit: 5, Window: 10 * time.Second, CountRejected: true},
		{Algorithm: SlidingWindowCounter, Limit: 20, Window: 10 * time.Second, Align: AlignFirstRequest, CountRejected: true},
		{Algorithm: TokenBucket, Rate: 2.5, Capacity: 10},
		{Algorithm: GCRA, Rate: 1.0 / 60, Capacity: 1},
		{Algorithm: LeakyBucket, Rate: 1, Capacity: 4},
		{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true},
		{Algorithm: LeakyBucket, Rate: 1, Capacity: 6, Delay: 5},
		{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Penalty: Penalty{Kind: PenaltyBlock, Duration: time.Minute}},
		{Algorithm: SlidingLog, Limit: 5, Window: time.Second, Penalty: Penalty{Kind: PenaltyExtend}, ForgetIdle: time.Hour},
		{Algorithm: SlidingWindowCounter, Limit: 5, Window: time.Second, Penalty: Penalty{Kind: PenaltyRestart}, Align: AlignTimer, Phase: 999 * time.Millisecond},
		{Algorithm: SlidingWindowCounter, Limit: 5, Window: time.Second, Penalty: Penalty{Kind: PenaltyExtend}}, // the default epoch is moot
		{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Penalty: Penalty{Kind: PenaltyExtend}, Align: AlignFirstRequest},
		{Algorithm: TokenBucket, Rate: 2, Capacity: 4, Penalty: Penalty{Kind: PenaltyBlock, Duration: time.Second}, Refill: RefillWhole},
		{Algorithm: GCRA, Rate: 2, Capacity: 4, Refill: RefillInterval, Phase: 1999 * time.Millisecond, ForgetIdle: time.Second},
		{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, ForgetIdle: time.Second},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}
}

// TestValidateRejects: every problem is reported at once, each naming its
// field.
func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		fields []string // the fields at fault, in Validate's order
	}{
		{"zero value", Config{}, []string{"algorithm"}},
		{"unknown algorithm", Config{Algorithm: "leaky"}, []string{"algorithm"}},
		{"window algorithm without parameters", Config{Algorithm: FixedWindow}, []string{"limit", "window"}},
		{"negative limit, sub-µs window", Config{Algorithm: SlidingLog, Limit: -1, Window: 1500 * time.Nanosecond}, []string{"limit", "window"}},
		{"limit too large", Config{Algorithm: SlidingLog, Limit: MaxCount + 1, Window: time.Second}, []string{"limit"}},
		{"capacity and rate with fixed-window", Config{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Rate: 1, Capacity: 5}, []string{"rate", "capacity"}},
		{"align with sliding-log", Config{Algorithm: SlidingLog, Limit: 5, Window: time.Second, Align: AlignEpoch}, []string{"align"}},
		{"unknown align", Config{Algorithm: FixedWindow, Limit: 5, Window: time.Second, Align: "midnight"}, []string{"align"}},
		{"nodelay and delay with a window", Config{Algorithm: SlidingWindowCounter, Limit: 5, Window: time.Second, NoDelay: true, Delay: 1}, []string{"nodelay", "delay"}},
		{"limit and window with token-bucket", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 5, Limit: 5, Window: time.Second}, []string{"limit", "window"}},
		{"bucket without parameters", Config{Algorithm: TokenBucket}, []string{"rate", "capacity"}},
		{"NaN rate", Config{Algorithm: TokenBucket, Rate: math.NaN(), Capacity: 1}, []string{"rate"}},
		{"rate too high", Config{Algorithm: TokenBucket, Rate: 2e6, Capacity: 1}, []string{"rate"}},
		{"bucket takes forever to fill", Config{Algorithm: TokenBucket, Rate: 1e-6, Capacity: 10000}, []string{"capacity"}},
		{"rate below nginx's resolution", Config{Algorithm: GCRA, Rate: 0.0009, Capacity: 1}, []string{"rate"}},
		{"align and count-rejected with a bucket", Config{Algorithm: GCRA, Rate: 1, Capacity: 1, Align: AlignEpoch, CountRejected: true}, []string{"align", "count_rejected"}},
		{"nodelay with gcra", Config{Algorithm: GCRA, Rate: 1, Capacity: 4, NoDelay: true}, []string{"nodelay"}},
		{"delay with token-bucket", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 4, Delay: 1}, []string{"delay"}},
		{"delay ≥ capacity", Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, Delay: 4}, []string{"delay"}},
		{"negative delay", Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, Delay: -1}, []string{"delay"}},
		{"delay with nodelay", Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, Delay: 1, NoDelay: true}, []string{"delay"}},
		{"block with leaky-bucket", Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 4, Penalty: Penalty{Kind: PenaltyBlock, Duration: time.Second}}, []string{"penalty"}},
		{"extend with a bucket", Config{Algorithm: GCRA, Rate: 1, Capacity: 4, Penalty: Penalty{Kind: PenaltyExtend}}, []string{"penalty"}},
		{"restart with a duration", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Penalty: Penalty{Kind: PenaltyRestart, Duration: time.Second}}, []string{"penalty"}},
		{"block of 0, of a fraction of a µs", Config{Algorithm: SlidingLog, Limit: 1, Window: time.Second, Penalty: Penalty{Kind: PenaltyBlock, Duration: 1500}}, []string{"penalty"}},
		{"unknown penalty", Config{Algorithm: SlidingLog, Limit: 1, Window: time.Second, Penalty: Penalty{Kind: "jail"}}, []string{"penalty"}},
		{"extend with an aligned window", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Align: AlignEpoch, Penalty: Penalty{Kind: PenaltyExtend}}, []string{"align"}},
		{"negative forget-idle", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, ForgetIdle: -time.Second}, []string{"forget_idle"}},
		{"refill with a window", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Refill: RefillWhole}, []string{"refill"}},
		{"interval refill with leaky-bucket", Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 1, Refill: RefillInterval}, []string{"refill"}},
		{"unknown refill", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 1, Refill: "drip"}, []string{"refill"}},
		{"phase without a timer", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Align: AlignEpoch, Phase: time.Millisecond}, []string{"phase"}},
		{"phase of a whole window", Config{Algorithm: FixedWindow, Limit: 1, Window: time.Second, Align: AlignTimer, Phase: time.Second}, []string{"phase"}},
		{"phase with continuous refill", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 1, Phase: time.Millisecond}, []string{"phase"}},
		{"phase beyond the refill period", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 2, Refill: RefillInterval, Phase: 2 * time.Second}, []string{"phase"}},
		{"timer with sliding-log", Config{Algorithm: SlidingLog, Limit: 1, Window: time.Second, Align: AlignTimer}, []string{"align"}},
		{"every behaviour wrong at once", Config{Algorithm: TokenBucket, Rate: 1, Capacity: 1, Penalty: Penalty{Kind: PenaltyRestart}, ForgetIdle: -1, Refill: "x", Phase: -1},
			[]string{"penalty", "forget_idle", "refill", "phase"}},
		{"everything wrong at once", Config{Algorithm: LeakyBucket, Limit: 3, Window: -time.Second, Capacity: -2, Align: AlignEpoch, Delay: -1},
			[]string{"limit", "window", "rate", "capacity", "align", "delay"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want errors for %v", tt.cfg, tt.fields)
			}
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.What != "limiter" {
				t.Fatalf("error %q is not a *problem.Error of limiter", err)
			}
			var got []string
			for _, p := range pe.Problems {
				if p.Field == "" || p.Message == "" || p.File != "" || p.Line != 0 {
					t.Errorf("problem %#v: want a field and a message alone", p)
				}
				got = append(got, p.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("Validate(%+v) faults %v, want %v\n%v", tt.cfg, got, tt.fields, err)
			}
		})
	}
}

// TestNginxRate: the rate nginx stores is rate·1000 truncated, from the
// spellings nginx accepts and from decimals.
func TestNginxRate(t *testing.T) {
	for in, want := range map[string]int64{"1r/s": 1000, "1r/m": 16, "7r/m": 116, "3r/m": 50, "60r/m": 1000, "2.3/s": 2300, "0.1/s": 100, "1000r/s": 1000000} {
		r, err := units.ParseRate(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := nginxRate(r); got != want {
			t.Errorf("nginx rate of %s = %d milli-requests/s, want %d", in, got, want)
		}
	}
}

func TestQuotaAndAdvertisedWindow(t *testing.T) {
	tests := []struct {
		cfg    Config
		quota  int64
		window time.Duration
	}{
		{Config{Algorithm: FixedWindow, Limit: 100, Window: time.Minute}, 100, time.Minute},
		{Config{Algorithm: SlidingLog, Limit: 5, Window: 1500 * time.Millisecond}, 5, 1500 * time.Millisecond},
		{Config{Algorithm: SlidingWindowCounter, Limit: 20, Window: 10 * time.Second}, 20, 10 * time.Second},
		{Config{Algorithm: TokenBucket, Rate: 10, Capacity: 5}, 5, 1 * time.Second}, // 0.5 s → at least 1 s
		{Config{Algorithm: TokenBucket, Rate: 10.0 / 3, Capacity: 10}, 10, 3 * time.Second},
		{Config{Algorithm: TokenBucket, Rate: 2, Capacity: 5}, 5, 3 * time.Second}, // 2.5 s up
		{Config{Algorithm: GCRA, Rate: 1, Capacity: 4}, 4, 4 * time.Second},
		{Config{Algorithm: GCRA, Rate: 1.0 / 60, Capacity: 1}, 1, 63 * time.Second}, // nginx's 62.5 s
		{Config{Algorithm: LeakyBucket, Rate: 1.0 / 60, Capacity: 2}, 2, 125 * time.Second},
		{Config{Algorithm: "nonsense", Limit: 3}, 0, 0},
	}
	for _, tt := range tests {
		if q, w := tt.cfg.Quota(), tt.cfg.AdvertisedWindow(); q != tt.quota || w != tt.window {
			t.Errorf("%+v: Quota() = %d, AdvertisedWindow() = %v, want %d, %v", tt.cfg, q, w, tt.quota, tt.window)
		}
	}
}

// TestStepInvalidConfig: an invalid Config gives unspecified answers, but
// no panic.
func TestStepInvalidConfig(t *testing.T) {
	for _, c := range []Config{
		{},
		{Algorithm: FixedWindow},
		{Algorithm: SlidingLog, Limit: -5, Window: -1},
		{Algorithm: SlidingWindowCounter, Limit: math.MaxInt64, Window: 1},
		{Algorithm: TokenBucket, Rate: math.Inf(1), Capacity: math.MaxInt64},
		{Algorithm: TokenBucket, Rate: -1},
		{Algorithm: GCRA, Rate: math.NaN()},
		{Algorithm: LeakyBucket, Rate: 1e300, Capacity: -1, Delay: math.MaxInt64},
	} {
		var st State
		for _, at := range []time.Time{t0, t0, t0.Add(time.Hour), time.Unix(0, 0), {}, time.Unix(1<<40, 0)} {
			st, _ = c.Step(st, at)
		}
		_ = c.IdleAt(st)
		_ = c.AdvertisedWindow()
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		cfg  Config
		want Params
	}{
		{Config{Algorithm: FixedWindow, Limit: 5, Window: 1500 * time.Millisecond}, Params{Limit: 5, WindowUS: 1_500_000}},
		{Config{Algorithm: SlidingWindowCounter, Limit: 5, Window: time.Second, CountRejected: true}, Params{Limit: 5, WindowUS: 1_000_000, Epoch: true, CountRejected: true}},
		{Config{Algorithm: TokenBucket, Rate: 3, Capacity: 2}, Params{Limit: 2, IntervalUS: 333_333}},
		{Config{Algorithm: TokenBucket, Rate: 6, Capacity: 2}, Params{Limit: 2, IntervalUS: 166_667}},
		{Config{Algorithm: TokenBucket, Rate: 1.0 / 60, Capacity: 2}, Params{Limit: 2, IntervalUS: 60_000_000}},
		{Config{Algorithm: GCRA, Rate: 1.0 / 60, Capacity: 4}, Params{Limit: 4, RateMilli: 16, BurstMilli: 3000, DelayMilli: -1}},
		{Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 6, Delay: 2}, Params{Limit: 6, RateMilli: 1000, BurstMilli: 5000, DelayMilli: 2000}},
		{Config{Algorithm: LeakyBucket, Rate: 1, Capacity: 6, NoDelay: true}, Params{Limit: 6, RateMilli: 1000, BurstMilli: 5000, DelayMilli: -1}},
	}
	for _, tt := range tests {
		if got := tt.cfg.Params(); got != tt.want {
			t.Errorf("%+v: Params() = %+v, want %+v", tt.cfg, got, tt.want)
		}
	}
}
