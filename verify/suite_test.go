package verify

import (
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// TestPlanDuration60s asserts the plan of a 60 s policy from the plan
// itself: burst 200 ms; recovery one window plus two polls (60 s + 2 × 3 s);
// the edge one window plus the 3 s margin and the 110 ms each half takes at
// the engine's 1000/s guard; sustained two windows; the race a window's
// wait for fresh quota plus 100 ms.
func TestPlanDuration60s(t *testing.T) {
	p := Policy{Version: 1, Endpoints: []Endpoint{{Limit: 100, Window: time.Minute}}}.Normalize()
	want := 200*time.Millisecond + 66*time.Second + 63110*time.Millisecond + 120*time.Second + 60100*time.Millisecond
	if got := PlanDuration(p, nil, nil); got != want {
		t.Errorf("PlanDuration(100 in any 60s) = %v, want %v", got, want)
	}
	if got, limit := PlanDuration(p, nil, nil), 6*time.Minute+30*time.Second; got > limit {
		t.Errorf("PlanDuration = %v, over 6 W + 30 s = %v", got, limit)
	}
	// Per-IP keys add the key-spoof step: 200 ms + 3 × 100 ms.
	ip := p
	ip.Endpoints = []Endpoint{p.Endpoints[0]}
	ip.Endpoints[0].Key = KeyIP
	if got := PlanDuration(ip, nil, nil); got != want+500*time.Millisecond {
		t.Errorf("PlanDuration(per ip) = %v, want %v", got, want+500*time.Millisecond)
	}
}

func TestPlanSuite(t *testing.T) {
	win := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Sliding, Key: KeyGlobal}
	bkt := Endpoint{Rate: 2, Capacity: 5, Key: KeyGlobal}
	hdr := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Sliding, Key: "header:X-Api-Key"}
	tests := []struct {
		name    string
		e       Endpoint
		opt     SuiteOptions
		checks  []string // step checks in order
		skipped []string
		dur     time.Duration
	}{
		// The paced series (12 requests, at most 2 s/26 apart for a slow
		// target, twice) wait a period and a poll each with one identity.
		{"window, global", win, SuiteOptions{}, []string{"burst", "recovery", "edge", "sustained", "burst", "race"}, []string{"key-spoof"},
			200*time.Millisecond + 2200*time.Millisecond + 2150*time.Millisecond + 4*time.Second + pacedPlan(12, 2*time.Second/26, 2100*time.Millisecond) + 2100*time.Millisecond},
		// The race alone runs the series too: they show whether one
		// limiter decides every connection.
		{"only race", win, SuiteOptions{Only: []string{"race"}}, []string{"burst", "race"}, nil, pacedPlan(12, 2*time.Second/26, 2100*time.Millisecond) + 2100*time.Millisecond},
		{"skip edge and sustained", win, SuiteOptions{Skip: []string{"edge", "sustained"}}, []string{"burst", "recovery", "burst", "race"}, []string{"key-spoof"},
			200*time.Millisecond + 2200*time.Millisecond + pacedPlan(12, 2*time.Second/26, 2100*time.Millisecond) + 2100*time.Millisecond},
		// A bucket has no edge; the sustained probe lasts 20 refills (10 s).
		{"bucket", bkt, SuiteOptions{}, []string{"burst", "recovery", "sustained", "burst", "race"}, []string{"edge", "key-spoof"},
			62500*time.Microsecond + 2750*time.Millisecond + 10*time.Second + pacedPlan(12, 2500*time.Millisecond/26, 2625*time.Millisecond) + 2600*time.Millisecond},
		// Fresh identities: the race runs beside the burst, no wait.
		{"per-client key", hdr, SuiteOptions{Identities: 0}, []string{"burst", "recovery", "edge", "sustained", "burst"}, []string{"key-spoof"},
			200*time.Millisecond + 2200*time.Millisecond + 2150*time.Millisecond + 4*time.Second + pacedPlan(12, 2*time.Second/26, 0)},
		// A quota beyond 20 is not spent twice more.
		{"large quota: no series", Endpoint{Limit: 50, Window: 2 * time.Second, WindowType: Sliding, Key: KeyGlobal}, SuiteOptions{Only: []string{"burst"}},
			[]string{"burst"}, nil, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		pl := PlanSuite(tt.e, tt.opt)
		var got []string
		for _, s := range pl.Steps {
			got = append(got, s.Check)
		}
		if !equal(got, tt.checks) {
			t.Errorf("%s: steps %v, want %v", tt.name, got, tt.checks)
		}
		for _, c := range tt.skipped {
			if pl.Skipped[c] == "" {
				t.Errorf("%s: %s not skipped (skipped: %v)", tt.name, c, pl.Skipped)
			}
		}
		if pl.Duration() != tt.dur {
			t.Errorf("%s: duration %v, want %v", tt.name, pl.Duration(), tt.dur)
		}
	}
}

