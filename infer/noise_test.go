package infer

import (
	"context"
	"math/rand/v2"
	"slices"
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
	for _, i := range []int{6} { // token bucket (sliding log counting rejections fails alike)
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
// the keys apart (TestInferGlobalKey keeps them from calling a global key
// per client).
func TestInferLateKeyTest(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       limiter.Config
		perClient bool
		want      want
	}{
		{"token bucket, per client", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5}, true,
			want{fam: TokenBucket, rate: 4, capacity: 5, key: "header:X-Key"}},
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

// TestInferWindowStartOutOfOrder: half of the requests of a schedule are
// read at once but handled 300 ms late, the other half read 200 ms late and
// handled at once, so a fixed window started by a key's first request
// starts at a request stamped 200 ms after the earliest stamp of its burst.
// Replayed in stamp order the window starts 200 ms early, and the next
// window's refusals seem premature (which a longer epoch-aligned window
// reproduces) or the early-stamped refusals seem to come before the window
// was full (which a sliding-window counter reproduces). In the second
// identity's key test requests arrive among the exhausting burst's.
func TestInferWindowStartOutOfOrder(t *testing.T) {
	for _, phase := range []string{"exhaust"} { // "burst" fails alike on the old code
		cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 4, Window: sec(1), Align: limiter.AlignFirstRequest}
		e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, perClient: true, status: 503}, origin)
		e.echo = true
		e.jitter = func(seq int64) time.Duration {
			if e.phases[seq] != phase {
				return 0
			}
			return time.Duration(seq%2) * 200 * time.Millisecond
		}
		e.lag = func(seq int64) time.Duration {
			if e.phases[seq] != phase {
				return 0
			}
			return time.Duration(1-seq%2) * 300 * time.Millisecond
		}
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "header:X-Key"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "fixed window, first request, "+phase+" out of order by 200 ms", inf,
			want{fam: FixedWindow, align: AlignFirstRequest, limit: 4, window: 1, key: "header:X-Key"})
	}
}

// TestReplayCarriesOrderUncertainty: a burst from idle whose earliest
// stamped half was handled 300 ms late starts a first-request window at a
// request stamped 200 ms after the burst's first stamp; a burst 1.05 s
// after that first stamp is refused (the window began 200 ms later). The
// true model, replayed in stamp order, puts the window's end 200 ms early:
// the burst's ordering uncertainty must carry over to the next window edge,
// so that the truth reproduces every outcome.
func TestReplayCarriesOrderUncertainty(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 4, Window: sec(1), Align: limiter.AlignFirstRequest}
	e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, status: 503}, origin)
	e.echo = true
	first := true
	e.jitter = func(seq int64) time.Duration {
		if !first {
			return 0
		}
		return time.Duration(seq%2) * 200 * time.Millisecond
	}
	e.lag = func(seq int64) time.Duration {
		if !first {
			return 0
		}
		return time.Duration(1-seq%2) * 300 * time.Millisecond
	}
	ctx := context.Background()
	a, _ := e.Run(ctx, burstSchedule(8))
	first = false
	sched := burstSchedule(4)
	sched.Start = origin.Add(1050 * time.Millisecond)
	b, _ := e.Run(ctx, sched)
	for _, r := range b {
		if r.Status != 503 {
			t.Fatalf("the simulated server admitted %+v; the test's premise is wrong", r)
		}
	}
	o := observe(append(a, b...), origin, 0)
	truth := hyp{v: allVariants[1], n: 4, x: 1}
	if r := replayObs(truth, o, false, -1); r.miss != 0 {
		t.Errorf("%v misses %d outcomes (worst %+v), want 0", truth, r.miss, r.worst)
	}
}

// TestInferQueueAnswersLate: under load a queueing server's timers fire
// late, so some held answers come back long after their queue delay (180
// and 430 ms late in the first burst, an undelayed one 220 ms late in the
// second). A queued answer can come back late, never early: the stalls must
// not make a faster queue with fewer undelayed requests fit better.
func TestInferQueueAnswersLate(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 7, Delay: 2}
	e := newSimEngine(simServer{cfg: cfg, oneWay: 400 * time.Microsecond, perClient: true, status: 503}, origin)
	e.echo = true
	second := int64(-1)
	e.stall = func(seq int64) time.Duration {
		switch {
		case seq == 3:
			return 180 * time.Millisecond
		case seq == 6:
			return 430 * time.Millisecond
		case seq >= 16 && e.phases[seq] == "burst" && (second < 0 || second == seq):
			second = seq
			return 220 * time.Millisecond
		}
		return 0
	}
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "header:X-Key"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "leaky bucket with delay, late answers", inf,
		want{fam: LeakyBucketQueue, rate: 5, capacity: 7, undelayed: 3, queue: 4, key: "header:X-Key"})
}

// TestDelayMisses: queued answers come back late, never early; sporadic
// lateness is a stall, systematic lateness a model that drains too fast.
// The delays are those of a loaded reference server's first burst (leaky
// bucket 5/s, 3 undelayed).
func TestDelayMisses(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	observed := []int{12, 12, 12, 382, 460, 656, 1240}
	for _, tt := range []struct {
		name  string
		model []time.Duration
		want  int
	}{
		{"the truth, two answers stalled", ms(0, 0, 0, 200, 400, 600, 800), 0},
		{"two undelayed at 6.4/s: the third answer came back before its delay", ms(0, 0, 156, 312, 468, 624, 780), 1},
		{"10/s: every queued answer late", ms(0, 0, 0, 100, 200, 300, 400), 4},
		{"4/s: answers before their delay", ms(0, 0, 0, 250, 500, 750, 1000), 1},
	} {
		if got := delayMisses(slices.Clone(tt.model), ms(observed...), 91*time.Millisecond); got != tt.want {
			t.Errorf("%s: %d misses, want %d", tt.name, got, tt.want)
		}
	}
}
