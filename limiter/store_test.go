package limiter

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestStoreForgetsIdleKeys feeds a Store 1,000,000 distinct keys, one every
// 10 µs, under a fixed window anchored at each key's first request: a key
// is idle once its window has ended, so the store must hold exactly the
// keys whose window is still open.
func TestStoreForgetsIdleKeys(t *testing.T) {
	const (
		keys = 1_000_000
		step = 10 * us
		w    = 1 * sec
	)
	cfg := Config{Algorithm: FixedWindow, Limit: 1, Window: w}
	s := NewStore(cfg, StoreOptions{})
	var key []byte
	for i := range keys {
		key = strconv.AppendInt(key[:0], int64(i), 10)
		if d := s.Decide(string(key), t0.Add(time.Duration(i)*step)); !d.Allowed {
			t.Fatalf("key %d: first request rejected", i)
		}
		if i%4999 == 0 || i == keys-1 {
			want := min(i+1, int(w/step)) // keys first seen in (now−W, now]
			if got := s.Len(); got != want {
				t.Fatalf("after key %d at t0+%v: Len() = %d, want %d", i, time.Duration(i)*step, got, want)
			}
		}
	}
	if got := s.Len(); got == 0 {
		t.Fatal("the last keys were dropped too")
	}
	s.Decide("late", t0.Add(keys*step+w))
	if got := s.Len(); got != 1 {
		t.Errorf("one window after the last key: Len() = %d, want 1", got)
	}
}

// TestStoreMatchesStep drives a Store and a shadow map of States through
// the same randomised traffic (new keys and revisits, time advancing) for
// every algorithm: the Store must decide exactly as Step, must keep every
// key that is not yet idle, and must hold no key untouched for two
// advertised windows.
func TestStoreMatchesStep(t *testing.T) {
	cfgs := []Config{
		{Algorithm: FixedWindow, Limit: 3, Window: 2 * sec, Align: AlignEpoch},
		{Algorithm: FixedWindow, Limit: 3, Window: 2 * sec},
		{Algorithm: SlidingLog, Limit: 3, Window: 2 * sec, CountRejected: true},
		{Algorithm: SlidingWindowCounter, Limit: 3, Window: 2 * sec},
		{Algorithm: SlidingWindowCounter, Limit: 3, Window: 2 * sec, Align: AlignFirstRequest, CountRejected: true},
		{Algorithm: TokenBucket, Rate: 1.5, Capacity: 3},
		{Algorithm: GCRA, Rate: 1.5, Capacity: 3},
		{Algorithm: LeakyBucket, Rate: 1.5, Capacity: 3},
		{Algorithm: FixedWindow, Limit: 3, Window: 2 * sec, Penalty: Penalty{Kind: PenaltyBlock, Duration: 1500 * ms}},
		{Algorithm: SlidingLog, Limit: 3, Window: 2 * sec, Penalty: Penalty{Kind: PenaltyExtend}},
		{Algorithm: SlidingWindowCounter, Limit: 3, Window: 2 * sec, Penalty: Penalty{Kind: PenaltyRestart}, ForgetIdle: 700 * ms},
		{Algorithm: TokenBucket, Rate: 1.5, Capacity: 3, Refill: RefillWhole, ForgetIdle: 2 * sec},
		{Algorithm: GCRA, Rate: 1.5, Capacity: 3, Refill: RefillInterval, Phase: 300 * ms, Penalty: Penalty{Kind: PenaltyBlock, Duration: sec}},
	}
	n := 30_000
	if testing.Short() {
		n = 10_000
	}
	for i, cfg := range cfgs {
		t.Run(fmt.Sprintf("%d/%s/%s/%v", i, cfg.Algorithm, cfg.Align, cfg.CountRejected), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			s := NewStore(cfg, StoreOptions{})
			shadow := map[string]State{}
			last := map[string]time.Time{}
			span := 2 * cfg.AdvertisedWindow()
			now := t0
			for j := range n {
				now = now.Add(time.Duration(rng.IntN(200)) * us)
				var key string
				if j > 0 && rng.IntN(2) == 0 {
					key = "k" + strconv.Itoa(j-1-rng.IntN(min(j, 3000))) // a recent key again
				} else {
					key = "k" + strconv.Itoa(j)
				}
				got := s.Decide(key, now)
				st, want := cfg.Step(shadow[key], now)
				shadow[key], last[key] = st, now
				if got != want {
					t.Fatalf("request %d (%s at t0+%v): Decide = %+v, Step = %+v", j, key, now.Sub(t0), got, want)
				}
				if j%2500 == 2499 {
					lower, upper := 0, 0
					for k, st := range shadow {
						if cfg.IdleAt(st).After(now) {
							lower++
						}
						if now.Sub(last[k]) < span {
							upper++
						}
					}
					if l := s.Len(); l < lower || l > upper {
						t.Fatalf("at t0+%v: Len() = %d, want between %d (keys not idle) and %d (keys used in the last %v)", now.Sub(t0), l, lower, upper, span)
					}
				}
			}
		})
	}
}

