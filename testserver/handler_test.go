package testserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

var update = flag.Bool("update", false, "rewrite golden files")

// t0 is the fixed start of the handler tests' clocks.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)

// clock is a settable clock for HandlerOptions.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// recorder is a Backend that remembers the decisions of its inner one:
// the last, and those of requests whose context carries a reqID.
type recorder struct {
	Backend
	mu   sync.Mutex
	last limiter.Decision
	byID map[int]limiter.Decision
}

type reqID struct{}

func (r *recorder) Decide(ctx context.Context, key string, now time.Time) (limiter.Decision, error) {
	d, err := r.Backend.Decide(ctx, key, now)
	r.mu.Lock()
	r.last = d
	if id, ok := ctx.Value(reqID{}).(int); ok {
		if r.byID == nil {
			r.byID = map[int]limiter.Decision{}
		}
		r.byID[id] = d
	}
	r.mu.Unlock()
	return d, err
}

func (r *recorder) Last() limiter.Decision { r.mu.Lock(); defer r.mu.Unlock(); return r.last }

func (r *recorder) Of(id int) limiter.Decision { r.mu.Lock(); defer r.mu.Unlock(); return r.byID[id] }

// newTestHandler returns a handler with one catch-all route of p on a
// recording memory backend.
func newTestHandler(t *testing.T, p Policy, opt HandlerOptions) (*Handler, *recorder) {
	t.Helper()
	mem, err := NewMemoryBackend(p.Limiter)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Backend: mem}
	h, err := NewHandler([]Route{{Policy: p, Backend: rec}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return h, rec
}

// get serves one GET of path from remote and returns the response.
func get(h http.Handler, path, remote string, hdr ...string) *http.Response {
	req := httptest.NewRequest("GET", path, nil)
	if remote != "" {
		req.RemoteAddr = remote
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

var (
	fixed5  = limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: 10 * time.Second, Align: limiter.AlignFirstRequest}
	gcra1   = limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 3}
	tokenB  = limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.5, Capacity: 3}
	dialect = []headers.Dialect{headers.XRateLimit, headers.XRateLimitEpoch, headers.Draft6, headers.Draft7, headers.Draft8, headers.Draft11, headers.Draft12}
)

// dump formats the response's status and headers, sorted, without the
// body's Content-Type and Content-Length.
func dump(resp *http.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", resp.StatusCode)
	var names []string
	for k := range resp.Header {
		if k != "Content-Type" && k != "Content-Length" && k != "X-Content-Type-Options" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./testserver -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update if intended)\n--- got ---\n%s--- want ---\n%s", path, got, want)
	}
}

// TestDialectGolden pins every dialect as the server emits it, for a fixed
// window and a GCRA bucket, over admitted and rejected responses, with both
// Retry-After formats.
func TestDialectGolden(t *testing.T) {
	for _, d := range append([]headers.Dialect{headers.None}, dialect...) {
		var b strings.Builder
		for _, tc := range []struct {
			name   string
			cfg    limiter.Config
			format headers.RetryAfterFormat
			at     []time.Duration
		}{
			{"fixed-window limit 2 per 10s", fixed5, headers.RetryAfterSeconds, []time.Duration{0, 1500 * time.Millisecond, 2200 * time.Millisecond}},
			{"gcra rate 1/s capacity 3, http-date", gcra1, headers.RetryAfterHTTPDate, []time.Duration{0, 0, 0, 400 * time.Millisecond}},
		} {
			clk := &clock{}
			h, _ := newTestHandler(t, Policy{Limiter: tc.cfg, Dialects: []headers.Dialect{d}, RetryAfterFormat: tc.format}, HandlerOptions{Now: clk.Now})
			fmt.Fprintf(&b, "### %s\n", tc.name)
			for _, at := range tc.at {
				clk.Set(t0.Add(at))
				fmt.Fprintf(&b, "--- at +%v\n%s", at, dump(get(h, "/", "")))
			}
		}
		golden(t, "dialects/"+string(d)+".golden", b.String())
	}
}

