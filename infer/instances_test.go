package infer

import (
	"math"
	"testing"
	"time"
)

// TestJudgeInstances: the decision from the two paced runs' counts alone
// (before a fit of one instance says what its quota is).
func TestJudgeInstances(t *testing.T) {
	tests := []struct {
		name        string
		one, fresh  connRun
		want        *Instances
		wantCertain bool
	}{
		{"one instance", connRun{accepted: 5, rejected: 3}, connRun{accepted: 5, rejected: 3}, nil, false},
		{"one instance, a token refilled on the way", connRun{accepted: 5, rejected: 3}, connRun{accepted: 6, rejected: 2}, nil, false},
		{"a racy shared counter paced", connRun{accepted: 10, rejected: 3}, connRun{accepted: 10, rejected: 3}, nil, false},
		{"two instances", connRun{accepted: 5, rejected: 3}, connRun{accepted: 10, rejected: 3}, &Instances{2, 2, 2, BalanceConnection}, true},
		{"three instances", connRun{accepted: 5, rejected: 3}, connRun{accepted: 15, rejected: 3}, &Instances{3, 3, 3, BalanceConnection}, true},
		{"four instances", connRun{accepted: 8, rejected: 3}, connRun{accepted: 32, rejected: 3}, &Instances{4, 4, 4, BalanceConnection}, true},
		{"four instances of a bucket that refilled", connRun{accepted: 8, rejected: 3}, connRun{accepted: 34, rejected: 3}, &Instances{4, 4, 4, BalanceConnection}, true},
		{"one per instance: the counts allow two to five", connRun{accepted: 2, rejected: 3}, connRun{accepted: 5, rejected: 3}, &Instances{3, 2, 5, BalanceConnection}, false},
		{"never refused on new connections: a lower bound", connRun{accepted: 5, rejected: 3}, connRun{accepted: 15, rejected: 0}, &Instances{3, 3, maxInstancesInferred, BalanceConnection}, false},
		{"between whole multiples", connRun{accepted: 20, rejected: 3}, connRun{accepted: 50, rejected: 3}, &Instances{3, 2, 3, BalanceConnection}, false},
		{"one connection never refused: nothing learned", connRun{accepted: 5, rejected: 0}, connRun{accepted: 15, rejected: 3}, nil, false},
		{"nothing admitted on one connection", connRun{accepted: 0, rejected: 8}, connRun{accepted: 15, rejected: 3}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, certain := judgeRuns(tt.one, tt.fresh)
			switch {
			case (got == nil) != (tt.want == nil):
				t.Fatalf("judgeInstances = %+v, want %+v", got, tt.want)
			case got != nil && *got != *tt.want:
				t.Errorf("judgeInstances = %+v, want %+v", *got, *tt.want)
			}
			if certain != tt.wantCertain {
				t.Errorf("certain = %v, want %v", certain, tt.wantCertain)
			}
		})
	}
}

// TestRefillDuring: the quota an instance gets back while a run goes out,
// and the runs a window edge crossed (no bound).
func TestRefillDuring(t *testing.T) {
	origin := time.Unix(1000, 0)
	p := func(v float64) *Param { return &Param{v, v, v} }
	epoch, first := AlignEpoch, AlignFirstRequest
	window := &Inference{Params: Params{Limit: p(5), WindowS: p(2)}, Alignment: &epoch}
	started := &Inference{Params: Params{Limit: p(5), WindowS: p(2)}, Alignment: &first}
	bucket := &Inference{Params: Params{Capacity: p(6), RatePerS: p(2)}}
	run := func(from, span float64) connRun {
		return connRun{accepted: 20, rejected: 3, from: int64(sec(from)), span: sec(span)}
	}
	tests := []struct {
		name      string
		inf       *Inference
		r         connRun
		wantExtra int
		wantOK    bool
	}{
		{"bucket: a quarter second is one token", bucket, run(0.1, 0.25), 1, true},
		{"bucket: a run as long as a refill", bucket, run(0.1, 3), 0, false},
		{"epoch window, no edge within", window, run(0.1, 0.2), 1, true},
		{"epoch window, an edge within", window, run(1.9, 0.2), 0, false},
		{"window started by a request: no clock edge", started, run(1.9, 0.2), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra, ok := refillDuring(tt.inf, tt.r, origin)
			if extra != tt.wantExtra || ok != tt.wantOK {
				t.Errorf("refillDuring = %d, %v; want %d, %v", extra, ok, tt.wantExtra, tt.wantOK)
			}
		})
	}
}

// TestJudgePacedBursts: a refused paced burst on the one connection that
// admitted more than its first run says that run started from a state not
// yet whole (its count then blurs the answer), unless an edge of the
// fitted clock-aligned window fell within the burst: two quotas of one
// instance, which say nothing of the first run.
func TestJudgePacedBursts(t *testing.T) {
	origin := time.Unix(1000, 0)
	p := func(v float64) *Param { return &Param{v, v, v} }
	epoch := AlignEpoch
	window := &Inference{Algorithm: FixedWindow, Params: Params{Limit: p(5), WindowS: p(2)}, Alignment: &epoch}
	burst := func(from, span float64, accepted int) connRun {
		return connRun{accepted: accepted, rejected: 3, from: int64(sec(from)), span: sec(span)}
	}
	one := connRun{accepted: 5, rejected: 3, from: int64(sec(10.1)), span: sec(0.05)}
	fresh := connRun{accepted: 10, rejected: 3, from: int64(sec(20.1)), span: sec(0.1)}
	tests := []struct {
		name        string
		paced       []connRun
		want        int // instances; 0 for none
		wantCertain bool
	}{
		{"no paced bursts", nil, 2, true},
		{"a burst of one quota", []connRun{burst(30.1, 0.1, 5)}, 2, true},
		{"a burst across an edge admits two quotas", []connRun{burst(31.9, 0.2, 10)}, 2, true},
		{"a burst of two quotas with no edge within", []connRun{burst(30.1, 0.2, 10)}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := instancesState{found: &Instances{Value: 2, Low: 2, High: 2, By: BalanceConnection}, certain: true,
				one: one, fresh: fresh, paced: tt.paced}
			in, certain := st.judge(window, origin)
			got := 0
			if in != nil {
				got = in.Value
			}
			if got != tt.want || certain != tt.wantCertain {
				t.Errorf("judge = %+v, %v; want %d instances, certain %v", in, certain, tt.want, tt.wantCertain)
			}
		})
	}
}

// TestNextEdge: the first edge of clock-aligned windows at or after t.
func TestNextEdge(t *testing.T) {
	p := func(v float64) *Param { return &Param{v, v, v} }
	tests := []struct {
		at, window float64
		phase      *Param
		want       float64
	}{
		{1001.3, 2, nil, 1002},
		{1002, 2, nil, 1002},
		{1001.3, 2, p(0.5), 1002.5},
		{1002.7, 2, p(0.5), 1004.5},
	}
	for _, tt := range tests {
		inf := &Inference{Params: Params{WindowS: p(tt.window), PhaseS: tt.phase}}
		at := time.Unix(0, 0).Add(sec(tt.at))
		if got := nextEdge(at, inf).Sub(time.Unix(0, 0)).Seconds(); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("nextEdge(%g, window %g, phase %v) = %g, want %g", tt.at, tt.window, tt.phase, got, tt.want)
		}
	}
}