// TestPlanBound: every plan of one rule fits in 6 W + 30 s.
func TestPlanBound(t *testing.T) {
	for _, w := range []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, time.Minute, time.Hour} {
		for _, e := range []Endpoint{
			{Limit: 10, Window: w, WindowType: Sliding, Key: KeyIP},
			{Limit: 1000, Window: w, WindowType: Fixed, Align: limiter.AlignEpoch, Key: KeyGlobal},
			{Rate: 10 / w.Seconds(), Capacity: 10, Key: KeyIP},
		} {
			pl := PlanSuite(e, SuiteOptions{Identities: 1, Spoofing: true})
			if d, limit := pl.Duration(), 6*e.Period()+30*time.Second; d > limit {
				t.Errorf("%s: plan %v, over 6 W + 30 s = %v", e.String(), d, limit)
			}
		}
	}
}

// pacedPlan is the planned length of the two paced series of n requests gap
// apart, each after a wait (0 with fresh identities).
func pacedPlan(n int, gap, wait time.Duration) time.Duration {
	return 2*time.Duration(n)*gap + 2*wait
}

func equal(a, b []string) bool {
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

// TestPastBands: a recovery poll is moved past hi+W of every accepted
// request whose [lo+W, hi+W) holds it, so that an honest sliding log's
// admission of it is certainly a window after each; rejections, and
// moments outside every band, leave it where it was.
func TestPastBands(t *testing.T) {
	ms := func(v float64) int64 { return int64(v * 1e6) }
	res := func(wrote, ttfb float64, status int) record.Result {
		return record.Result{Outcome: record.OutcomeResponse, Wrote: ms(wrote), TTFB: ms(ttfb), Status: status}
	}
	// The record of the failure: the preflight answered in 22 ms.
	prior := []record.Result{res(3.144, 25.233, 200)} // the preflight
	seen := []record.Result{
		res(46.336, 46.956, 200),   // burst
		res(160.616, 161.284, 429), // a rejection: no band
	}
	tests := []struct {
		name    string
		window  time.Duration
		t, want float64 // ms
	}{
		{"inside the preflight's band", 2 * time.Second, 2020.8, 2025.233},
		{"at its start", 2 * time.Second, 2003.144, 2025.233},
		{"at its end: clear", 2 * time.Second, 2025.233, 2025.233},
		{"before it: an honest window refuses", 2 * time.Second, 2000, 2000},
		{"inside the burst's band", 2 * time.Second, 2046.5, 2046.956},
		{"inside the rejection's: clear", 2 * time.Second, 2160.9, 2160.9},
		{"a bucket has no window", 0, 2020.8, 2020.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &suiteRun{Suite: &Suite{Prior: prior}, e: &Endpoint{Limit: 5, Window: tt.window, Status: 429}, results: seen}
			if got := r.pastBands(ms(tt.t)); got != ms(tt.want) {
				t.Errorf("pastBands(%v ms) = %v ms, want %v ms", tt.t, float64(got)/1e6, tt.want)
			}
		})
	}
}

// TestPastBandsChains: bands that overlap move the poll past the last.
func TestPastBandsChains(t *testing.T) {
	r := &suiteRun{Suite: &Suite{}, e: &Endpoint{Limit: 5, Window: time.Second, Status: 429}, results: []record.Result{
		{Outcome: record.OutcomeResponse, Wrote: 10e6, TTFB: 20e6, Status: 200},
		{Outcome: record.OutcomeResponse, Wrote: 15e6, TTFB: 30e6, Status: 200},
	}}
	if got, want := r.pastBands(1012e6), int64(1030e6); got != want {
		t.Errorf("pastBands = %d, want %d", got, want)
	}
}