func ceilSec(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// TestRoundTrip: every header the server emits parses back, under its own
// dialect, to the values the decision held (durations rounded up to whole
// seconds; epoch resets and dates within the second above), with no
// problem, for every algorithm and dialect. It runs in a synctest bubble,
// so leaky-bucket delays pass instantly and the advertised durations count
// from the delayed response.
func TestRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts in 2000, before the epoch-reset
		// heuristic's 1e9 s: shift the handler's clock to 2026.
		shift := t0.Sub(time.Now())
		now := func() time.Time { return time.Now().Add(shift) }
		for ci, tc := range equivalenceConfigs {
			var rejected int
			var mu sync.Mutex
			for _, d := range dialect {
				for _, f := range []headers.RetryAfterFormat{headers.RetryAfterSeconds, headers.RetryAfterHTTPDate} {
					p := Policy{Limiter: tc.cfg, Dialects: []headers.Dialect{d}, RetryAfterFormat: f, Name: "p" + strconv.Itoa(ci), Key: "header:X-Key"}
					h, rec := newTestHandler(t, p, HandlerOptions{Now: now})
					limit, window := tc.cfg.Quota(), tc.cfg.AdvertisedWindow()
					steps := script(uint64(ci), 30, tc.cfg.Window)
					for i, s := range steps {
						if i > 0 {
							time.Sleep(max(s.at.Sub(steps[i-1].at), 0))
						}
						// Every third step is a burst of 4 concurrent requests.
						n := 1
						if i%3 == 0 {
							n = 4
						}
						var wg sync.WaitGroup
						for j := range n {
							wg.Go(func() {
								id := i*10 + j
								req := httptest.NewRequest("GET", "/", nil)
								req = req.WithContext(context.WithValue(req.Context(), reqID{}, id))
								req.Header.Set("X-Key", s.key)
								w := httptest.NewRecorder()
								h.ServeHTTP(w, req)
								received := now()
								dec := rec.Of(id)
								where := fmt.Sprintf("%s, %s, %s, request %d (%+v)", tc.name, d, f, id, dec)
								if err := checkRoundTrip(where, w.Result(), d, received, dec, limit, window, p.Name); err != nil {
									t.Error(err)
								}
								if !dec.Allowed {
									mu.Lock()
									rejected++
									mu.Unlock()
								}
							})
						}
						wg.Wait()
					}
				}
			}
			if rejected == 0 {
				t.Errorf("%s: no rejection: the round trip of Retry-After was not exercised", tc.name)
			}
		}
	})
}

// checkRoundTrip returns the first difference between what resp says and
// what dec held, or nil.
func checkRoundTrip(where string, resp *http.Response, d headers.Dialect, now time.Time, dec limiter.Decision, limit int64, window time.Duration, name string) error {
	got := headers.Parse(resp.Header, now)
	if len(got.Problems) > 0 {
		return fmt.Errorf("%s: problems %v in\n%s", where, got.Problems, dump(resp))
	}
	if !got.Speaks(d) || len(got.Dialects) != 1 || (d == headers.Draft12) != (got.Dialects[0] == headers.Draft12) {
		return fmt.Errorf("%s: dialects %v, want [%s]", where, got.Dialects, d)
	}
	untilMore, untilFull := max(0, dec.UntilMore-dec.Delay), max(0, dec.UntilFull-dec.Delay)
	if len(got.Policies) != 1 || got.Policies[0].Quota != limit || got.Policies[0].Window != ceilSec(window) {
		if d != headers.XRateLimit && d != headers.XRateLimitEpoch {
			return fmt.Errorf("%s: policies %+v, want quota %d window %v", where, got.Policies, limit, ceilSec(window))
		}
	}
	if (d == headers.Draft8 || d.EffectiveWindow()) && got.Policies[0].Name != name {
		return fmt.Errorf("%s: policy name %q, want %q", where, got.Policies[0].Name, name)
	}
	if len(got.Limits) != 1 {
		return fmt.Errorf("%s: limits %+v, want one", where, got.Limits)
	}
	l := got.Limits[0]
	if l.Remaining != dec.Remaining {
		return fmt.Errorf("%s: remaining %d, want %d", where, l.Remaining, dec.Remaining)
	}
	switch d {
	case headers.Draft8:
		if l.Name != name || l.Reset != ceilSec(untilMore) {
			return fmt.Errorf("%s: limit %+v, want name %q, t = %v", where, l, name, ceilSec(untilMore))
		}
	case headers.Draft11, headers.Draft12:
		// The effective window: t > 0 while r > 0 (something is used
		// after a decision; a queued request may answer after it grew), as
		// long as the time until Remaining grows.
		gain := max(0, dec.UntilGain-dec.Delay)
		if l.Name != name || l.Reset != ceilSec(gain) || (dec.Delay == 0 && l.Remaining > 0 && l.Remaining < limit && l.Reset == 0) {
			return fmt.Errorf("%s: limit %+v, want name %q, effective window %v", where, l, name, ceilSec(gain))
		}
		if d == headers.Draft12 && (!l.HasCost || l.Cost != 1) {
			return fmt.Errorf("%s: limit %+v, want c=1", where, l)
		}
	case headers.XRateLimitEpoch:
		if !l.HasLimit || l.Limit != limit || l.Reset < untilFull || l.Reset >= untilFull+time.Second {
			return fmt.Errorf("%s: limit %+v, want limit %d, reset in [%v, %v+1s)", where, l, limit, untilFull, untilFull)
		}
	default:
		if !l.HasLimit || l.Limit != limit || l.Reset != ceilSec(untilFull) {
			return fmt.Errorf("%s: limit %+v, want limit %d, reset %v", where, l, limit, ceilSec(untilFull))
		}
	}
	if dec.Allowed {
		if got.RetryAfter != nil {
			return fmt.Errorf("%s: Retry-After on an admitted request", where)
		}
		return nil
	}
	if got.RetryAfter == nil || *got.RetryAfter < dec.RetryAfter || *got.RetryAfter >= dec.RetryAfter+time.Second {
		return fmt.Errorf("%s: Retry-After %v (%q), want in [%v, %v+1s)", where, got.RetryAfter, resp.Header.Get("Retry-After"), dec.RetryAfter, dec.RetryAfter)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		return fmt.Errorf("%s: rejection with Cache-Control %q, want no-store", where, cc)
	}
	return nil
}

