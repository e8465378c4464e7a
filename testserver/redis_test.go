package testserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
)

// startRedis returns a client of a private redis-server.
func startRedis(t *testing.T) *redis.Client { return startRedisB(t) }

func startRedisB(t testing.TB) *redis.Client {
	t.Helper()
	addr := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// equivalenceConfigs are every algorithm with its option variants.
var equivalenceConfigs = []struct {
	name string
	cfg  limiter.Config
}{
	{"fixed-window first-request", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Second, Align: limiter.AlignFirstRequest}},
	{"fixed-window epoch", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: time.Second, Align: limiter.AlignEpoch}},
	{"fixed-window count-rejected", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: 700 * time.Millisecond, CountRejected: true}},
	{"sliding-log", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Second}},
	{"sliding-log count-rejected", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 3, Window: time.Second, CountRejected: true}},
	{"sliding-window-counter epoch", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 4, Window: time.Second}},
	{"sliding-window-counter first-request", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 4, Window: time.Second, Align: limiter.AlignFirstRequest}},
	{"sliding-window-counter count-rejected", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 3, Window: 60 * time.Second, CountRejected: true}},
	{"token-bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 3}},
	{"token-bucket 3/s", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 3, Capacity: 1}},
	{"gcra", limiter.Config{Algorithm: limiter.GCRA, Rate: 2, Capacity: 3}},
	{"gcra 1r/m", limiter.Config{Algorithm: limiter.GCRA, Rate: 1.0 / 60, Capacity: 2}},
	{"leaky-bucket", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 2, Capacity: 4}},
	{"leaky-bucket delay", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 6, Delay: 2}},
	{"leaky-bucket nodelay", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true}},
}

// script returns a reproducible sequence of (key, now): bursts in the same
// microsecond, gaps of 1 µs to several windows, steps landing on window
// edges, and now and then a clock running backwards.
func script(seed uint64, n int, window time.Duration) []struct {
	key string
	at  time.Time
} {
	r := rand.New(rand.NewPCG(seed, 7))
	if window == 0 {
		window = time.Second
	}
	gaps := []time.Duration{0, 0, 0, time.Microsecond, 999 * time.Microsecond, time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 333333 * time.Microsecond, 500 * time.Millisecond,
		window / 2, window, window - time.Microsecond, 2 * window, 3*window + 7*time.Microsecond, 61 * time.Second}
	t := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	out := make([]struct {
		key string
		at  time.Time
	}, n)
	for i := range out {
		g := gaps[r.IntN(len(gaps))]
		if r.IntN(40) == 0 {
			g = -time.Duration(r.IntN(2000)) * time.Microsecond // the clock runs backwards
		}
		t = t.Add(g)
		out[i].key = []string{"k1", "k2"}[r.IntN(2)]
		out[i].at = t
	}
	return out
}

