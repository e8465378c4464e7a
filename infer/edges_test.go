package infer

import (
	"math"
	"slices"
	"testing"
)

// TestTimerPhases: a timer's candidate phases are the middle and the
// points a fifth in from either end of the longest stretch of phases that
// puts a window start in every gap (a refusal, then an acceptance) and in
// no ban (a refusal, then another): none without a gap, when the gaps
// disagree, or when the stretch holds phase 0 (the epoch-aligned window).
func TestTimerPhases(t *testing.T) {
	gap := func(lo, hi float64) edgeGap { return edgeGap{lo: lo, hi: hi} }
	for _, tt := range []struct {
		name       string
		gaps, bans []edgeGap
		w          float64
		want       []float64
	}{
		{"no gap places the timer", nil, nil, 1, nil},
		{"one gap", []edgeGap{gap(10.3, 10.4)}, nil, 1, []float64{0.35, 0.32, 0.38}},
		{"two gaps a window apart narrow it", []edgeGap{gap(10.3, 10.4), gap(11.35, 11.45)}, nil, 1, []float64{0.375, 0.36, 0.39}},
		{"gaps that no phase serves", []edgeGap{gap(10.1, 10.2), gap(11.5, 11.6)}, nil, 1, nil},
		{"the epoch's phase", []edgeGap{gap(9.95, 10.05)}, nil, 1, nil},
		{"a ban cuts the stretch", []edgeGap{gap(10.2, 10.6)}, []edgeGap{gap(12.1, 12.5)}, 1, []float64{0.55, 0.52, 0.58}},
		{"a stretch under a millisecond: its middle", []edgeGap{gap(10.3, 10.3005)}, nil, 1, []float64{0.30025}},
		{"a gap as long as the window places nothing", []edgeGap{gap(10.3, 11.4)}, nil, 1, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := edgeSet{gaps: tt.gaps, bans: tt.bans}.phases(tt.w)
			if !slices.EqualFunc(got, tt.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
				t.Errorf("phases %v, want %v", got, tt.want)
			}
		})
	}
}