// exhaust sends requests at t0 until one is rejected and returns it.
func exhaust(t *testing.T, h http.Handler, clk *clock) *http.Response {
	t.Helper()
	clk.Set(t0)
	for range 100 {
		if resp := get(h, "/", ""); resp.StatusCode != http.StatusOK {
			return resp
		}
	}
	t.Fatal("no rejection in 100 requests")
	return nil
}

// TestFaults: each fault produces the defect it names, seen through
// headers.Parse as a verifier sees it, and an honest server has none.
func TestFaults(t *testing.T) {
	type check func(resp []*http.Response, parsed []headers.Parsed) string
	problemIn := func(field string) check {
		return func(_ []*http.Response, ps []headers.Parsed) string {
			for _, p := range ps {
				for _, pr := range p.Problems {
					if strings.EqualFold(pr.Field, field) {
						return ""
					}
				}
			}
			return "no problem reported in " + field
		}
	}
	tests := []struct {
		fault   Fault
		dialect headers.Dialect
		format  headers.RetryAfterFormat
		defect  check
	}{
		{FaultMalformedRateLimit, headers.Draft8, "", problemIn("RateLimit")},
		{FaultMalformedRateLimit, headers.Draft7, "", problemIn("RateLimit")},
		{FaultMalformedRateLimit, headers.Draft6, "", problemIn("RateLimit-Remaining")},
		{FaultMalformedRateLimit, headers.XRateLimit, "", problemIn("X-RateLimit-Remaining")},
		{FaultMalformedRateLimit, headers.XRateLimitEpoch, "", problemIn("X-RateLimit-Remaining")},
		{FaultMalformedRetryAfter, headers.Draft8, headers.RetryAfterSeconds, problemIn("Retry-After")},
		{FaultMalformedRetryAfter, headers.Draft8, headers.RetryAfterHTTPDate, problemIn("Retry-After")},
		{FaultRemainingStuck, headers.Draft8, "", func(_ []*http.Response, ps []headers.Parsed) string {
			// Two admitted requests and a rejection all claim limit − 1.
			for i, p := range ps {
				if len(p.Limits) != 1 || p.Limits[0].Remaining != 1 {
					return fmt.Sprintf("response %d: remaining %+v, want stuck at 1", i, p.Limits)
				}
			}
			return ""
		}},
		{FaultPolicyLie, headers.Draft8, "", func(_ []*http.Response, ps []headers.Parsed) string {
			if q := ps[0].Policies[0].Quota; q == 2 {
				return "advertised quota 2, the enforced one"
			}
			return ""
		}},
		{FaultPolicyLie, headers.XRateLimit, "", func(_ []*http.Response, ps []headers.Parsed) string {
			if l := ps[0].Limits[0].Limit; l == 2 {
				return "advertised limit 2, the enforced one"
			}
			return ""
		}},
		{FaultCacheableReject, headers.Draft8, "", func(rs []*http.Response, _ []headers.Parsed) string {
			cc := rs[2].Header.Get("Cache-Control")
			if !strings.Contains(cc, "max-age") || strings.Contains(cc, "no-store") {
				return fmt.Sprintf("rejection Cache-Control %q is not cacheable", cc)
			}
			return ""
		}},
	}
	for _, tc := range tests {
		for _, faulty := range []bool{true, false} {
			clk := &clock{}
			p := Policy{Limiter: fixed5, Dialects: []headers.Dialect{tc.dialect}, RetryAfterFormat: tc.format}
			if faulty {
				p.Faults = []Fault{tc.fault}
			}
			h, _ := newTestHandler(t, p, HandlerOptions{Now: clk.Now})
			var resps []*http.Response
			var parsed []headers.Parsed
			for i := range 3 { // limit 2: admitted, admitted, rejected
				clk.Set(t0.Add(time.Duration(i) * 100 * time.Millisecond))
				resp := get(h, "/", "")
				resps = append(resps, resp)
				parsed = append(parsed, headers.Parse(resp.Header, clk.Now()))
			}
			if resps[2].StatusCode != 429 {
				t.Fatalf("%s: third request %d, want 429", tc.fault, resps[2].StatusCode)
			}
			msg := tc.defect(resps, parsed)
			switch {
			case faulty && msg != "":
				t.Errorf("--fault %s (%s, %s): %s\n%s", tc.fault, tc.dialect, tc.format, msg, dump(resps[2]))
			case !faulty && msg == "":
				t.Errorf("without --fault %s (%s, %s): the defect is there anyway\n%s", tc.fault, tc.dialect, tc.format, dump(resps[2]))
			}
		}
	}
}

