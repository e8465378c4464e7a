package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/infer"
)

// TestFitVerdict is the contract's table of infer's exit codes by fit and
// --expect: an approximate fit never fails a gate (exit 1), a misfit always
// says it could not conclude (exit 3).
func TestFitVerdict(t *testing.T) {
	const F, G = infer.FixedWindow, infer.SlidingLog
	for _, tt := range []struct {
		fit    infer.Fit
		answer infer.Family
		expect infer.Family
		exit   int
		warned bool
	}{
		{infer.FitExact, F, "", 0, false},
		{infer.FitExact, F, F, 0, false},
		{infer.FitExact, F, G, 1, false},
		{infer.FitApproximate, F, "", 0, true},
		{infer.FitApproximate, F, F, 0, false},
		{infer.FitApproximate, F, G, 3, false},
		{infer.FitMisfit, "", "", 3, false},
		{infer.FitMisfit, "", F, 3, false},
		{infer.FitMisfit, "", G, 3, false},
		{infer.FitExact, infer.None, infer.None, 0, false},
		{infer.FitExact, infer.None, F, 1, false},
	} {
		name := fmt.Sprintf("fit %s, answer %q, expect %q", tt.fit, tt.answer, tt.expect)
		inf := &infer.Inference{Algorithm: tt.answer, Fit: tt.fit, Closest: F, Reproduced: 0.9,
			Misses: []infer.Miss{{Experiment: "comb at 3s", Expected: "1 of 1 accepted", Observed: "0 of 1 accepted"}}}
		warned := false
		err := fitVerdict(inf, tt.expect, func(string, ...any) { warned = true })
		exit := 0
		if err != nil {
			exit = int(ClassOf(err))
		}
		if exit != tt.exit || warned != tt.warned {
			t.Errorf("%s: exit %d (%v), warned %v; want exit %d, warned %v", name, exit, err, warned, tt.exit, tt.warned)
		}
		if tt.fit == infer.FitMisfit && !strings.Contains(err.Error(), "no family fits; closest fixed-window") {
			t.Errorf("%s: %v, want \"no family fits; closest fixed-window\"", name, err)
		}
	}
}
