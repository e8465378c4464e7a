package infer

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// TestRuleRoundTrip: limiter config → inference → rule → limiter config
// gives back the limiter's promise — its algorithm as a policy states it
// (a fixed window at its alignment, a bucket as a token bucket), its count
// exactly and its window or rate within 5 %.
func TestRuleRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  limiter.Config
		want limiter.Config
	}{
		{"fixed-window epoch", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 8, Window: 2 * time.Second, Align: limiter.AlignEpoch},
			limiter.Config{Algorithm: limiter.FixedWindow, Limit: 8, Window: 2 * time.Second, Align: limiter.AlignEpoch}},
		{"fixed-window first-request", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: 1500 * time.Millisecond, Align: limiter.AlignFirstRequest},
			limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: 1500 * time.Millisecond, Align: limiter.AlignFirstRequest}},
		{"fixed-window timer", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2500 * time.Millisecond, Align: limiter.AlignTimer, Phase: 925 * time.Millisecond},
			limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2500 * time.Millisecond, Align: limiter.AlignTimer, Phase: 925 * time.Millisecond}},
		{"sliding-log", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Second},
			limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Second}},
		{"token-bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5},
			limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5}},
		{"gcra", limiter.Config{Algorithm: limiter.GCRA, Rate: 2, Capacity: 3},
			limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 3}},
		{"leaky-bucket nodelay", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 4, NoDelay: true},
			limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 4}},
		{"leaky-bucket queue", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 6},
			limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 6}},
		{"sliding-window-counter restart", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: time.Second, Align: limiter.AlignFirstRequest, Penalty: limiter.Penalty{Kind: limiter.PenaltyRestart}},
			limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Second, Penalty: limiter.Penalty{Kind: limiter.PenaltyRestart}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := time.Date(2030, 1, 1, 0, 0, 0, 300e6, time.UTC)
			e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 2 * time.Millisecond}, o)
			inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock})
			if err != nil {
				t.Fatal(err)
			}
			rule, note, err := inf.Rule()
			if err != nil {
				t.Fatalf("%s (fit %s): %v", inf.Algorithm, inf.Fit, err)
			}
			if (note == "") != (inf.Fit == FitExact) {
				t.Errorf("fit %s, note %q: want a note exactly when the fit is not exact", inf.Fit, note)
			}
			got := rule.Model()
			if got.Algorithm != tt.want.Algorithm || got.Align != tt.want.Align || got.Limit != tt.want.Limit || got.Capacity != tt.want.Capacity || got.Penalty != tt.want.Penalty {
				t.Fatalf("round trip %+v → %s → %v → %+v, want %+v", tt.cfg, inf.Algorithm, rule.String(), got, tt.want)
			}
			if w := tt.want.Window; w > 0 && math.Abs(float64(got.Window-w)) > 0.05*float64(w) {
				t.Errorf("window %v, want %v ± 5 %%", got.Window, w)
			}
			if r := tt.want.Rate; r > 0 && math.Abs(got.Rate-r) > 0.05*r {
				t.Errorf("rate %v, want %v ± 5 %%", got.Rate, r)
			}
			if tt.want.Align == limiter.AlignTimer {
				// The phase places windows near the run: within its spread
				// of the timer's (the spread at most a tenth of the window).
				d := (got.Phase - tt.want.Phase) % got.Window
				d = min(d.Abs(), got.Window-d.Abs())
				if d > rule.PhaseSpread || rule.PhaseSpread > got.Window/10 {
					t.Errorf("phase %v ± %v, want %v within the spread (at most a tenth of the window)", got.Phase, rule.PhaseSpread, tt.want.Phase)
				}
			}
		})
	}
}