// TestRetryAfterModes: accurate is the true wait rounded up (and a retry
// then succeeds, one second earlier fails), missing sends none, early half
// the wait rounded down, late the wait plus a window.
func TestRetryAfterModes(t *testing.T) {
	// fixed5 exhausted at t0: the window ends at t0+10s, a wait of 10 s.
	tests := []struct {
		mode RetryAfterMode
		cfg  limiter.Config
		want string
	}{
		{RetryAccurate, fixed5, "10"},
		{"", fixed5, "10"},
		{RetryMissing, fixed5, ""},
		{RetryEarly, fixed5, "5"},
		{RetryLate, fixed5, "20"},
		// token bucket 0.5/s capacity 3: next token 2 s after exhaustion;
		// advertised window ceil(3/0.5) = 6 s.
		{RetryAccurate, tokenB, "2"},
		{RetryEarly, tokenB, "1"},
		{RetryLate, tokenB, "8"},
	}
	for _, tc := range tests {
		clk := &clock{}
		h, rec := newTestHandler(t, Policy{Limiter: tc.cfg, RetryAfter: tc.mode}, HandlerOptions{Now: clk.Now})
		resp := exhaust(t, h, clk)
		got, has := resp.Header.Get("Retry-After"), len(resp.Header.Values("Retry-After")) > 0
		if got != tc.want || has != (tc.want != "") {
			t.Errorf("%s %s: Retry-After %q, want %q", tc.cfg.Algorithm, tc.mode, got, tc.want)
		}
		if tc.mode != RetryAccurate {
			continue
		}
		// Honest: a retry at the advertised moment succeeds, just before fails.
		wait := rec.Last().RetryAfter
		clk.Set(t0.Add(wait - time.Microsecond))
		if r := get(h, "/", ""); r.StatusCode == 200 {
			t.Errorf("%s: admitted 1 µs before the true wait %v", tc.cfg.Algorithm, wait)
		}
		secs, _ := strconv.Atoi(got)
		clk.Set(t0.Add(time.Duration(secs) * time.Second))
		if r := get(h, "/", ""); r.StatusCode != 200 {
			t.Errorf("%s: rejected at the advertised Retry-After %s s", tc.cfg.Algorithm, got)
		}
	}
}

