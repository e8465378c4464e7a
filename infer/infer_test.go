package infer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// origin is the start of every simulated run: 1.3 s into an epoch-aligned
// window of any whole-second length, so that epoch alignment and "windows
// start at the first request" do not coincide.
var origin = time.Date(2030, 1, 1, 0, 0, 1, 300e6, time.UTC)

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// want is what a truth-table row expects; zero fields are not checked.
type want struct {
	fam       Family
	align     string
	cr        *bool
	key       string
	limit     int64
	window    float64
	rate      float64
	capacity  int64
	undelayed int64
	queue     int64
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// check compares an inference with a row's expectations: integers exact,
// reals within 10 % (the selftest's rule).
func check(t *testing.T, name string, inf *Inference, w want) {
	t.Helper()
	if inf.Algorithm != w.fam {
		t.Errorf("%s: algorithm %s, want %s (alternatives %+v)", name, inf.Algorithm, w.fam, inf.Alternatives)
		return
	}
	if w.align != "" && (inf.Alignment == nil || *inf.Alignment != w.align) {
		t.Errorf("%s: alignment %v, want %s", name, deref(inf.Alignment), w.align)
	}
	if w.cr != nil && (inf.CountsRejected == nil || *inf.CountsRejected != *w.cr) {
		t.Errorf("%s: counts_rejected %v, want %v", name, deref(inf.CountsRejected), *w.cr)
	}
	if w.key != "" && inf.Key != w.key {
		t.Errorf("%s: key %s, want %s", name, inf.Key, w.key)
	}
	exact := func(label string, p *Param, v int64) {
		if v != 0 && (p == nil || p.Value != float64(v)) {
			t.Errorf("%s: %s %+v, want %d", name, label, p, v)
		}
	}
	near := func(label string, p *Param, v float64) {
		if v != 0 && (p == nil || math.Abs(p.Value-v)/v > 0.10) {
			t.Errorf("%s: %s %+v, want %g ±10%%", name, label, p, v)
		}
	}
	exact("limit", inf.Params.Limit, w.limit)
	near("window_s", inf.Params.WindowS, w.window)
	near("rate_per_s", inf.Params.RatePerS, w.rate)
	exact("capacity", inf.Params.Capacity, w.capacity)
	exact("undelayed", inf.Params.Undelayed, w.undelayed)
	exact("queue", inf.Params.Queue, w.queue)
	if p := inf.Params.WindowS; p != nil && (p.Low > p.Value || p.High < p.Value) {
		t.Errorf("%s: window_s %+v: value outside its range", name, p)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// truthTable is how every server algorithm must be inferred (contract:
// the selftest's truth table), on a model server without noise.
var truthTable = []struct {
	name string
	cfg  limiter.Config
	want want
}{
	{"fixed window, epoch", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: sec(4), Align: limiter.AlignEpoch},
		want{fam: FixedWindow, align: AlignEpoch, limit: 5, window: 4}},
	{"fixed window, first request", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: sec(4), Align: limiter.AlignFirstRequest},
		want{fam: FixedWindow, align: AlignFirstRequest, limit: 5, window: 4}},
	{"sliding log", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(4)},
		want{fam: SlidingLog, cr: no(), limit: 5, window: 4}},
	{"sliding log counting rejections", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(4), CountRejected: true},
		want{fam: SlidingLog, cr: yes(), limit: 5, window: 4}},
	{"sliding-window counter", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: sec(4)},
		want{fam: SlidingWindowCounter, cr: no(), limit: 5, window: 4}},
	{"sliding-window counter counting rejections", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 5, Window: sec(4), CountRejected: true},
		want{fam: SlidingWindowCounter, cr: yes(), limit: 5, window: 4}},
	{"token bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 4},
		want{fam: TokenBucket, rate: 2, capacity: 4}},
	{"token bucket of capacity 1", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.5, Capacity: 1},
		want{fam: TokenBucket, rate: 0.5, capacity: 1}},
	{"gcra", limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 4},
		want{fam: TokenBucket, rate: 1, capacity: 4}},
	{"leaky bucket nodelay", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 3, Capacity: 5, NoDelay: true},
		want{fam: TokenBucket, rate: 3, capacity: 5}},
	{"leaky bucket", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 6},
		want{fam: LeakyBucketQueue, rate: 5, capacity: 6, undelayed: 1, queue: 5}},
	{"leaky bucket with delay", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 7, Delay: 2},
		want{fam: LeakyBucketQueue, rate: 5, capacity: 7, undelayed: 3, queue: 4}},
}

