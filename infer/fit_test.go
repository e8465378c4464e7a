package infer

import (
	"context"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// result builds a response result: written at wrote, first byte at ttfb
// (ms since origin), with a status.
func result(seq int64, wrote, ttfb float64, status int) record.Result {
	ms := func(x float64) int64 { return int64(x * float64(time.Millisecond)) }
	return record.Result{Type: record.TypeResult, Seq: seq, Client: "k1", Outcome: record.OutcomeResponse,
		Sched: ms(wrote), Sent: ms(wrote), Wrote: ms(wrote), TTFB: ms(ttfb), Done: ms(ttfb), Status: status, Headers: http.Header{}}
}

// TestObserveClasses: infer counts what record.Classify says, the rule
// verify follows too — with 429 declared, a 503 is a rejection (and a
// mismatch), and an answer with Age: 5 is a cache hit, neither accepted
// nor rejected, whatever its status.
func TestObserveClasses(t *testing.T) {
	cached := result(0, 0, 1, 200)
	cached.Headers.Set("Age", "5")
	cached429 := result(0, 0, 1, 429)
	cached429.Headers.Set("Age", "5")
	tests := []struct {
		name     string
		r        record.Result
		declared int
		want     record.Class
	}{
		{"200", result(0, 0, 1, 200), 0, record.ClassAccepted},
		{"204 under 429", result(0, 0, 1, 204), 429, record.ClassAccepted},
		{"429", result(0, 0, 1, 429), 0, record.ClassRejected},
		{"503", result(0, 0, 1, 503), 0, record.ClassRejected},
		{"503 under a declared 429", result(0, 0, 1, 503), 429, record.ClassRejected},
		{"403 declared", result(0, 0, 1, 403), 403, record.ClassRejected},
		{"404", result(0, 0, 1, 404), 0, record.ClassOther},
		{"200 with Age: 5", cached, 0, record.ClassOther},
		{"429 with Age: 5", cached429, 429, record.ClassOther},
		{"reset", record.Result{Outcome: record.OutcomeError, Err: record.ErrReset}, 0, record.ClassError},
		{"not sent", record.Result{Outcome: record.OutcomeNotSent}, 0, record.ClassNotSent},
	}
	for _, tt := range tests {
		if got, _ := record.Classify(tt.r, tt.declared); got != tt.want {
			t.Errorf("%s: record.Classify = %v, want %v", tt.name, got, tt.want)
		}
		o := observe([]record.Result{tt.r}, origin, tt.declared)
		got := record.ClassOther
		switch {
		case o.accepted == 1:
			got = record.ClassAccepted
		case o.rejected == 1:
			got = record.ClassRejected
		}
		want := tt.want
		if !want.Counts() {
			want = record.ClassOther // infer sets aside all that does not count
		}
		if got != want || len(o.list) != o.accepted+o.rejected {
			t.Errorf("%s: infer counts it %v (%d observations), want %v", tt.name, got, len(o.list), want)
		}
	}
}

func TestObserve(t *testing.T) {
	results := []record.Result{
		result(0, 0, 1, 200),       // fastest round trip: 1 ms
		result(1, 0.5, 201.5, 200), // held 200 ms: queued
		result(2, 0.7, 1.9, 503),
		result(3, 100, 101, 503), // a later, lone request
		result(4, 0.9, 2, 404),   // other: ignored
	}
	o := observe(results, origin, 0)
	if len(o.list) != 4 || o.accepted != 2 || o.rejected != 2 || o.rejectStatus != 503 {
		t.Fatalf("observations %d (accepted %d, rejected %d, status %d), want 4 (2, 2, 503)", len(o.list), o.accepted, o.rejected, o.rejectStatus)
	}
	if o.base != time.Millisecond || !o.queueing {
		t.Errorf("base %v, queueing %v; want 1ms and queueing (an acceptance held 200 ms, rejections answered at once)", o.base, o.queueing)
	}
	// Arrival = last byte written + half the fastest round trip.
	if got := o.list[0].at.Sub(origin); got != 500*time.Microsecond {
		t.Errorf("first arrival %v, want 500µs", got)
	}
	if got := o.list[1].delay; got != 200*time.Millisecond {
		t.Errorf("queued delay %v, want 200ms (201ms latency less the fastest, 1ms)", got)
	}
	// The three requests within 2 ms of each other form one cluster.
	if len(o.clusters) != 2 || o.clusters[0] != [2]int{0, 3} {
		t.Errorf("clusters %v, want [[0 3] [3 4]]", o.clusters)
	}
	// The server's echo, when within the request's bounds, is the arrival.
	echo := int64(30 * time.Millisecond)
	r := result(0, 20, 40, 200)
	r.Arrival = &echo
	if o := observe([]record.Result{r}, origin, 0); o.list[0].at.Sub(origin) != 30*time.Millisecond {
		t.Errorf("arrival with echo %v, want the echo (30ms)", o.list[0].at.Sub(origin))
	}
}

// burstAt builds one exhausting burst at ms: accepted requests answered in
// 1 ms except those held by the given ms, then two rejections.
func burstAt(seq int64, at float64, held ...float64) []record.Result {
	rs := []record.Result{result(seq, at, at+1, 200), result(seq+1, at+0.1, at+1.1, 200)}
	for i, h := range held {
		rs = append(rs, result(seq+2+int64(i), at+0.2, at+1.2+h, 200))
	}
	n := seq + 2 + int64(len(held))
	return append(rs, result(n, at+0.3, at+1.3, 429), result(n+1, at+0.4, at+1.4, 429))
}

func TestQueueingIsSystematic(t *testing.T) {
	join := func(bursts ...[]record.Result) []record.Result { return slices.Concat(bursts...) }
	var steady, steadyQueued []record.Result
	for i := range 12 { // one request every 100 ms; a queue holds every other one
		steady = append(steady, result(int64(i), float64(i)*100, float64(i)*100+1, 200))
		held := 0.0
		if i%2 == 1 {
			held = 150
		}
		steadyQueued = append(steadyQueued, result(int64(i), float64(i)*100, float64(i)*100+1+held, 200))
	}
	steady[5].TTFB += int64(150 * time.Millisecond) // one pause
	steady[5].Done = steady[5].TTFB
	steady = append(steady, result(12, 1200, 1201, 429))
	steadyQueued = append(steadyQueued, result(12, 1200, 1201, 429))
	tests := []struct {
		name    string
		results []record.Result
		want    bool
	}{
		{"one burst holding one request (nginx burst=1): queueing until told otherwise", burstAt(0, 0, 250), true},
		{"a repeated burst holds it again: a queue", join(burstAt(0, 0, 250), burstAt(10, 1000, 240)), true},
		{"a repeated burst holds nothing: the first hold was a pause", join(burstAt(0, 0, 250), burstAt(10, 1000)), false},
		{"one pause among three exhausting bursts", join(burstAt(0, 0), burstAt(10, 1000, 80), burstAt(20, 2000)), false},
		{"a staircase in two of three bursts", join(burstAt(0, 0, 200, 400), burstAt(10, 1000), burstAt(20, 2000, 200, 400)), true},
		{"no burst, one pause among single requests", steady, false},
		{"no burst, every other single request held", steadyQueued, true},
	}
	for _, tt := range tests {
		if got := observe(tt.results, origin, 0).queueing; got != tt.want {
			t.Errorf("%s: queueing %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMaxRatePerSecond(t *testing.T) {
	var rs []record.Result
	for i := range 30 { // 10 per second for 3 s, then 25 within 100 ms
		rs = append(rs, result(int64(i), float64(i)*100, float64(i)*100+1, 200))
	}
	for i := range 25 {
		rs = append(rs, result(int64(30+i), 5000+float64(i)*4, 5001+float64(i)*4, 200))
	}
	if got := observe(rs, origin, 0).maxRatePerSecond(); got != 25 {
		t.Errorf("max rate %v, want 25 (the densest second)", got)
	}
}

func TestGrids(t *testing.T) {
	g := geomGrid(1, 2, 1.5)
	if len(g) != 3 || g[0] != 1 || g[1] != 1.5 || g[2] != 2 {
		t.Errorf("geomGrid(1, 2, 1.5) = %v, want [1 1.5 2]", g)
	}
	u := unitGrid(1.9985, 2.002, maxUnitPoints)
	if !slices.Equal(u, []float64{1.999, 2, 2.001, 2.002}) {
		t.Errorf("unitGrid(1.9985, 2.002, maxUnitPoints) = %v, want whole milliseconds", u)
	}
	// Wide ranges use a coarser round unit, never more than maxUnitPoints.
	if u := unitGrid(0.005, 120, maxUnitPoints); len(u) > maxUnitPoints || math.Mod(u[1]*1000, 10) != 0 {
		t.Errorf("unitGrid(0.005, 120, maxUnitPoints): %d points, second %v; want ≤ %d multiples of 10 ms", len(u), u[1], maxUnitPoints)
	}
}

func TestCountCandidates(t *testing.T) {
	// A burst of 16 from idle: 5 accepted, then a lone acceptance.
	var rs []record.Result
	for i := range 16 {
		st := 429
		if i < 5 {
			st = 200
		}
		rs = append(rs, result(int64(i), 0, 1, st))
	}
	rs = append(rs, result(16, 500, 501, 200))
	counts, delays := countCandidates(observe(rs, origin, 0))
	if !slices.Equal(counts, []int64{3, 4, 5, 6}) || !slices.Equal(delays, []int64{3, 4, 5}) {
		t.Errorf("candidates %v, delays %v; want 3…6 around the burst's 5, delays 3…5", counts, delays)
	}
}

// TestEdgeFilter: an epoch-aligned fixed window must have an edge between
// a refusal and the next acceptance.
func TestEdgeFilter(t *testing.T) {
	// Origin is 1.3 s into an epoch window of 2 s: the edge is at +0.7 s.
	rs := []record.Result{result(0, 0, 0.1, 200), result(1, 0, 0.1, 429), result(2, 600, 600.1, 429), result(3, 800, 800.1, 200)}
	es := findEdges(observe(rs, origin, 0), false)
	if len(es.gaps) != 1 {
		t.Fatalf("gaps %+v, want one", es.gaps)
	}
	fw := variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignEpoch}
	got := es.filter(fw, []float64{1, 2, 4, 3})
	for _, w := range []float64{1, 2, 4, 3} {
		lo, hi := unixSec(origin.Add(600*time.Millisecond))-clusterGap.Seconds(), unixSec(origin.Add(800*time.Millisecond))+clusterGap.Seconds()
		edge := math.Floor(hi/w) > math.Floor(lo/w)
		if slices.Contains(got, w) != edge {
			t.Errorf("window %vs kept %v, but an edge in the gap is %v", w, slices.Contains(got, w), edge)
		}
	}
	if !slices.Contains(got, 2) || slices.Contains(got, 4) {
		t.Errorf("filter kept %v; want 2 s (edge at +0.7 s) and not 4 s (edge at +2.7 s)", got)
	}
}

// TestSearchRecoversParameters fits a recorded run of every window family
// and checks that the true parameters are among the best fits.
func TestSearchRecoversParameters(t *testing.T) {
	for _, cfg := range []limiter.Config{
		{Algorithm: limiter.FixedWindow, Limit: 4, Window: sec(2), Align: limiter.AlignFirstRequest},
		{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 3},
	} {
		e := newSimEngine(simServer{cfg: cfg}, origin)
		var all []record.Result
		run := func(s patterns.Schedule) {
			res, _ := e.Run(context.Background(), s)
			all = append(all, res...)
		}
		run(burstSchedule(10))
		for k := range 12 {
			e.wait(time.Duration(float64(20*time.Millisecond) * math.Pow(math.Sqrt2, float64(k))))
			run(burstSchedule(1))
		}
		o := observe(all, origin, 0)
		f := search(o, defaultSpace(o, time.Minute, false))
		w, ok := f.winner()
		if !ok || w.miss != 0 {
			t.Errorf("%v: winner %v misses %d, want a perfect fit", cfg.Algorithm, w.h, w.miss)
			continue
		}
		truth := false
		for _, s := range f.plausible(0) {
			h := s.h
			if string(h.v.alg) == string(cfg.Algorithm) && (h.n == cfg.Limit || h.n == cfg.Capacity) &&
				(math.Abs(h.x-cfg.Window.Seconds())/cfg.Window.Seconds() < 0.05 || math.Abs(h.x-cfg.Rate)/max(cfg.Rate, 1e-9) < 0.05) {
				truth = true
			}
		}
		if !truth {
			t.Errorf("%v: the true parameters are not among the best fits", cfg.Algorithm)
		}
	}
}

// TestReplayTolerance: a lone request a hair past a model's boundary still
// counts as reproduced; one well past it does not.
func TestReplayTolerance(t *testing.T) {
	h := hyp{v: variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignFirstRequest}, n: 1, x: 1}
	for _, tt := range []struct {
		second float64 // ms after the first request, accepted
		miss   int
	}{
		{1000.5, 0}, // past the 1 s window: fine
		{999.5, 0},  // 0.5 ms early: within the tolerance (1 ms for a 1 s window)
		{990, 1},    // 10 ms early: a miss
	} {
		o := observe([]record.Result{result(0, 0, 0, 200), result(1, tt.second, tt.second, 200)}, origin, 0)
		if r := replayObs(h, o, false, -1); r.miss != tt.miss {
			t.Errorf("second request at +%vms: %d misses, want %d", tt.second, r.miss, tt.miss)
		}
	}
}

// TestExtendContinuesReplay: extending a fit with newer observations gives
// the same misses as fitting everything from scratch.
func TestExtendContinuesReplay(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 3, Window: sec(1)}
	e := newSimEngine(simServer{cfg: cfg}, origin)
	var all []record.Result
	res, _ := e.Run(context.Background(), burstSchedule(6))
	all = append(all, res...)
	e.wait(sec(1.2))
	res, _ = e.Run(context.Background(), burstSchedule(2))
	all = append(all, res...)
	o1 := observe(all, origin, 0)
	f1 := search(o1, defaultSpace(o1, time.Minute, false))
	e.wait(sec(0.3))
	res, _ = e.Run(context.Background(), burstSchedule(3))
	all = append(all, res...)
	o2 := observe(all, origin, 0)
	f2 := f1.extend(o2)
	if f2 == nil {
		t.Fatal("extend refused observations that extend the fit's")
	}
	for _, s := range f2.pool {
		if full := replayObs(s.h, o2, false, -1); full.miss != s.miss {
			t.Errorf("%v: extended fit misses %d, a full replay %d", s.h, s.miss, full.miss)
		}
	}
	// Observations that do not extend the fit's are refused.
	if f1.extend(observe(all[2:], origin, 0)) != nil {
		t.Error("extend accepted observations that are not a continuation")
	}
}

// benchRun records a token-bucket run of the opening experiments.
func benchRun() *observations {
	e := newSimEngine(simServer{cfg: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 4}}, origin)
	var all []record.Result
	for range 4 {
		res, _ := e.Run(context.Background(), burstSchedule(16))
		all = append(all, res...)
		for k := range 10 {
			e.wait(time.Duration(float64(20*time.Millisecond) * math.Pow(math.Sqrt2, float64(k))))
			res, _ := e.Run(context.Background(), burstSchedule(1))
			all = append(all, res...)
		}
	}
	return observe(all, origin, 0)
}