// TestRuleRefusesWhatNamesNoRule: a misfit, none and a family without its
// parameters describe no rule; an approximate fit gives the closest
// family's rule with a note.
func TestRuleRefusesWhatNamesNoRule(t *testing.T) {
	limit, window := &Param{Value: 10}, &Param{Value: 60}
	for _, tt := range []struct {
		name    string
		inf     Inference
		wantErr bool
		note    bool
	}{
		{"misfit", Inference{Fit: FitMisfit, Closest: FixedWindow, Params: Params{Limit: limit, WindowS: window}}, true, false},
		{"none", Inference{Algorithm: None, Fit: FitExact}, true, false},
		{"no parameters", Inference{Algorithm: SlidingLog, Fit: FitExact}, true, false},
		{"approximate", Inference{Algorithm: SlidingLog, Fit: FitApproximate, Params: Params{Limit: limit, WindowS: window}}, false, true},
		{"exact", Inference{Algorithm: SlidingLog, Fit: FitExact, Key: KeyUnknown, Params: Params{Limit: limit, WindowS: window}}, false, false},
	} {
		rule, note, err := tt.inf.Rule()
		if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrNoRule)) {
			t.Errorf("%s: error %v, want error %v wrapping ErrNoRule", tt.name, err, tt.wantErr)
			continue
		}
		if (note != "") != tt.note {
			t.Errorf("%s: note %q", tt.name, note)
		}
		if err == nil && (rule.Limit != 10 || rule.Window != time.Minute || rule.WindowType != verify.Sliding || rule.Key != "") {
			t.Errorf("%s: rule %+v", tt.name, rule)
		}
	}
}