// TestStoreEvictsLeastRecentlyUsed: with MaxKeys below 2048 the store is a
// single exact LRU.
func TestStoreEvictsLeastRecentlyUsed(t *testing.T) {
	cfg := Config{Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Align: AlignEpoch}
	s := NewStore(cfg, StoreOptions{MaxKeys: 3})
	steps := []struct {
		key string
		ok  bool
		len int
	}{
		{"a", true, 1},
		{"b", true, 2},
		{"c", true, 3},
		{"a", false, 3}, // a is remembered; b is now the least recently used
		{"d", true, 3},  // evicts b
		{"a", false, 3}, // …not a
		{"c", false, 3},
		{"b", true, 3}, // b was forgotten: fresh quota; evicts d
		{"d", true, 3},
	}
	for i, st := range steps {
		d := s.Decide(st.key, t0)
		if d.Allowed != st.ok || s.Len() != st.len {
			t.Errorf("step %d: Decide(%q) allowed = %v, Len() = %d; want %v, %d", i+1, st.key, d.Allowed, s.Len(), st.ok, st.len)
		}
	}
}

// TestStoreCap: however many keys arrive, a capped store never holds more
// than MaxKeys, and fills up to it.
func TestStoreCap(t *testing.T) {
	const max = 5000 // 4 shards of 1250
	s := NewStore(Config{Algorithm: TokenBucket, Rate: 0.001, Capacity: 10}, StoreOptions{MaxKeys: max})
	for i := range 100_000 {
		s.Decide("k"+strconv.Itoa(i), t0.Add(time.Duration(i)*us))
		if i%997 == 0 {
			if l := s.Len(); l > max {
				t.Fatalf("after %d keys: Len() = %d > MaxKeys %d", i+1, l, max)
			}
		}
	}
	if l := s.Len(); l != max {
		t.Errorf("after 100000 keys: Len() = %d, want MaxKeys = %d", l, max)
	}
}

// TestStoreConcurrent: goroutines deciding the same keys at the same
// instant admit exactly Limit per key in total. Run with -race.
func TestStoreConcurrent(t *testing.T) {
	const (
		goroutines = 8
		keys       = 50
		limit      = 10
		perG       = 2000
	)
	s := NewStore(Config{Algorithm: FixedWindow, Limit: limit, Window: time.Hour, Align: AlignEpoch}, StoreOptions{})
	admitted := make([][keys]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				k := (i*7 + g) % keys
				if s.Decide("key-"+strconv.Itoa(k), t0.Add(time.Duration(i%100)*ms)).Allowed {
					admitted[g][k]++
				}
				if i%500 == 0 {
					_ = s.Len()
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		total := 0
		for g := range goroutines {
			total += admitted[g][k]
		}
		if total != limit {
			t.Errorf("key-%d: %d admitted across goroutines, want %d", k, total, limit)
		}
	}
	if l := s.Len(); l != keys {
		t.Errorf("Len() = %d, want %d", l, keys)
	}
}

func TestNewStorePanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewStore(invalid config) did not panic")
		}
	}()
	NewStore(Config{Algorithm: TokenBucket}, StoreOptions{})
}