// BenchmarkReplay measures one model replayed over about 100 outcomes.
func BenchmarkReplay(b *testing.B) {
	o := benchRun()
	h := hyp{v: vTB, n: 4, x: 2}
	for b.Loop() {
		replayObs(h, o, false, -1)
	}
	b.ReportMetric(float64(len(o.list)), "outcomes")
}

// BenchmarkSearch measures a whole first fit (every variant, count and
// grid point) over about 100 outcomes.
func BenchmarkSearch(b *testing.B) {
	o := benchRun()
	sp := defaultSpace(o, time.Minute, false)
	for b.Loop() {
		search(o, sp)
	}
}

// TestBracketFindsTheWholeRange: the ends bracket finds for a winner are
// the ends of the range over which it fits as well — the value just past
// each misses more — and the range holds the truth, however narrowly the
// search sampled it; widest calls a range wider than maxSpread wide.
func TestBracketFindsTheWholeRange(t *testing.T) {
	t.Parallel()
	for _, cfg := range []limiter.Config{
		{Algorithm: limiter.FixedWindow, Limit: 4, Window: sec(2), Align: limiter.AlignFirstRequest},
		{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 3},
		{Algorithm: limiter.SlidingLog, Limit: 3, Window: sec(1.5)},
	} {
		e := newSimEngine(simServer{cfg: cfg}, origin)
		var all []record.Result
		res, _ := e.Run(context.Background(), burstSchedule(8))
		all = append(all, res...)
		for k := range 6 {
			e.wait(time.Duration(float64(100*time.Millisecond) * math.Pow(2, float64(k))))
			res, _ = e.Run(context.Background(), burstSchedule(1))
			all = append(all, res...)
		}
		o := observe(all, origin, 0)
		f := search(o, defaultSpace(o, time.Minute, false))
		w, ok := f.winner()
		if !ok {
			t.Fatalf("%v: no winner", cfg.Algorithm)
		}
		f.bracket(w, o)
		lo, hi := w.h.x, w.h.x
		for _, b := range f.brackets {
			if b.miss > w.miss || b.h.v != w.h.v || b.h.n != w.h.n {
				t.Errorf("%v: bracket %v misses %d, the winner %v %d", cfg.Algorithm, b.h, b.miss, w.h, w.miss)
			}
			lo, hi = math.Min(lo, b.h.x), math.Max(hi, b.h.x)
		}
		for _, past := range []float64{lo / (1 + 2*bracketFirstStep), hi * (1 + 2*bracketFirstStep)} {
			h := w.h
			h.x = past
			if r := replayObs(h, o, false, -1); !r.pruned && r.miss <= w.miss && past/w.h.x < 1+bracketReach && w.h.x/past < 1+bracketReach {
				t.Errorf("%v: %v, past the range [%g, %g], fits as well (%d misses)", cfg.Algorithm, h, lo, hi, r.miss)
			}
		}
		truth := cfg.Window.Seconds()
		if cfg.Rate > 0 {
			truth = cfg.Rate
		}
		if string(w.h.v.alg) == string(cfg.Algorithm) && w.h.n == cfg.Limit+cfg.Capacity && (truth < lo || truth > hi) {
			t.Errorf("%v: the truth %g lies outside the range [%g, %g] of %v", cfg.Algorithm, truth, lo, hi, w.h)
		}
		_, _, wide := f.widest(w)
		if want := hi/lo > maxSpread; wide != want {
			t.Errorf("%v: range [%g, %g]: wide %v, want %v", cfg.Algorithm, lo, hi, wide, want)
		}
		t.Logf("%v: %v, range [%g, %g]", cfg.Algorithm, w.h, lo, hi)

	}
}

