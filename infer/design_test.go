package infer

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

var (
	vFWFirst = variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignFirstRequest}
	vSL      = variant{fam: SlidingLog, alg: limiter.SlidingLog}
	vTB      = variant{fam: TokenBucket, alg: limiter.TokenBucket}
)

// idle is a hypothesis with a fresh state and a given number of misses.
func idle(v variant, n int64, x float64, miss int) scored {
	return scored{h: hyp{v: v, n: n, x: x}, miss: miss}
}

// TestInformation: an experiment that splits two equally likely answers is
// worth one bit; one that only splits hypotheses of the same answer (within
// 2 %) is worth nothing; one that splits nobody is worth nothing.
func TestInformation(t *testing.T) {
	s0 := origin.Add(time.Second)
	dz := &designer{client: "k1", ws: weigh([]scored{
		idle(vTB, 2, 1, 0),    // capacity 2: a burst of 3 from idle gives 2
		idle(vTB, 3, 1, 0),    // capacity 3: gives 3
		idle(vTB, 3, 1.01, 0), // same answer as the previous, to 2 %
	}, 0)}
	burst := newBuilder("burst").burst(s0, 3).done()
	if got := dz.information(&burst); math.Abs(got-1) > 1e-9 {
		t.Errorf("burst of 3 splitting capacity 2 from 3: %v bits, want 1", got)
	}
	two := newBuilder("burst").burst(s0, 2).done()
	if got := dz.information(&two); got > 1e-9 {
		t.Errorf("burst of 2 that every hypothesis admits: %v bits, want 0", got)
	}
	same := &designer{client: "k1", ws: weigh([]scored{idle(vTB, 3, 1, 0), idle(vTB, 3, 1.01, 0)}, 0)}
	// Exhaust, then probe where 1/s and 1.01/s disagree: same answer.
	ex := newBuilder("recovery").burst(s0, 3).burst(s0.Add(996*time.Millisecond), 1).done()
	if got := same.information(&ex); got > 1e-9 {
		t.Errorf("splitting rates 1%% apart: %v bits, want 0", got)
	}
}

// TestWeigh: families share equally, misses cost a factor of 20 each, and a
// group weighs as its best hypothesis, not as the number that fit.
func TestWeigh(t *testing.T) {
	p := []scored{
		idle(vTB, 3, 1, 0), idle(vTB, 3, 1.1, 1), idle(vTB, 3, 1.2, 1),
		idle(vSL, 3, 2, 1),
	}
	ws := weigh(p, 0)
	mass := map[Family]float64{}
	total := 0.0
	for _, w := range ws {
		mass[w.s.h.v.fam] += w.w
		total += w.w
	}
	if got := mass[SlidingLog] / mass[TokenBucket]; math.Abs(got-missLikelihood) > 1e-9 {
		t.Errorf("sliding-log (1 miss) / token-bucket (0) = %v, want %v", got, missLikelihood)
	}
	if len(weigh(p, 2)) > 4 {
		t.Errorf("weigh with limit 2 kept %d hypotheses", len(weigh(p, 2)))
	}
}

