package limiter_test

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// The nginx demo: limit_req rate=1r/s burst=3 nodelay, 8 requests in the
// same millisecond, then one 1 s later.
func ExampleConfig_Step() {
	rate, _ := units.ParseRate("1r/s")
	cfg := limiter.Config{Algorithm: limiter.GCRA, Rate: rate, Capacity: 3 + 1}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var st limiter.State // a key never seen
	for i, at := range []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, time.Second} {
		var d limiter.Decision
		st, d = cfg.Step(st, t0.Add(at))
		fmt.Printf("%d at +%v: allowed=%v remaining=%d retry-after=%v\n", i+1, at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// 1 at +0s: allowed=true remaining=3 retry-after=0s
	// 2 at +0s: allowed=true remaining=2 retry-after=0s
	// 3 at +0s: allowed=true remaining=1 retry-after=0s
	// 4 at +0s: allowed=true remaining=0 retry-after=0s
	// 5 at +0s: allowed=false remaining=0 retry-after=1s
	// 6 at +0s: allowed=false remaining=0 retry-after=1s
	// 7 at +0s: allowed=false remaining=0 retry-after=1s
	// 8 at +0s: allowed=false remaining=0 retry-after=1s
	// 9 at +1s: allowed=true remaining=0 retry-after=0s
}

// Without nodelay, nginx queues the excess: the leaky bucket reports how
// long each admitted request waits.
func ExampleConfig_Step_leakyBucket() {
	cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var st limiter.State
	for range 5 {
		var d limiter.Decision
		st, d = cfg.Step(st, t0)
		fmt.Printf("allowed=%v delay=%v\n", d.Allowed, d.Delay)
	}
	// Output:
	// allowed=true delay=0s
	// allowed=true delay=1s
	// allowed=true delay=2s
	// allowed=true delay=3s
	// allowed=false delay=0s
}

// A Store keeps one State per key: here 2 requests per client per second,
// in windows aligned to the clock.
func ExampleStore() {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Second, Align: limiter.AlignEpoch}
	s := limiter.NewStore(cfg, limiter.StoreOptions{MaxKeys: 100_000})
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		key string
		at  time.Duration
	}{
		{"alice", 0}, {"alice", 100 * time.Millisecond}, {"alice", 200 * time.Millisecond},
		{"bob", 300 * time.Millisecond},
		{"alice", time.Second},
	} {
		d := s.Decide(r.key, t0.Add(r.at))
		fmt.Printf("%-5s +%-5v allowed=%-5v remaining=%d reset=%v\n", r.key, r.at, d.Allowed, d.Remaining, d.UntilFull)
	}
	fmt.Println("keys:", s.Len())
	// Output:
	// alice +0s    allowed=true  remaining=1 reset=1s
	// alice +100ms allowed=true  remaining=0 reset=900ms
	// alice +200ms allowed=false remaining=0 reset=800ms
	// bob   +300ms allowed=true  remaining=1 reset=700ms
	// alice +1s    allowed=true  remaining=1 reset=1s
	// keys: 1
}