// TestInferTruthTable infers every server algorithm on a noise-free model
// server with one client identity.
func TestInferTruthTable(t *testing.T) {
	t.Parallel()
	for _, tt := range truthTable {
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 100 * time.Microsecond}, origin)
		var budget time.Duration
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Tool: "rlprobe test",
			OnBudget: func(_, b time.Duration) { budget = b }})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		check(t, tt.name, inf, tt.want)
		if !inf.Complete || inf.Reproduced < 0.99 {
			t.Errorf("%s: complete %v, confidence %v; want a complete inference reproducing every outcome", tt.name, inf.Complete, inf.Reproduced)
		}
		if inf.Key != KeyUnknown {
			t.Errorf("%s: key %s with one identity, want unknown", tt.name, inf.Key)
		}
		elapsed := e.now.Sub(origin)
		if budget == 0 || elapsed > budget {
			t.Errorf("%s: ran %v, budget %v: the budget must be announced and kept", tt.name, elapsed, budget)
		}
		if inf.Requests != e.sent || inf.Schema != Schema || inf.Tool != "rlprobe test" {
			t.Errorf("%s: requests %d (engine sent %d), schema %q, tool %q", tt.name, inf.Requests, e.sent, inf.Schema, inf.Tool)
		}
		t.Logf("%s: %s in %v, %d requests", tt.name, inf.Algorithm, elapsed.Round(time.Millisecond), inf.Requests)
	}
}

// TestInferNoise infers with two identities, per-client limits, arrival
// jitter of up to 3 ms that reorders bursts, and honest Retry-After.
func TestInferNoise(t *testing.T) {
	t.Parallel()
	rows := []int{1, 3, 5, 6, 8, 11}
	for _, i := range rows {
		tt := truthTable[i]
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 300 * time.Microsecond, perClient: true, retry: true, status: 503}, origin)
		e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(3 * time.Millisecond))) }
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "header:X-Key"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		w := tt.want
		w.key = "header:X-Key"
		check(t, tt.name, inf, w)
		if inf.RejectStatus == nil || *inf.RejectStatus != 503 {
			t.Errorf("%s: reject status %v, want 503", tt.name, deref(inf.RejectStatus))
		}
		if !inf.RetryAfter.Sent || inf.RetryAfter.Honest == nil || !*inf.RetryAfter.Honest {
			t.Errorf("%s: retry_after %+v honest %v, want sent and honest", tt.name, inf.RetryAfter, deref(inf.RetryAfter.Honest))
		}
	}
}

// TestInferPauseIsNotAQueue: one accepted answer held by a pause (a GC,
// a busy scheduler) in a bucket's first exhausting burst looks like a queue
// once; the repeated burst holds nothing, and the bucket is inferred as
// what it is. A pause in a later burst, of a bucket or of a queue, changes
// nothing either.
func TestInferPauseIsNotAQueue(t *testing.T) {
	t.Parallel()
	tb := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5}
	lbq := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 7, Delay: 2}
	tests := []struct {
		name  string
		cfg   limiter.Config
		burst int           // hold an accepted answer of the burst-th exhausting burst (from 1)
		hold  time.Duration // for this long
		want  want
	}{
		{"token bucket, 120 ms pause in the first exhausting burst", tb, 1, 120 * time.Millisecond, want{fam: TokenBucket, rate: 4, capacity: 5}},
		{"token bucket, pause of one refill interval in the first exhausting burst", tb, 1, 250 * time.Millisecond, want{fam: TokenBucket, rate: 4, capacity: 5}},
		{"token bucket, pause in the second", tb, 2, 250 * time.Millisecond, want{fam: TokenBucket, rate: 4, capacity: 5}},
		{"leaky bucket with delay, pause in the second", lbq, 2, 120 * time.Millisecond, want{fam: LeakyBucketQueue, rate: 5, undelayed: 3, queue: 4}},
	}
	for _, tt := range tests {
		// A first run without pauses finds the request to hold; the
		// session is deterministic up to the pause.
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 300 * time.Microsecond}, origin)
		e.record = true
		if _, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock}); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		pause, bursts := int64(-1), 0
		for i := 0; i < len(e.recorded) && pause < 0; {
			j := i
			for j < len(e.recorded) && e.recorded[j].Sched == e.recorded[i].Sched {
				j++
			}
			acc, rej := -1, 0
			for _, r := range e.recorded[i:j] {
				if r.Status == 200 {
					acc = int(r.Seq)
				} else {
					rej++
				}
			}
			if acc >= 0 && rej > 0 {
				if bursts++; bursts == tt.burst {
					pause = int64(acc)
				}
			}
			i = j
		}
		if pause < 0 {
			t.Fatalf("%s: no exhausting burst %d to pause in", tt.name, tt.burst)
		}
		e = newSimEngine(simServer{cfg: tt.cfg, oneWay: 300 * time.Microsecond}, origin)
		e.stall = func(seq int64) time.Duration {
			if seq == pause {
				return tt.hold
			}
			return 0
		}
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		check(t, tt.name, inf, tt.want)
	}
}