func TestResolved(t *testing.T) {
	tests := []struct {
		name string
		p    []scored
		want bool
	}{
		{"one family, rates within 10%", []scored{idle(vTB, 3, 1, 0), idle(vTB, 3, 1.08, 0)}, true},
		{"one family, rates 20% apart", []scored{idle(vTB, 3, 1, 0), idle(vTB, 3, 1.2, 0)}, false},
		{"two families fit alike", []scored{idle(vTB, 3, 1, 0), idle(vFWFirst, 3, 3, 0)}, false},
		{"runner-up two misses behind", []scored{idle(vTB, 3, 1, 0), idle(vFWFirst, 3, 3, 2)}, true},
		{"runner-up one miss behind", []scored{idle(vTB, 3, 1, 0), idle(vFWFirst, 3, 3, 1)}, false},
		{"counts disagree", []scored{idle(vTB, 3, 1, 0), idle(vTB, 4, 1, 0)}, false},
		{"alignment disagrees", []scored{idle(vFWFirst, 3, 3, 0), idle(variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignEpoch}, 3, 3, 0)}, false},
	}
	for _, tt := range tests {
		if got := resolved(tt.p); got != tt.want {
			t.Errorf("%s: resolved = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSplitPoints(t *testing.T) {
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, origin.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	got := splitPoints(at(100, 100, 200, 400), 0.5)
	if !slices.EqualFunc(got, at(150), time.Time.Equal) {
		t.Errorf("splitPoints(100,100,200,400; 0.5) = %v, want 150ms", got)
	}
	if got := splitPoints(at(100, 100, 100), 0.25, 0.5, 0.75); len(got) != 0 {
		t.Errorf("splitPoints of equal times = %v, want none", got)
	}
}

// TestCandidatesRespectStart: every candidate experiment starts no earlier
// than s0 and has its sends in time order.
func TestCandidatesRespectStart(t *testing.T) {
	s0 := origin.Add(time.Second)
	dz := &designer{client: "k1", ws: weigh([]scored{idle(vTB, 3, 2, 0), idle(vFWFirst, 3, 1.5, 0), idle(vSL, 3, 1.5, 0)}, 0)}
	cands := dz.candidates(s0, 5*time.Millisecond)
	if len(cands) < 10 {
		t.Fatalf("%d candidates, want the whole menu", len(cands))
	}
	phases := map[string]bool{}
	for _, e := range cands {
		phases[e.phase] = true
		if e.at[0].Before(s0) || !slices.IsSortedFunc(e.at, time.Time.Compare) {
			t.Errorf("%s: sends %v start before %v or are out of order", e.phase, e.at, s0)
		}
	}
	for _, p := range []string{"burst", "recovery", "spread", "sustained"} {
		if !phases[p] {
			t.Errorf("no %s candidate among %v", p, phases)
		}
	}
}

// TestPacedCandidates: in a paced session (one request after another,
// behind a balancer that rotates them over instances) the candidates are
// predicted as they will be sent. Each send comes at least pace after the
// one before it and keeps its group. Five requests spread over 200 ms, then
// seven at 2.1 s: sent at one instant, a fixed window of 5 in 2 s (from the
// first request) admits five of them and a sliding log three, but sent
// 60 ms apart both admit five, the log letting the spread requests go
// one by one as the burst goes on.
func TestPacedCandidates(t *testing.T) {
	s0 := origin.Add(time.Second)
	ws := weigh([]scored{idle(vFWFirst, 5, 2, 0), idle(vSL, 5, 2, 0)}, 0)
	const pace = 60 * time.Millisecond
	instant := &designer{client: "k1", ws: ws}
	paced := &designer{client: "k1", ws: ws, pace: pace}
	for _, e := range paced.candidates(s0, 5*time.Millisecond) {
		for i := 1; i < len(e.at); i++ {
			if gap := e.at[i].Sub(e.at[i-1]); gap < pace || e.groups[i] < e.groups[i-1] {
				t.Fatalf("%s: send %d %v after the one before (group %d after %d), want at least %v in order", e.phase, i, gap, e.groups[i], e.groups[i-1], pace)
			}
		}
	}
	b := newBuilder("spread").spread(s0, 200*time.Millisecond, 5)
	b.burst(s0.Add(2100*time.Millisecond), 7)
	e := b.done()
	if got := instant.information(&e); got < 0.9 {
		t.Fatalf("the burst at one instant: %.3f bits, want 1 (the premise)", got)
	}
	p := e.paced(pace)
	if got := paced.information(&p); got > 0.1 {
		t.Errorf("the burst sent %v apart: %.3f bits, want none (the log frees what the window does)", pace, got)
	}
}

// TestConcludeNoModelLeft: refusals that no hypothesis is left to
// account for fit nothing, and nothing comes closest; "none" (nothing was
// refused) would be a confident wrong name.
func TestConcludeNoModelLeft(t *testing.T) {
	rs := []record.Result{result(0, 0, 1, 200), result(1, 0, 1, 200), result(2, 0, 1, 429)}
	o := observe(rs, origin, 0)
	f := &fit{total: len(o.list), best: map[variant]scored{}, fam: map[Family]scored{}}
	inf := conclude(rs, origin, o, f, KeyUnknown, &Options{Tool: "rlprobe t"})
	if inf.Fit != FitMisfit || inf.Algorithm != "" || inf.Closest != "" {
		t.Errorf("fit %s, algorithm %q, closest %q; want misfit, none named, none closest", inf.Fit, inf.Algorithm, inf.Closest)
	}
	if len(inf.Misses) != 1 || inf.Misses[0].Observed != "1 of 3 refused" {
		t.Errorf("misses %+v, want the refusals", inf.Misses)
	}
	if _, _, err := inf.Rule(); !errors.Is(err, ErrNoRule) || !strings.Contains(err.Error(), "no model is left") {
		t.Errorf("Rule: %v, want ErrNoRule saying no model is left", err)
	}
}

// TestConcludeDocument: the document of a fit names the winner's
// parameters with ranges, the alternatives with what ruled them out, the
// header dialects and the reject status.
func TestConcludeDocument(t *testing.T) {
	var rs []record.Result
	for i := range 8 {
		st := 429
		if i < 4 {
			st = 200
		}
		r := result(int64(i), 0, 1, st)
		r.Headers = http.Header{"Ratelimit": {`"default";r=0;t=1`}, "Ratelimit-Policy": {`"default";q=4;w=1`}}
		rs = append(rs, r)
	}
	rs = append(rs, result(8, 600, 601, 429), result(9, 1100, 1101, 200))
	o := observe(rs, origin, 0)
	f := search(o, defaultSpace(o, time.Minute, false))
	inf := conclude(rs, origin, o, f, KeyUnknown, &Options{Tool: "rlprobe t"})
	if inf.RejectStatus == nil || *inf.RejectStatus != 429 || !slices.Equal(inf.Headers, []string{"draft-8"}) {
		t.Errorf("reject status %v, headers %v; want 429 and draft-8", deref(inf.RejectStatus), inf.Headers)
	}
	if inf.Reproduced != 1 || inf.Params.Capacity == nil && inf.Params.Limit == nil {
		t.Errorf("confidence %v, params %+v", inf.Reproduced, inf.Params)
	}
	seen := map[Family]bool{}
	for _, a := range inf.Alternatives {
		seen[a.Algorithm] = true
		if a.RuledOutBy == "" || a.Reproduced > inf.Reproduced {
			t.Errorf("alternative %+v: no reason, or better than the winner", a)
		}
	}
	if !seen[None] || !seen[LeakyBucketQueue] || seen[inf.Algorithm] {
		t.Errorf("alternatives %v: want none and leaky-bucket-queue, not the winner %s", seen, inf.Algorithm)
	}
	if !strings.Contains(inf.Alternatives[len(inf.Alternatives)-1].RuledOutBy, "queue") {
		t.Errorf("leaky-bucket-queue ruled out by %q, want the missing queueing", inf.Alternatives[len(inf.Alternatives)-1].RuledOutBy)
	}
}

func TestSig4(t *testing.T) {
	for in, want := range map[float64]float64{1.23456: 1.235, 0.000123456: 0.0001235, 98765: 98770, 0: 0} {
		if got := sig4(in); got != want {
			t.Errorf("sig4(%v) = %v, want %v", in, got, want)
		}
	}
}
