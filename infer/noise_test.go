package infer

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestInferLateDecisions: under CPU load the reference server stamps a
// request when it reads it but consults the limiter when the handler
// runs, up to tens of milliseconds later, so a burst's stamps spread over
// 20 ms while the requests are decided in the order they were sent. The
// stamps are exact but their order is not the decisions' order: the
// fitting must not compare the burst's parts one by one (a token bucket
// then seems to admit a request after refusing one stamped earlier, which
// only a window model reproduces).
func TestInferLateDecisions(t *testing.T) {
	for _, i := range []int{1, 3, 6} {
		tt := truthTable[i]
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		jit := map[int64]time.Duration{}
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 150 * time.Microsecond, perClient: true, status: 503}, origin)
		e.echo = true
		e.jitter = func(seq int64) time.Duration {
			j := time.Duration(rng.Int64N(int64(20 * time.Millisecond)))
			jit[seq] = j
			return j
		}
		// Every request is decided 25 ms after it was sent (late
		// handlers), whatever its stamp: in the order sent.
		e.lag = func(seq int64) time.Duration { return 25*time.Millisecond - jit[seq] }
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "header:X-Key"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		w := tt.want
		w.key = "header:X-Key"
		check(t, tt.name+", decided late and out of stamp order", inf, w)
	}
}

// TestInferLateKeyTest: the second identity's requests of the key test
// arrive 70 ms after the exhausting burst (their connection was served
// late), when a fast-recovering model under a global key admits them as a
// per-client key does. The variants compared each with itself still tell
// the keys apart.
func TestInferLateKeyTest(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       limiter.Config
		perClient bool
		want      want
	}{
		{"token bucket, per client", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5}, true,
			want{fam: TokenBucket, rate: 4, capacity: 5, key: "header:X-Key"}},
		{"sliding log counting rejections, global", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 4, Window: sec(1), CountRejected: true}, false,
			want{fam: SlidingLog, limit: 4, window: 1, cr: yes(), key: KeyGlobal}},
	} {
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 200 * time.Microsecond, perClient: tt.perClient, status: 503}, origin)
		e.echo = true
		e.keyDelay = 70 * time.Millisecond
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "header:X-Key"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		check(t, tt.name+", key test 70 ms late", inf, tt.want)
	}
}
