package testserver

import (
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

func i64(v int64) *int64 { return &v }

// TestRouteSpec: the flags (or config keys) of one route become a policy,
// with defaults, and combinations that mean nothing are refused by name.
func TestRouteSpec(t *testing.T) {
	tests := []struct {
		name    string
		spec    RouteSpec
		want    limiter.Config
		wantErr []string
	}{
		{"fixed window defaults to first-request", RouteSpec{Algorithm: "fixed-window", Limit: 5, Window: Duration(2 * time.Second)},
			limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignFirstRequest}, nil},
		{"fixed window epoch", RouteSpec{Algorithm: "fixed-window", Limit: 5, Window: Duration(time.Second), Align: "epoch", CountRejected: true},
			limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Second, Align: limiter.AlignEpoch, CountRejected: true}, nil},
		{"sliding-window-counter keeps its default", RouteSpec{Algorithm: "sliding-window-counter", Limit: 5, Window: Duration(time.Second)},
			limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: time.Second}, nil},
		{"burst is capacity - 1", RouteSpec{Algorithm: "leaky-bucket", Rate: 1, Burst: i64(3), NoDelay: true},
			limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true}, nil},
		{"burst 0", RouteSpec{Algorithm: "gcra", Rate: 1, Burst: i64(0)},
			limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 1}, nil},
		{"capacity defaults to 1", RouteSpec{Algorithm: "token-bucket", Rate: 2},
			limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 1}, nil},
		{"leaky delay", RouteSpec{Algorithm: "leaky-bucket", Rate: 1, Capacity: 6, Delay: i64(2)},
			limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 6, Delay: 2}, nil},

		{"no algorithm", RouteSpec{}, limiter.Config{}, []string{"algorithm missing"}},
		{"unknown algorithm", RouteSpec{Algorithm: "magic"}, limiter.Config{}, []string{`unknown algorithm "magic"`}},
		{"capacity with fixed-window", RouteSpec{Algorithm: "fixed-window", Limit: 5, Window: Duration(time.Second), Capacity: 3},
			limiter.Config{}, []string{"capacity means nothing for fixed-window"}},
		{"window algorithm without its parameters", RouteSpec{Algorithm: "sliding-log"}, limiter.Config{},
			[]string{"needs limit", "needs window"}},
		{"rate and nodelay with a window", RouteSpec{Algorithm: "fixed-window", Limit: 1, Window: Duration(time.Second), Rate: 1, NoDelay: true},
			limiter.Config{}, []string{"rate means nothing", "nodelay means nothing"}},
		{"align with sliding-log", RouteSpec{Algorithm: "sliding-log", Limit: 1, Window: Duration(time.Second), Align: "epoch"},
			limiter.Config{}, []string{"align means nothing for sliding-log"}},
		{"capacity and burst", RouteSpec{Algorithm: "gcra", Rate: 1, Capacity: 4, Burst: i64(3)}, limiter.Config{},
			[]string{"capacity and burst"}},
		{"limit with a bucket", RouteSpec{Algorithm: "token-bucket", Rate: 1, Limit: 3, Window: Duration(time.Second)}, limiter.Config{},
			[]string{"limit means nothing for token-bucket", "window means nothing"}},
		{"nodelay with gcra", RouteSpec{Algorithm: "gcra", Rate: 1, NoDelay: true}, limiter.Config{},
			[]string{"nodelay means nothing for gcra"}},
		{"delay and nodelay", RouteSpec{Algorithm: "leaky-bucket", Rate: 1, Capacity: 4, Delay: i64(1), NoDelay: true}, limiter.Config{},
			[]string{"delay and nodelay"}},
		{"bucket without rate", RouteSpec{Algorithm: "leaky-bucket"}, limiter.Config{}, []string{"needs rate"}},
		{"bad align", RouteSpec{Algorithm: "fixed-window", Limit: 1, Window: Duration(time.Second), Align: "noon"}, limiter.Config{},
			[]string{`align "noon"`}},
		{"bad dialect", RouteSpec{Algorithm: "fixed-window", Limit: 1, Window: Duration(time.Second), Headers: []string{"draft-9"}}, limiter.Config{},
			[]string{"draft-9"}},
	}
	for _, tc := range tests {
		rt, err := tc.spec.Route()
		if tc.wantErr != nil {
			if err == nil {
				t.Errorf("%s: Route() = %+v, want an error", tc.name, rt)
				continue
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not say %q", tc.name, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Route() error %v", tc.name, err)
			continue
		}
		if rt.Policy.Limiter != tc.want {
			t.Errorf("%s: limiter %+v, want %+v", tc.name, rt.Policy.Limiter, tc.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	const yamlDoc = `version: 1
routes:
  - path: /fixed
    algorithm: fixed-window
    limit: 5
    window: 2s
    headers: draft-8,x-ratelimit
    fault: [policy-lie, cacheable-reject]
  - {path: /nginx, algorithm: leaky-bucket, rate: 1r/s, burst: 3, nodelay: true, status: 503, key: ip,
     retry_after: early, retry_after_format: http-date}
`
	routes, err := LoadConfig("m.yaml", strings.NewReader(yamlDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || routes[0].Path != "/fixed" || routes[1].Path != "/nginx" {
		t.Fatalf("routes %+v", routes)
	}
	p0, p1 := routes[0].Policy, routes[1].Policy
	if p0.Limiter.Limit != 5 || p0.Limiter.Window != 2*time.Second || p0.Limiter.Align != limiter.AlignFirstRequest ||
		len(p0.Dialects) != 2 || p0.Dialects[1] != headers.XRateLimit || len(p0.Faults) != 2 || p0.Faults[1] != FaultCacheableReject {
		t.Errorf("route /fixed: %+v", p0)
	}
	if p1.Limiter.Rate != 1 || p1.Limiter.Capacity != 4 || !p1.Limiter.NoDelay || p1.Status != 503 || p1.Key != "ip" ||
		p1.RetryAfter != RetryEarly || p1.RetryAfterFormat != headers.RetryAfterHTTPDate {
		t.Errorf("route /nginx: %+v", p1)
	}

	const jsonDoc = "{\n\t\"routes\": [\n\t\t{\"path\": \"/a\", \"algorithm\": \"gcra\", \"rate\": \"10/s\", \"capacity\": 20}\n\t]\n}\n"
	routes, err = LoadConfig("m.json", strings.NewReader(jsonDoc))
	if err != nil || len(routes) != 1 || routes[0].Policy.Limiter.Capacity != 20 || routes[0].Policy.Limiter.Rate != 10 {
		t.Errorf("JSON: %+v, %v", routes, err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		doc  string
		want []string
	}{
		{"routes:\n  - path: /a\n    algorithm: fixed-window\n    limit: 5\n    windw: 2s\n", []string{"line 5", "windw"}},
		{"routes:\n  - path: /a\n    algorithm: fixed-window\n    limit: 5\n    window: 60\n", []string{"line 5", "no unit"}},
		{"routes:\n  - path: /a\n    algorithm: gcra\n    rate: 10\n", []string{"line 4", "no unit"}},
		{"routes:\n  - path: /a\n    algorithm: fixed-window\n    limit: 5\n    window: 1s\n  - path: /b\n    algorithm: gcra\n    capacity: 3\n    limit: 2\n",
			[]string{"m.yaml:6", `"/b"`, "needs rate", "limit means nothing"}},
		{"routes:\n  - path: /a\n    algorithm: fixed-window\n    limit: 1\n    window: 1s\n  - path: /a\n    algorithm: fixed-window\n    limit: 1\n    window: 1s\n",
			[]string{"m.yaml:6", "already used on line 2"}},
		{"routes:\n  - path: a\n    algorithm: fixed-window\n    limit: 1\n    window: 1s\n", []string{"m.yaml:2", "start with /"}},
		{"routes: []\n", []string{"no routes"}},
		{"", []string{"empty"}},
		{"version: 2\nroutes: []\n", []string{"version 2"}},
		{"routes:\n  - path: /a\n  algorithm: [\n", []string{"line"}},
	}
	for _, tc := range tests {
		_, err := LoadConfig("m.yaml", strings.NewReader(tc.doc))
		if err == nil {
			t.Errorf("LoadConfig(%q) = nil error", tc.doc)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LoadConfig(%q) error %q does not say %q", tc.doc, err, w)
			}
		}
	}
}
