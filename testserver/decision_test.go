package testserver

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// TestDecisionOrder: with the echo on, every decided answer numbers its
// decision, and the numbers explain the outcomes exactly: of 40 concurrent
// requests against a fixed window of 10, those numbered 1…10 are the ones
// admitted, whatever order their arrival stamps or their answers came in.
// Without the echo, or with a backend that cannot order its decisions
// (a wrapper that is not an OrderedBackend), there is no number.
func TestDecisionOrder(t *testing.T) {
	ten := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour}
	h, err := NewHandler([]Route{{Policy: Policy{Limiter: ten}}}, HandlerOptions{EchoArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		n      int64
		status int
	}
	var mu sync.Mutex
	var got []answer
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			resp := get(h, "/", "")
			n, err := strconv.ParseInt(resp.Header.Get(headers.DecisionHeader), 10, 64)
			if err != nil {
				t.Errorf("%s = %q: %v", headers.DecisionHeader, resp.Header.Get(headers.DecisionHeader), err)
			}
			mu.Lock()
			got = append(got, answer{n, resp.StatusCode})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b answer) int { return int(a.n - b.n) })
	for i, a := range got {
		want := http.StatusTooManyRequests
		if i < 10 {
			want = http.StatusOK
		}
		if a.n != int64(i+1) || a.status != want {
			t.Errorf("decision %d: number %d, status %d; want number %d, status %d", i+1, a.n, a.status, i+1, want)
		}
	}

	quiet, _ := NewHandler([]Route{{Policy: Policy{Limiter: ten}}}, HandlerOptions{})
	wrapped, _ := NewHandler([]Route{{Policy: Policy{Limiter: ten}, Backend: &recorder{Backend: mustMemory(t, ten)}}},
		HandlerOptions{EchoArrival: true})
	for name, h := range map[string]*Handler{"no echo": quiet, "unordered backend": wrapped} {
		if v := get(h, "/", "").Header.Get(headers.DecisionHeader); v != "" {
			t.Errorf("%s: %s = %q, want none", name, headers.DecisionHeader, v)
		}
	}
}

func mustMemory(t *testing.T, cfg limiter.Config) *MemoryBackend {
	t.Helper()
	b, err := NewMemoryBackend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNonAtomicMemoryBackend: against a fixed window of 5 with a race gap
// of 20 ms, 10 requests released together are all admitted by the
// non-atomic backend (each read the empty state before any wrote) and 5
// by the atomic one; sent one after another, both admit exactly 5. Served
// by New with Memory.NonAtomic over an in-memory listener, in a synctest
// bubble: exact and without sleeps.
func TestNonAtomicMemoryBackend(t *testing.T) {
	five := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute}
	for _, tc := range []struct {
		name                 string
		mem                  MemoryConfig
		together, sequential int
	}{
		{"atomic", MemoryConfig{}, 5, 5},
		{"non-atomic", MemoryConfig{NonAtomic: true, RaceGap: 20 * time.Millisecond}, 10, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Config{Routes: []Route{{Path: "/together", Policy: Policy{Limiter: five}},
					{Path: "/sequential", Policy: Policy{Limiter: five}}}, Memory: tc.mem, Handler: HandlerOptions{EchoArrival: true}})
				if err != nil {
					t.Fatal(err)
				}
				l := NewMemListener()
				if err := s.StartListener(l); err != nil {
					t.Fatal(err)
				}
				defer s.Shutdown(context.Background())
				c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					return l.Dial(ctx, network, addr, netip.Addr{})
				}}}
				defer c.CloseIdleConnections()
				ok := func(path string) bool {
					resp, err := c.Get(s.URL() + path)
					if err != nil {
						t.Error(err)
						return false
					}
					resp.Body.Close()
					if resp.Header.Get(headers.DecisionHeader) == "" {
						t.Errorf("%s: no %s", path, headers.DecisionHeader)
					}
					return resp.StatusCode == http.StatusOK
				}
				var mu sync.Mutex
				together := 0
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						if ok("/together") {
							mu.Lock()
							together++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				sequential := 0
				for range 10 {
					if ok("/sequential") {
						sequential++
					}
				}
				if together != tc.together || sequential != tc.sequential {
					t.Errorf("limit 5: %d of 10 together admitted, %d of 10 one by one; want %d, %d",
						together, sequential, tc.together, tc.sequential)
				}
			})
		})
	}
	if _, err := New(Config{Routes: []Route{{Policy: Policy{Limiter: five}}}, Memory: MemoryConfig{NonAtomic: true, RaceGap: -time.Second}}); err == nil {
		t.Error("New accepted a negative race gap")
	}
}

// TestDecisionDelay: a request held 10 ms before its decision is decided
// after one that arrived later without a wait, at the time its wait ends:
// its arrival stamp is the earlier, its decision number the later, and a
// fixed window of 1 admits the other one.
func TestDecisionDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
		h, err := NewHandler([]Route{{Policy: Policy{Limiter: one}}}, HandlerOptions{EchoArrival: true,
			DecisionDelay: func(r *http.Request) time.Duration {
				if r.Header.Get("X-Slow") != "" {
					return 10 * time.Millisecond
				}
				return 0
			}})
		if err != nil {
			t.Fatal(err)
		}
		var slow *http.Response
		done := make(chan struct{})
		go func() { slow = get(h, "/", "", "X-Slow", "1"); close(done) }()
		synctest.Wait()
		time.Sleep(time.Millisecond)
		fast := get(h, "/", "")
		<-done
		n := func(r *http.Response) string { return r.Header.Get(headers.DecisionHeader) }
		a := func(r *http.Response) string { return r.Header.Get(headers.ArrivalHeader) }
		if slow.StatusCode != 429 || fast.StatusCode != 200 || n(slow) != "2" || n(fast) != "1" || a(slow) >= a(fast) {
			t.Errorf("slow: %d decision %s arrival %s; fast: %d decision %s arrival %s; want 429 2, 200 1, slow arriving first",
				slow.StatusCode, n(slow), a(slow), fast.StatusCode, n(fast), a(fast))
		}
	})
}