// TestSearchCompactKeepsWhatFinishKeeps: compacting a search's list drops
// exactly the hypotheses more than the slack behind their family's best
// (those fit.finish would drop), keeps the others in order, and leaves room
// to grow when most stay.
func TestSearchCompactKeepsWhatFinishKeeps(t *testing.T) {
	sr := &searcher{f: &fit{slack: 2}, famMiss: map[Family]int{SlidingLog: 3, TokenBucket: 0}}
	var all []scored
	for i, m := range []struct {
		v    variant
		miss int
	}{{vSL, 3}, {vSL, 5}, {vSL, 6}, {vTB, 0}, {vTB, 2}, {vTB, 3}, {vFWFirst, 9}} {
		all = append(all, scored{h: hyp{v: m.v, n: int64(i + 1)}, miss: m.miss})
	}
	sr.all = slices.Clip(all)
	sr.compact()
	var kept []int64
	for _, s := range sr.all {
		kept = append(kept, s.h.n)
	}
	// SlidingLog within 3+2, TokenBucket within 0+2; a family with no
	// best yet (fixed window here) counts as best 0.
	if want := []int64{1, 2, 4, 5}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if cap(sr.all)-len(sr.all) < len(sr.all) {
		t.Errorf("len %d, cap %d: with most kept, room for as many again", len(sr.all), cap(sr.all))
	}
}