// TestKeys: ip keys by the connection's address and ignores forwarding
// headers; header:NAME keys by the header; global shares one quota.
func TestKeys(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	type req struct {
		remote string
		hdr    []string
		want   int
	}
	tests := []struct {
		key  string
		reqs []req
	}{
		{"global", []req{{"10.0.0.1:1", nil, 200}, {"10.0.0.2:1", nil, 429}}},
		{"ip", []req{
			{"10.0.0.1:1", nil, 200},
			{"10.0.0.1:2", nil, 429},                                    // same address, other port
			{"10.0.0.1:3", []string{"X-Forwarded-For", "1.2.3.4"}, 429}, // spoofing does not help
			{"10.0.0.2:1", nil, 200},
			{"[::ffff:10.0.0.3]:1", nil, 200},
			{"10.0.0.3:9", nil, 429}, // the same address, unmapped
		}},
		{"header:X-Api-Key", []req{
			{"10.0.0.1:1", []string{"X-Api-Key", "a"}, 200},
			{"10.0.0.2:1", []string{"X-Api-Key", "a"}, 429},
			{"10.0.0.1:1", []string{"X-Api-Key", "b"}, 200},
			{"10.0.0.1:1", nil, 200}, // no header: one shared quota
			{"10.0.0.2:1", nil, 429},
		}},
	}
	for _, tc := range tests {
		h, _ := newTestHandler(t, Policy{Limiter: one, Key: tc.key}, HandlerOptions{Now: func() time.Time { return t0 }})
		for i, r := range tc.reqs {
			if got := get(h, "/", r.remote, r.hdr...).StatusCode; got != r.want {
				t.Errorf("key %s: request %d from %s %v = %d, want %d", tc.key, i, r.remote, r.hdr, got, r.want)
			}
		}
	}
}

// TestRoutes: exact paths, each with its own policy and quota; 404 for
// others unless a catch-all route exists; rejections use the route's status.
func TestRoutes(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	h, err := NewHandler([]Route{
		{Path: "/a", Policy: Policy{Limiter: one}},
		{Path: "/b", Policy: Policy{Limiter: one, Status: 503}},
	}, HandlerOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{{"/a", 200}, {"/a", 429}, {"/b", 200}, {"/b", 503}, {"/a/", 404}, {"/c", 404}, {"/", 404}} {
		if got := get(h, tc.path, "").StatusCode; got != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.path, got, tc.want)
		}
	}
	h, err = NewHandler([]Route{{Path: "/a", Policy: Policy{Limiter: one}}, {Policy: Policy{Limiter: one}}}, HandlerOptions{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{{"/a", 200}, {"/x", 200}, {"/y", 429}, {"/a", 429}} {
		if got := get(h, tc.path, "").StatusCode; got != tc.want {
			t.Errorf("with a catch-all: GET %s = %d, want %d", tc.path, got, tc.want)
		}
	}
}

func TestNewHandlerErrors(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	tests := []struct {
		routes []Route
		opt    HandlerOptions
		want   string
	}{
		{nil, HandlerOptions{}, "no route"},
		{[]Route{{Path: "/a", Policy: Policy{Limiter: one}}, {Path: "/a", Policy: Policy{Limiter: one}}}, HandlerOptions{}, "twice"},
		{[]Route{{Path: "a", Policy: Policy{Limiter: one}}}, HandlerOptions{}, "start with /"},
		{[]Route{{Policy: Policy{Limiter: one, Status: 200}}}, HandlerOptions{}, "4xx or 5xx"},
		{[]Route{{Policy: Policy{Limiter: one, Key: "cookie"}}}, HandlerOptions{}, "header:NAME"},
		{[]Route{{Policy: Policy{Limiter: one, Dialects: []headers.Dialect{headers.Draft7, headers.Draft8}}}}, HandlerOptions{}, "same fields"},
		{[]Route{{Policy: Policy{Limiter: one, Faults: []Fault{"lie"}}}}, HandlerOptions{}, "fault"},
		{[]Route{{Policy: Policy{Limiter: one, RetryAfter: "never"}}}, HandlerOptions{}, "Retry-After mode"},
		{[]Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.GCRA}}}}, HandlerOptions{}, "rate"},
		{[]Route{{Policy: Policy{Limiter: one}}}, HandlerOptions{OnBackendError: "maybe"}, "on-backend-error"},
	}
	for _, tc := range tests {
		_, err := NewHandler(tc.routes, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewHandler(%+v) error = %v, want one containing %q", tc.routes, err, tc.want)
		}
	}
}

// failing is a Backend that always fails.
type failing struct{}

func (failing) Decide(context.Context, string, time.Time) (limiter.Decision, error) {
	return limiter.Decision{}, errors.New("connection refused")
}

func TestBackendError(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	for _, tc := range []struct {
		mode       BackendErrorMode
		status     int
		retryAfter string
	}{{"", 503, "1"}, {BackendErrorDeny, 503, "1"}, {BackendErrorAllow, 200, ""}} {
		h, err := NewHandler([]Route{{Policy: Policy{Limiter: one}, Backend: failing{}}}, HandlerOptions{OnBackendError: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			resp := get(h, "/", "")
			if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("on-backend-error %q: %d Retry-After %q, want %d %q", tc.mode, resp.StatusCode, resp.Header.Get("Retry-After"), tc.status, tc.retryAfter)
			}
		}
	}
}

