package limiter

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchConfigs has one typical configuration per algorithm, each driven
// about twice as fast as it admits, so decisions mix admissions and
// rejections.
var benchConfigs = map[Algorithm]Config{
	FixedWindow:          {Algorithm: FixedWindow, Limit: 100, Window: time.Second},
	SlidingLog:           {Algorithm: SlidingLog, Limit: 100, Window: time.Second},
	SlidingWindowCounter: {Algorithm: SlidingWindowCounter, Limit: 100, Window: time.Second},
	TokenBucket:          {Algorithm: TokenBucket, Rate: 100, Capacity: 100},
	GCRA:                 {Algorithm: GCRA, Rate: 100, Capacity: 100},
	LeakyBucket:          {Algorithm: LeakyBucket, Rate: 100, Capacity: 100, Delay: 50},
}

// BenchmarkStep measures one decision (Config.Step, as infer and verify
// replay records) per algorithm.
func BenchmarkStep(b *testing.B) {
	for _, alg := range Algorithms {
		cfg := benchConfigs[alg]
		b.Run(string(alg), func(b *testing.B) {
			var st State
			var d Decision
			now := t0
			admitted := 0
			for b.Loop() {
				now = now.Add(5 * time.Millisecond) // 200/s against 100/s
				st, d = cfg.Step(st, now)
				if d.Allowed {
					admitted++
				}
			}
			_ = admitted
		})
	}
}

// BenchmarkStoreDecideParallel measures Store.Decide from all Ps over
// 10,000 keys, per algorithm. Each key comes back within about 10 ms, so
// keys stay in the store (the steady-state path, no insertion).
func BenchmarkStoreDecideParallel(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, alg := range Algorithms {
		b.Run(string(alg), func(b *testing.B) {
			s := NewStore(benchConfigs[alg], StoreOptions{})
			var seed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(1)) * 7919
				now := t0
				for pb.Next() {
					i++
					now = now.Add(time.Microsecond)
					s.Decide(keys[i%len(keys)], now)
				}
			})
		})
	}
}

// BenchmarkStepLargeLog measures one decision of a sliding log of 1,000 in
// 60 s kept full and admitting (a request every 61 ms: each finds 999 in
// the window), as infer replays a hypothesis: Config.Step (compiles,
// copies the log), Stepper.Step (copies it) and Stepper.StepOwned (steps
// it in place).
func BenchmarkStepLargeLog(b *testing.B) {
	cfg := Config{Algorithm: SlidingLog, Limit: 1000, Window: time.Minute}
	s := cfg.Stepper()
	for _, m := range []struct {
		name string
		step func(State, time.Time) (State, Decision)
	}{{"Config.Step", cfg.Step}, {"Stepper.Step", s.Step}, {"Stepper.StepOwned", s.StepOwned}} {
		b.Run(m.name, func(b *testing.B) {
			var st State
			now := t0
			for b.Loop() {
				now = now.Add(61 * time.Millisecond)
				st, _ = m.step(st, now)
			}
		})
	}
}