// TestEqualRangeContains: a validation's prediction is the answer's
// equally good range, so a refit holds it when it names a hypothesis of
// the range — the same variant, count and delay, each parameter between
// the range's ends — and breaks it otherwise.
func TestEqualRangeContains(t *testing.T) {
	block := variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignFirstRequest, beh: BehaviourBlock}
	log := variant{fam: SlidingLog, alg: limiter.SlidingLog, beh: BehaviourBlock}
	w := hyp{v: block, n: 4, x: 1.474, p: 7.50}
	r := equalRange{w: w, x: [2]float64{1.474, 1.52}, p: [2]float64{7.49, 7.51}}
	for _, tc := range []struct {
		name string
		h    hyp
		want bool
	}{
		{"the answer itself", w, true},
		{"a window a fraction of a millisecond longer", hyp{v: block, n: 4, x: 1.4744, p: 7.50}, true},
		{"the other end of the range", hyp{v: block, n: 4, x: 1.52, p: 7.51}, true},
		{"a window beyond the range", hyp{v: block, n: 4, x: 1.53, p: 7.50}, false},
		{"a window below it", hyp{v: block, n: 4, x: 1.47, p: 7.50}, false},
		{"a block beyond the range", hyp{v: block, n: 4, x: 1.5, p: 7.6}, false},
		{"another count", hyp{v: block, n: 5, x: 1.5, p: 7.50}, false},
		{"another family", hyp{v: log, n: 4, x: 1.5, p: 7.50}, false},
	} {
		if got := r.contains(tc.h); got != tc.want {
			t.Errorf("%s: contains(%v) = %v, want %v", tc.name, tc.h, got, tc.want)
		}
	}
}