// TestInferGlobalKey: two identities sharing one quota give key global,
// also when quota refilled between the exhausting burst and the second
// identity's requests (a fast bucket, a draining queue): the models, not a
// rule of thumb, decide.
func TestInferGlobalKey(t *testing.T) {
	t.Parallel()
	for _, cfg := range []limiter.Config{
		{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5},
		{Algorithm: limiter.TokenBucket, Rate: 40, Capacity: 3},
		{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 7, Delay: 2},
	} {
		rng := rand.New(rand.NewPCG(3, 4))
		e := newSimEngine(simServer{cfg: cfg, oneWay: time.Millisecond}, origin)
		e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(20 * time.Millisecond))) }
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2, KeyName: "ip"})
		if err != nil {
			t.Fatal(err)
		}
		if inf.Key != KeyGlobal {
			t.Errorf("%v %v/s: key %s, want global", cfg.Algorithm, cfg.Rate, inf.Key)
		}
	}
}

// TestInferNone: a server that never refuses, and serves a steady stream
// at half the rate its bursts reached as offered with flat latency, is
// none, with the rate of accepted answers reached.
func TestInferNone(t *testing.T) {
	e := newSimEngine(simServer{}, origin)
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if inf.Algorithm != None || inf.MaxRatePerS == nil || *inf.MaxRatePerS < 1000 || !inf.Complete || inf.RejectStatus != nil {
		t.Errorf("inference %+v, want none with a max rate of at least 1000/s", inf)
	}
	if inf.Requests != 16+64+256+1024+200 {
		t.Errorf("requests %d, want the four bursts and two seconds of a steady stream at 100/s (1560)", inf.Requests)
	}
}

// TestInferRetryAfterLies grades Retry-After (verify.GradeRetryAfter): a
// server that rounds the true wait up to whole seconds is rounded-up (also
// when the true wait is a fraction of a second), one that says less is
// early, one that says far more is late; honest is exact or rounded-up.
func TestInferRetryAfterLies(t *testing.T) {
	t.Parallel()
	window := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: sec(4), Align: limiter.AlignFirstRequest}
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 3}
	for _, tt := range []struct {
		name   string
		cfg    limiter.Config
		scale  float64 // advertised = scale × true wait (rounded up)
		add    time.Duration
		grade  string
		honest bool
	}{
		{"accurate, whole seconds", window, 1, 0, "rounded-up", true},
		{"accurate, sub-second waits in whole seconds", bucket, 1, 0, "rounded-up", true},
		{"early", window, 0.5, 0, "early", false},
		{"late", window, 1, 8 * time.Second, "late", false},
		{"30 s when quota returns in 2 s", bucket, 1, 30 * time.Second, "late", false},
	} {
		e := newSimEngine(simServer{cfg: tt.cfg, retry: true}, origin)
		e.retryScale, e.retryAdd = tt.scale, tt.add
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		ra := inf.RetryAfter
		if !ra.Sent || ra.Honest == nil || *ra.Honest != tt.honest || ra.Grade == nil || *ra.Grade != tt.grade || ra.TrueWaitS == nil {
			t.Errorf("%s: retry_after sent %v honest %v grade %v true wait %v, want honest=%v grade %s",
				tt.name, ra.Sent, deref(ra.Honest), deref(ra.Grade), deref(ra.TrueWaitS), tt.honest, tt.grade)
		}
	}
}

// TestInferRetryAfterUnjudged: a quota that never comes back within
// infer's horizon (one request an hour, spent before infer starts) leaves
// Retry-After unjudged, since any model's wait would be a guess; the honest
// hour it advertises is not called dishonest.
func TestInferRetryAfterUnjudged(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Hour, Align: limiter.AlignFirstRequest}
	e := newSimEngine(simServer{cfg: cfg, retry: true}, origin)
	if _, err := e.Run(context.Background(), burstSchedule(1)); err != nil {
		t.Fatal(err)
	}
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if !inf.RetryAfter.Sent || inf.RetryAfter.Honest != nil {
		t.Errorf("retry_after %+v (honest %v), want sent and not judged", inf.RetryAfter, deref(inf.RetryAfter.Honest))
	}
	if inf.Complete {
		t.Errorf("complete, want incomplete: nothing came back within the horizon")
	}
}