// TestLeakyBucketDelays: nginx rate=1r/s burst=3 without nodelay, a burst
// of 6: one served at once, three delayed by 1, 2 and 3 s, two rejected at
// once. A client that goes away ends its wait.
func TestLeakyBucketDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4}
		h, _ := newTestHandler(t, Policy{Limiter: cfg}, HandlerOptions{})
		start := time.Now()
		var mu sync.Mutex
		var got []string
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				resp := get(h, "/", "")
				mu.Lock()
				got = append(got, fmt.Sprintf("%d@%v", resp.StatusCode, time.Since(start)))
				mu.Unlock()
			})
			synctest.Wait() // in order
		}
		wg.Wait()
		slices.Sort(got)
		want := []string{"200@0s", "200@1s", "200@2s", "200@3s", "429@0s", "429@0s"}
		if !slices.Equal(got, want) {
			t.Errorf("burst of 6 at 1r/s burst=3: %v, want %v", got, want)
		}

		// A delayed request whose client leaves is answered at once, with nothing.
		h, _ = newTestHandler(t, Policy{Limiter: cfg}, HandlerOptions{})
		get(h, "/", "")
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		begin := time.Now()
		go func() { h.ServeHTTP(rec, req); close(done) }()
		synctest.Wait()
		cancel()
		<-done
		if d := time.Since(begin); d != 0 || rec.Body.Len() != 0 {
			t.Errorf("cancelled delayed request: returned after %v with %q, want at once with nothing", d, rec.Body.String())
		}
	})
}

func TestEchoArrival(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	for _, echo := range []bool{true, false} {
		h, _ := newTestHandler(t, Policy{Limiter: one}, HandlerOptions{Now: func() time.Time { return t0 }, EchoArrival: echo})
		for range 2 { // on admitted and rejected responses
			got := get(h, "/", "").Header.Get(headers.ArrivalHeader)
			want := ""
			if echo {
				want = strconv.FormatInt(t0.UnixNano(), 10)
			}
			if got != want {
				t.Errorf("echo %v: %s = %q, want %q", echo, headers.ArrivalHeader, got, want)
			}
		}
	}
}

// TestClockSkew: a server whose clock is 1.5 s ahead decides, dates and
// echoes by that clock. Its epoch-aligned windows of 2 s turn at 0.5 s
// past each even second of the machine's clock: a request at base + 0.4 s
// (base a multiple of 2 s) is in the server's window [base − 1.5 s,
// base + 0.5 s) and one at base + 0.6 s in the next.
func TestClockSkew(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: 2 * time.Second, Align: limiter.AlignEpoch}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // a multiple of 2 s
	now := base
	h, _ := newTestHandler(t, Policy{Limiter: one}, HandlerOptions{Now: func() time.Time { return now }, EchoArrival: true, ClockSkew: 1500 * time.Millisecond})
	var got []string
	for _, at := range []time.Duration{400, 450, 600} {
		now = base.Add(at * time.Millisecond)
		res := get(h, "/", "")
		server := now.Add(1500 * time.Millisecond)
		if d, want := res.Header.Get("Date"), server.UTC().Format(http.TimeFormat); d != want {
			t.Errorf("at %v ms: Date %q, want %q (the server's clock)", at, d, want)
		}
		if e, want := res.Header.Get(headers.ArrivalHeader), strconv.FormatInt(server.UnixNano(), 10); e != want {
			t.Errorf("at %v ms: echo %s, want %s (the server's clock)", at, e, want)
		}
		got = append(got, strconv.Itoa(res.StatusCode))
	}
	if want := []string{"200", "429", "200"}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v (the server's window turns at t0 + 0.5 s)", got, want)
	}
}

func TestLogRequests(t *testing.T) {
	var b strings.Builder
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	h, _ := newTestHandler(t, Policy{Limiter: one, Key: "ip"}, HandlerOptions{Now: func() time.Time { return t0 }, Log: &b})
	get(h, "/p", "10.1.2.3:4")
	get(h, "/p", "10.1.2.3:4")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `key="10.1.2.3" status=200`) || !strings.Contains(lines[1], "status=429") {
		t.Errorf("log:\n%s\nwant two lines, 200 then 429, keyed by address", b.String())
	}
}
