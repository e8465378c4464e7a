package testserver

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// TestRouteSpecBehaviours: penalty, forget_idle and refill become the
// limiter's behaviours; interval refill's timer starts with the server;
// what the limiter refuses is refused by name.
func TestRouteSpecBehaviours(t *testing.T) {
	rt, err := RouteSpec{Algorithm: "fixed-window", Limit: 3, Window: Duration(10 * time.Second), Penalty: "block:30s",
		ForgetIdle: Duration(time.Minute)}.Route()
	if c := rt.Policy.Limiter; err != nil || c.Penalty != (limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 30 * time.Second}) ||
		c.ForgetIdle != time.Minute || rt.Policy.TimerAtStart {
		t.Errorf("block and forget-idle: %+v, %v", c, err)
	}
	rt, err = RouteSpec{Algorithm: "token-bucket", Rate: 2, Capacity: 4, Refill: "interval"}.Route()
	if c := rt.Policy.Limiter; err != nil || c.Refill != limiter.RefillInterval || c.Phase != 0 || !rt.Policy.TimerAtStart {
		t.Errorf("interval refill: %+v (timer at start %v), %v", c, rt.Policy.TimerAtStart, err)
	}
	for _, tc := range []struct {
		spec RouteSpec
		want string
	}{
		{RouteSpec{Algorithm: "sliding-log", Limit: 1, Window: Duration(time.Second), Penalty: "jail"}, `penalty "jail"`},
		{RouteSpec{Algorithm: "sliding-log", Limit: 1, Window: Duration(time.Second), Penalty: "block"}, "block needs a duration"},
		{RouteSpec{Algorithm: "gcra", Rate: 1, Penalty: "extend"}, "extend only for fixed-window"},
		{RouteSpec{Algorithm: "leaky-bucket", Rate: 1, Penalty: "block:1s"}, "block is not for leaky-bucket"},
		{RouteSpec{Algorithm: "fixed-window", Limit: 1, Window: Duration(time.Second), Refill: "whole"}, "refill: only for token-bucket and gcra"},
		{RouteSpec{Algorithm: "token-bucket", Rate: 1, Refill: "drip"}, `unknown "drip"`},
		{RouteSpec{Algorithm: "token-bucket", Rate: 1, ForgetIdle: Duration(-time.Second)}, "forget_idle -1s is negative"},
	} {
		if _, err := tc.spec.Route(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.spec, err, tc.want)
		}
	}
}

func TestLoadConfigBehaviours(t *testing.T) {
	const doc = `routes:
  - {path: /login, algorithm: fixed-window, limit: 3, window: 60s, penalty: "block:5m"}
  - {path: /swc, algorithm: sliding-window-counter, limit: 3, window: 60s, penalty: restart}
  - {path: /bucket, algorithm: token-bucket, rate: 2/s, capacity: 10, forget_idle: 30s, refill: whole}
`
	routes, err := LoadConfig("b.yaml", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p := routes[0].Policy.Limiter.Penalty; p.Kind != limiter.PenaltyBlock || p.Duration != 5*time.Minute {
		t.Errorf("/login penalty %+v", p)
	}
	if p := routes[1].Policy.Limiter.Penalty; p.Kind != limiter.PenaltyRestart {
		t.Errorf("/swc penalty %+v", p)
	}
	if c := routes[2].Policy.Limiter; c.ForgetIdle != 30*time.Second || c.Refill != limiter.RefillWhole {
		t.Errorf("/bucket %+v", c)
	}
	for _, bad := range []struct{ doc, want string }{
		{"routes:\n  - path: /a\n    algorithm: token-bucket\n    rate: 1/s\n    forget-idle: 30s\n", "line 5"},
		{"routes:\n  - path: /a\n    algorithm: token-bucket\n    rate: 1/s\n    penalty: restart\n", "b.yaml:2"},
	} {
		if _, err := LoadConfig("b.yaml", strings.NewReader(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("LoadConfig(%q): %v, want an error saying %q", bad.doc, err, bad.want)
		}
	}
}

// TestHandlerBlock: under a block the Retry-After is the time until a
// retry is admitted (the block's end), every request before it is
// refused, and a full quota follows.
func TestHandlerBlock(t *testing.T) {
	clk := &clock{}
	clk.Set(t0)
	p := Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: 10 * time.Second,
		Penalty: limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 30 * time.Second}}}
	h, _ := newTestHandler(t, p, HandlerOptions{Now: clk.Now})
	var got []string
	for _, at := range []time.Duration{0, 0, time.Second, 11 * time.Second, 31*time.Second - time.Millisecond, 31 * time.Second, 31 * time.Second} {
		clk.Set(t0.Add(at))
		resp := get(h, "/", "")
		got = append(got, resp.Status[:3]+"/"+resp.Header.Get("Retry-After"))
	}
	if want := "[200/ 200/ 429/30 429/20 429/1 200/ 200/]"; strings.Join(got, " ") != strings.Trim(want, "[]") {
		t.Errorf("block of 30 s after 2 per 10 s: %v, want %s", got, want)
	}
}