// TestRetryAfterAsSent: a Retry-After that breaks the grammar is sent and
// graded malformed, verbatim in raw; one on an accepted answer is never
// graded; a grade within a cluster of unknown order must hold under every
// pairing of its values with the cluster's rejections.
func TestRetryAfterAsSent(t *testing.T) {
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// A fixed window of 3 per second: a burst of 5 (3 accepted), then a
	// recovery.
	burst := func(ra string, acceptedRA string) []record.Result {
		var rs []record.Result
		for i := range 5 {
			st := 200
			if i >= 3 {
				st = 429
			}
			r := result(int64(i), 0, 1, st)
			r.Headers = http.Header{}
			if st == 429 && ra != "" {
				r.Headers.Set("Retry-After", ra)
			}
			if st == 200 && acceptedRA != "" {
				r.Headers.Set("Retry-After", acceptedRA)
			}
			rs = append(rs, r)
		}
		for i, at := range []float64{500, 1100, 1150} {
			rs = append(rs, result(int64(5+i), at, at+1, map[bool]int{true: 429, false: 200}[at == 500]))
		}
		return rs
	}
	for _, tt := range []struct {
		name, ra, acceptedRA string
		grade, raw           string
	}{
		{"decimal", "1.5", "", GradeMalformed, "1.5"},
		{"unit", "1s", "", GradeMalformed, "1s"},
		{"well-formed", "1", "", "", ""},
		{"malformed on an accepted answer only", "1", "soon", "", ""},
	} {
		inf, err := InferRecords(burst(tt.ra, tt.acceptedRA), origin, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ra := inf.RetryAfter
		if !ra.Sent || ra.Raw != tt.raw {
			t.Errorf("%s: sent %v raw %q, want sent, raw %q", tt.name, ra.Sent, ra.Raw, tt.raw)
		}
		if tt.grade != "" && (ra.Grade == nil || *ra.Grade != tt.grade || ra.Honest == nil || *ra.Honest) {
			t.Errorf("%s: grade %v honest %v, want %s and not honest", tt.name, deref(ra.Grade), ra.Honest, tt.grade)
		}
		if tt.grade == "" && ra.Grade != nil && *ra.Grade == GradeMalformed {
			t.Errorf("%s: graded malformed", tt.name)
		}
	}
}

// TestGradeEveryPairing: a cluster whose rejections have different true
// waits grades a value only when every pairing agrees.
func TestGradeEveryPairing(t *testing.T) {
	if g, ok := gradeEveryPairing(waitRange{2 * time.Second, 2 * time.Second}, []time.Duration{1900 * time.Millisecond, 2 * time.Second}); !ok || g.Grade != verify.GradeExact {
		t.Errorf("close waits: %v %v, want exact", g.Grade, ok)
	}
	if _, ok := gradeEveryPairing(waitRange{2 * time.Second, 2 * time.Second}, []time.Duration{time.Second, 5 * time.Second}); ok {
		t.Error("a value early for one rejection and late for another was graded")
	}
}

// TestAdvertisedOnTheServersClock: an HTTP-date is read against the
// answer's Date, so that a server 3 s behind the client that names the
// true moment has its wait bounded around the true one; delay-seconds
// need no clock; a date without a Date is sent but not judged.
func TestAdvertisedOnTheServersClock(t *testing.T) {
	const skew = -3 * time.Second // the server's clock behind the client's
	at := origin.Add(100 * time.Millisecond)
	// The quota is back at origin + 5 s (client): the server names the
	// next whole second of its clock, 5.7 s after origin on the client's,
	// a wait of 5.6 s from the arrival.
	named := 5600 * time.Millisecond
	serverDate := func(d time.Time) string { return d.Add(skew).UTC().Format(http.TimeFormat) }
	tests := []struct {
		name        string
		date, ra    string
		sent, ok    bool
		contains    time.Duration
		widthAtMost time.Duration
	}{
		{"a date on a clock 3 s behind", serverDate(origin.Add(150 * time.Millisecond).Truncate(time.Second)),
			origin.Add(5*time.Second + skew).Truncate(time.Second).Add(time.Second).UTC().Format(http.TimeFormat), true, true, named, 1100 * time.Millisecond},
		{"delay-seconds", "", "5", true, true, 5050 * time.Millisecond, 0},
		{"a date without Date", "", origin.Add(5 * time.Second).UTC().Format(http.TimeFormat), true, false, 0, 0},
	}
	for _, tt := range tests {
		r := result(0, 100, 150, 429)
		if tt.date != "" {
			r.Headers.Set("Date", tt.date)
		}
		r.Headers.Set("Retry-After", tt.ra)
		a, sent, ok := advertised(r, origin, observation{at: at})
		if sent != tt.sent || ok != tt.ok {
			t.Errorf("%s: sent %v, ok %v; want %v, %v", tt.name, sent, ok, tt.sent, tt.ok)
			continue
		}
		if ok && (tt.contains < a.lo || tt.contains > a.hi || a.hi-a.lo > tt.widthAtMost) {
			t.Errorf("%s: advertised wait within [%v, %v], want it to hold %v and be at most %v wide", tt.name, a.lo, a.hi, tt.contains, tt.widthAtMost)
		}
	}
}

// TestClaims: headers are claims — a limit header that shows the refill
// rate, and a reset that never changes, are reported beside the fitted
// answer, which the headers do not change; honest headers give an empty
// list, no headers null.
func TestClaims(t *testing.T) {
	o := time.Date(2030, 1, 1, 0, 0, 0, 300e6, time.UTC)
	cfg := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 10}
	run := func(srv simServer) *Inference {
		e := newSimEngine(srv, o)
		inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		return inf
	}
	if inf := run(simServer{cfg: cfg, oneWay: 2 * time.Millisecond}); inf.Advertised != nil {
		t.Errorf("no headers: advertised %+v, want null", inf.Advertised)
	}
	if inf := run(simServer{cfg: cfg, oneWay: 2 * time.Millisecond, xrl: true}); inf.Advertised == nil || len(inf.Advertised) != 0 {
		t.Errorf("honest headers: advertised %+v, want an empty list", inf.Advertised)
	}
	inf := run(simServer{cfg: cfg, oneWay: 2 * time.Millisecond, xrl: true, lie: func(h http.Header, d limiter.Decision) {
		h.Set("X-RateLimit-Limit", "2") // the rate, not the capacity
		h.Set("X-RateLimit-Reset", "60")
	}})
	if inf.Algorithm != TokenBucket || inf.Params.Capacity == nil || inf.Params.Capacity.Value != 10 {
		t.Fatalf("lying headers changed the answer: %s %+v", inf.Algorithm, inf.Params.Capacity)
	}
	fields := map[string]bool{}
	for _, a := range inf.Advertised {
		fields[a.Field] = true
		t.Logf("%s: %s", a.Field, a.Message)
	}
	if !fields["limit"] || !fields["reset"] {
		t.Errorf("advertised %+v, want limit and reset", inf.Advertised)
	}
}