// TestInferBudget: the request cap and the duration cap end the
// experiments early, with an honest incomplete result.
func TestInferBudget(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(4)}
	for _, opts := range []Options{{MaxRequests: 40}, {MaxDuration: 6 * time.Second}} {
		e := newSimEngine(simServer{cfg: cfg}, origin)
		opts.Origin, opts.Now = origin, e.clock
		inf, err := Infer(context.Background(), e, opts)
		if err != nil {
			t.Fatal(err)
		}
		if inf.Complete {
			t.Errorf("caps %d requests, %v: complete, want incomplete", opts.MaxRequests, opts.MaxDuration)
		}
		if opts.MaxRequests > 0 && e.sent > opts.MaxRequests {
			t.Errorf("sent %d requests over the cap of %d", e.sent, opts.MaxRequests)
		}
		if opts.MaxDuration > 0 && e.now.Sub(origin) > opts.MaxDuration {
			t.Errorf("ran %v over the cap of %v", e.now.Sub(origin), opts.MaxDuration)
		}
		if inf.Algorithm == None {
			t.Errorf("caps %d requests, %v: concluded none although requests were refused", opts.MaxRequests, opts.MaxDuration)
		}
	}
}

// TestInferEngineError: an engine failure ends Infer with the error and
// what was concluded so far.
func TestInferEngineError(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 4}
	e := newSimEngine(simServer{cfg: cfg}, origin)
	boom := errors.New("target went away")
	e.failAfter, e.failErr = 20, boom
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "infer: ") {
		t.Fatalf("error %v, want one wrapping the engine's, prefixed infer:", err)
	}
	if inf == nil || inf.Complete {
		t.Fatalf("inference %+v, want a partial one", inf)
	}
}

// TestInferPrior: results recorded before Infer (the preflight) are part
// of the replay: without them the first count would be one too many.
func TestInferPrior(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: sec(3), Align: limiter.AlignFirstRequest}
	e := newSimEngine(simServer{cfg: cfg}, origin)
	pre, _ := e.Run(context.Background(), burstSchedule(1))
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Prior: pre})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "with a preflight", inf, want{fam: FixedWindow, limit: 6, window: 3})
	if inf.Requests != e.sent {
		t.Errorf("requests %d, want %d (the preflight included)", inf.Requests, e.sent)
	}
}

// TestInferRecordsOffline fits a recorded run without sending anything and
// finds what the live inference found.
func TestInferRecordsOffline(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 4, Window: sec(2)}
	e := newSimEngine(simServer{cfg: cfg, perClient: true}, origin)
	e.record = true
	live, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	off, err := InferRecords(e.recorded, origin, Options{KeyName: "header:X-Key"})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "offline", off, want{fam: live.Algorithm, limit: 4, window: 2, key: "header:X-Key"})
	if off.Requests != len(e.recorded) {
		t.Errorf("offline requests %d, want %d", off.Requests, len(e.recorded))
	}
	if _, err := InferRecords([]record.Result{{Outcome: record.OutcomeNotSent}}, origin, Options{}); err == nil {
		t.Error("InferRecords without any answer: no error")
	}
}

func TestParseFamily(t *testing.T) {
	for _, f := range Families {
		if got, err := ParseFamily(string(f)); got != f || err != nil {
			t.Errorf("ParseFamily(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFamily("gcra"); err == nil || !strings.Contains(err.Error(), "token-bucket") {
		t.Errorf("ParseFamily(gcra) error %v, want one listing the families", err)
	}
}

// TestInferBeyondHorizon: a window longer than infer looks for (no
// recovery within 2·MaxWindow + 10 s) ends the experiments with an honest
// incomplete result, without spending the request budget.
func TestInferBeyondHorizon(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: sec(30), Align: limiter.AlignFirstRequest}
	e := newSimEngine(simServer{cfg: cfg}, origin)
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, MaxWindow: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if inf.Complete || inf.Requests > 100 || e.now.Sub(origin) > 20*time.Second {
		t.Errorf("complete %v after %d requests and %v; want an incomplete result within the 14 s horizon", inf.Complete, inf.Requests, e.now.Sub(origin))
	}
}