// TestTimerAtStart: interval refill's timer starts with the handler (its
// clock at creation), and a reload keeps that start.
func TestTimerAtStart(t *testing.T) {
	clk := &clock{}
	start := t0.Add(700 * time.Millisecond) // t0 is at .25 s: the timer's ticks fall at .95 s + k·2 s
	clk.Set(start)
	rt, err := RouteSpec{Algorithm: "token-bucket", Rate: 1, Capacity: 2, Refill: "interval"}.Route()
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler([]Route{rt}, HandlerOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		var got []int
		for _, at := range []time.Duration{time.Second, time.Second, time.Second, 3 * time.Second, 3 * time.Second} {
			clk.Set(start.Add(at))
			got = append(got, get(h, "/", "").StatusCode)
		}
		// Two at start+1s, none more until the tick at start+2s, then two.
		if want := []int{200, 200, 429, 200, 200}; !equalInts(got, want) {
			t.Errorf("%s: %v, want %v", when, got, want)
		}
	}
	check("first")
	start = start.Add(10 * time.Second) // a whole number of periods later
	if err := h.Reload([]Route{rt}); err != nil {
		t.Fatal(err)
	}
	check("after a reload, fresh state on the same timer")
	if p := (Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 1, Capacity: 2}, TimerAtStart: true}); p.Validate() == nil {
		t.Error("TimerAtStart without a timer: no error")
	}
}

// headerValue returns the first value of the field named name in any
// case (headers.Set writes names verbatim, which Header.Get would miss).
func headerValue(h http.Header, name string) string {
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFaultsAdvertised: advertise-rate shows the refill rate per second
// over 1 s as the quota; constant-reset shows the full window as the time
// until more and until full, whatever the state; Retry-After stays honest.
func TestFaultsAdvertised(t *testing.T) {
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 6} // advertised w = 3 s
	tests := []struct {
		fault   Fault
		cfg     limiter.Config
		dialect headers.Dialect
		want    map[string]string // header → value on the first answer
	}{
		{FaultAdvertiseRate, bucket, headers.Draft8, map[string]string{"RateLimit-Policy": `"default";q=2;w=1`, "RateLimit": `"default";r=5;t=0`}},
		{FaultAdvertiseRate, bucket, headers.XRateLimit, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "5"}},
		{FaultAdvertiseRate, limiter.Config{Algorithm: limiter.FixedWindow, Limit: 120, Window: time.Minute}, headers.XRateLimit,
			map[string]string{"X-RateLimit-Limit": "2"}},
		{"", bucket, headers.Draft8, map[string]string{"RateLimit-Policy": `"default";q=6;w=3`, "RateLimit": `"default";r=5;t=0`}},
		{FaultConstantReset, bucket, headers.Draft8, map[string]string{"RateLimit": `"default";r=5;t=3`}},
		{FaultConstantReset, bucket, headers.XRateLimit, map[string]string{"X-RateLimit-Reset": "3"}},
		{"", bucket, headers.XRateLimit, map[string]string{"X-RateLimit-Reset": "1"}},
	}
	for _, tc := range tests {
		clk := &clock{}
		clk.Set(t0)
		p := Policy{Limiter: tc.cfg, Dialects: []headers.Dialect{tc.dialect}}
		if tc.fault != "" {
			p.Faults = []Fault{tc.fault}
		}
		h, _ := newTestHandler(t, p, HandlerOptions{Now: clk.Now})
		resp := get(h, "/", "")
		for k, v := range tc.want {
			if got := headerValue(resp.Header, k); got != v {
				t.Errorf("fault %q, %s, %s: %s = %q, want %q", tc.fault, tc.cfg.Algorithm, tc.dialect, k, got, v)
			}
		}
		if tc.fault == FaultConstantReset {
			var last *http.Response
			for range 6 {
				last = get(h, "/", "")
			}
			if last.StatusCode != 429 || last.Header.Get("Retry-After") != "1" {
				t.Errorf("constant-reset: exhausted answer %d, Retry-After %q; want 429 with the honest 1", last.StatusCode, last.Header.Get("Retry-After"))
			}
		}
	}
}

// TestRedisRefusesBehaviours: the Redis backend ports the algorithms
// alone, and says so; serve refuses the flags with --backend redis.
func TestRedisRefusesBehaviours(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer client.Close()
	for _, c := range []limiter.Config{
		{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Second, Penalty: limiter.Penalty{Kind: limiter.PenaltyExtend}},
		{Algorithm: limiter.TokenBucket, Rate: 1, Capacity: 1, ForgetIdle: time.Second},
		{Algorithm: limiter.GCRA, Rate: 1, Capacity: 1, Refill: limiter.RefillWhole},
	} {
		if _, err := NewRedisBackend(client, c, RedisOptions{}); !errors.Is(err, ErrRedisBehaviour) {
			t.Errorf("NewRedisBackend(%+v) = %v, want ErrRedisBehaviour", c, err)
		}
	}
	spec := ServeSpec{Route: RouteSpec{Algorithm: "fixed-window", Limit: 1, Window: Duration(time.Second), Penalty: "restart"},
		RouteFlags: []string{"algorithm", "limit", "window", "penalty"}, Backend: "redis", OnBackendError: "deny", Atomic: true}
	if _, err := spec.Config(); err == nil || !strings.Contains(err.Error(), "--penalty cannot be used with --backend redis") ||
		!strings.Contains(err.Error(), "Lua scripts port the algorithms alone") {
		t.Errorf("serve --penalty --backend redis: %v", err)
	}
}