// TestRivalOfABehaviourAnswer: another family within the noise the run
// showed is a rival of an answer with a behaviour; the noise is the fit's
// slack, but no more than one outcome beyond the answer's own misses.
func TestRivalOfABehaviourAnswer(t *testing.T) {
	logBlock := variant{fam: SlidingLog, alg: limiter.SlidingLog, beh: BehaviourBlock}
	counterBlock := variant{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignFirstRequest, beh: BehaviourBlock}
	for _, tc := range []struct {
		name          string
		answer, rival int // misses
		slack         int
		tied          bool
	}{
		{"the answer reproduces all, the rival misses one", 0, 1, 5, true},
		{"the answer reproduces all, the rival misses two", 0, 2, 5, false},
		{"the answer reproduces all, the rival misses four of a slack of five", 0, 4, 5, false},
		{"the answer misses three: noise, and the rival's four are within it", 3, 4, 5, true},
		{"the answer misses three, the rival five", 3, 5, 5, true},
		{"the answer misses three, the rival eight: beyond the slack", 3, 8, 4, false},
	} {
		f := &fit{slack: tc.slack, best: map[variant]scored{
			logBlock:     {h: hyp{v: logBlock, n: 8, x: 2, p: 8}, miss: tc.answer},
			counterBlock: {h: hyp{v: counterBlock, n: 8, x: 2, p: 8}, miss: tc.rival},
		}}
		if _, tied := f.rival(f.best[logBlock]); tied != tc.tied {
			t.Errorf("%s: tied %v, want %v", tc.name, tied, tc.tied)
		}
	}
}