// TestRedisMatchesMemory runs the same scripted (key, now) sequence through
// MemoryBackend, the atomic RedisBackend and the non-atomic one (one
// request at a time, so no race) for every algorithm and option, and
// requires identical decisions.
func TestRedisMatchesMemory(t *testing.T) {
	client := startRedis(t)
	ctx := context.Background()
	for i, tc := range equivalenceConfigs {
		mem, err := NewMemoryBackend(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		atomicB, err := NewRedisBackend(client, tc.cfg, RedisOptions{Prefix: fmt.Sprintf("eq%d:", i)})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		nonAtomic, err := NewRedisBackend(client, tc.cfg, RedisOptions{Prefix: fmt.Sprintf("eqn%d:", i), NonAtomic: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		steps := script(uint64(i)+1, 400, tc.cfg.Window)
		var admitted, rejected, delayed int
		for j, s := range steps {
			want, _ := mem.Decide(ctx, s.key, s.at)
			for _, b := range []struct {
				name string
				b    *RedisBackend
			}{{"atomic", atomicB}, {"non-atomic", nonAtomic}} {
				got, err := b.b.Decide(ctx, s.key, s.at)
				if err != nil {
					t.Fatalf("%s: %s Decide: %v", tc.name, b.name, err)
				}
				if got != want {
					t.Fatalf("%s: step %d (%s at %s): %s redis decided\n  %+v\nmemory decided\n  %+v",
						tc.name, j, s.key, s.at.Format(time.RFC3339Nano), b.name, got, want)
				}
			}
			switch {
			case !want.Allowed:
				rejected++
			case want.Delay > 0:
				delayed++
			default:
				admitted++
			}
		}
		// The script must exercise both outcomes, or the comparison is weak.
		if admitted == 0 || rejected == 0 {
			t.Errorf("%s: script gave %d admitted, %d rejected: it must exercise both", tc.name, admitted, rejected)
		}
		if tc.cfg.Algorithm == limiter.LeakyBucket && !tc.cfg.NoDelay && delayed == 0 {
			t.Errorf("%s: script never delayed a request", tc.name)
		}
	}
}

// TestRedisSurvivesScriptFlush: Script.Run falls back to EVAL when Redis
// lost its script cache (as after a restart).
func TestRedisSurvivesScriptFlush(t *testing.T) {
	client := startRedis(t)
	ctx := context.Background()
	b, err := NewRedisBackend(client, limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute}, RedisOptions{Prefix: "flush:"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d, err := b.Decide(ctx, "k", now); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first Decide = %+v, %v; want admitted, remaining 1", d, err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Decide(ctx, "k", now); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Decide after SCRIPT FLUSH = %+v, %v; want admitted, remaining 0", d, err)
	}
}

// raceConfig is the race experiment's limit: 10 per 60 s, so no window
// edge can interfere.
var raceConfig = limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: 60 * time.Second}

// release sends n requests to h at once, each from its own goroutine, and
// returns how many were admitted (200).
func release(t *testing.T, n int, do func(i int) int) int {
	t.Helper()
	var wg sync.WaitGroup
	var ok atomic.Int64
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if do(i) == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(ok.Load())
}

// TestRaceNonAtomicAdmitsAll is the classic check-then-act bug, made
// deterministic: with NonAtomic and a 20 ms race gap, a barrier holds every
// request between its read and its write until all 50 have read, so all 50
// decide on the same empty state and are admitted against a limit of 10.
// The atomic backend admits exactly 10 of the same burst.
func TestRaceNonAtomicAdmitsAll(t *testing.T) {
	client := startRedis(t)
	const n = 50
	for _, tc := range []struct {
		name      string
		nonAtomic bool
		want      int
	}{
		{"non-atomic", true, n},
		{"atomic", false, 10},
	} {
		b, err := NewRedisBackend(client, raceConfig, RedisOptions{Prefix: "race-" + tc.name + ":", NonAtomic: tc.nonAtomic, RaceGap: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var barrier sync.WaitGroup
		barrier.Add(n)
		b.afterRead = func() { barrier.Done(); barrier.Wait() }
		h, err := NewHandler([]Route{{Policy: Policy{Limiter: raceConfig}, Backend: b}}, HandlerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := release(t, n, func(int) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			return rec.Code
		})
		if got != tc.want {
			t.Errorf("%s: %d of %d simultaneous requests admitted against a limit of 10, want %d", tc.name, got, n, tc.want)
		}
	}
}

// TestRaceTwoServersShareRedis: two servers on one Redis and prefix, with
// the non-atomic backend and a 20 ms race gap, over-admit a burst split
// between them; atomic servers admit exactly the limit.
func TestRaceTwoServersShareRedis(t *testing.T) {
	addr := testenv.StartRedis(t)
	const n = 50
	for _, tc := range []struct {
		name      string
		nonAtomic bool
	}{{"non-atomic", true}, {"atomic", false}} {
		var urls []string
		for range 2 {
			s, err := New(Config{
				Routes:  []Route{{Path: "/x", Policy: Policy{Limiter: raceConfig}}},
				Backend: BackendRedis,
				Redis: RedisConfig{URL: "redis://" + addr, Prefix: "two-" + tc.name + ":", NonAtomic: tc.nonAtomic,
					RaceGap: map[bool]time.Duration{true: 20 * time.Millisecond}[tc.nonAtomic]},
				Listen: "127.0.0.1:0",
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			urls = append(urls, s.URL()+"/x")
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
		got := release(t, n, func(i int) int {
			resp, err := client.Get(urls[i%2])
			if err != nil {
				t.Error(err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		})
		client.CloseIdleConnections()
		switch {
		case tc.nonAtomic && got <= 10:
			t.Errorf("non-atomic servers sharing Redis admitted %d of %d against a limit of 10; want over-admission", got, n)
		case !tc.nonAtomic && got != 10:
			t.Errorf("atomic servers sharing Redis admitted %d of %d, want exactly 10", got, n)
		}
		t.Logf("%s: %d of %d admitted", tc.name, got, n)
	}
}

// TestRedisInstances: a deployment with a local store on Redis gives
// instance i its own keys (PREFIX i<i>:), so three instances admit three
// times the limit; with a shared store they share the one state.
func TestRedisInstances(t *testing.T) {
	addr := testenv.StartRedis(t)
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute, Align: limiter.AlignFirstRequest}
	for _, tc := range []struct {
		store Store
		want  int
	}{{StoreLocal, 6}, {StoreShared, 2}} {
		t.Run(string(tc.store), func(t *testing.T) {
			prefix := "inst-" + string(tc.store) + ":"
			s, err := New(Config{
				Routes:  []Route{{Path: "/x", Policy: Policy{Limiter: cfg}}},
				Backend: BackendRedis, Redis: RedisConfig{URL: "redis://" + addr, Prefix: prefix},
				Listen:  "127.0.0.1:0",
				Handler: HandlerOptions{Deployment: Deployment{Instances: 3, Store: tc.store, Balance: BalanceRequest}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			client := &http.Client{Timeout: 5 * time.Second}
			admitted := 0
			for range 9 {
				resp, err := client.Get(s.URL() + "/x")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					admitted++
				}
			}
			if admitted != tc.want {
				t.Errorf("admitted %d of 9, want %d", admitted, tc.want)
			}
			rc := redis.NewClient(&redis.Options{Addr: addr})
			defer rc.Close()
			keys, err := rc.Keys(t.Context(), prefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			instanceKeys := 0
			for _, k := range keys {
				if strings.HasPrefix(k, prefix+"i") {
					instanceKeys++
				}
			}
			if local := tc.store == StoreLocal; (instanceKeys == 3) != local || (!local && instanceKeys != 0) {
				t.Errorf("keys %v: want one per instance (PREFIX i<i>:) with a local store, none with a shared one", keys)
			}
		})
	}
}
