package infer

import (
	"strings"
	"testing"
	"time"
)

// TestServerEpoch: a timer whose phase is where the target's clock puts
// its epoch is the target's epoch window; elsewhere it stays a timer, and
// so does one whose phase the clock cannot place within a quarter window.
func TestServerEpoch(t *testing.T) {
	const ms = time.Millisecond
	timer := func(phase, spread float64) *Inference {
		al := AlignTimer
		return &Inference{Algorithm: FixedWindow, Alignment: &al, Params: Params{
			WindowS: &Param{Value: 2, Low: 2, High: 2},
			PhaseS:  &Param{Value: phase, Low: phase - spread, High: phase + spread}}}
	}
	epoch := func() *Inference {
		al := AlignEpoch
		return &Inference{Algorithm: FixedWindow, Alignment: &al, Params: Params{WindowS: &Param{Value: 2, Low: 2, High: 2}}}
	}
	tests := []struct {
		name        string
		inf         *Inference
		offset, unc time.Duration
		wantAlign   string
		wantNote    string
	}{
		{"a server 700 ms ahead: its epoch at 1.3 s of every 2", timer(1.3, 0.004), -700 * ms, 20 * ms, AlignEpoch, "700ms ahead of this machine's (± 20ms"},
		{"a server 700 ms behind: its epoch at 0.7 s", timer(0.7, 0.004), 700 * ms, 20 * ms, AlignEpoch, "700ms behind this machine's"},
		{"within the uncertainty", timer(1.325, 0.004), -700 * ms, 20 * ms, AlignEpoch, "ahead of"},
		{"beyond the uncertainty: a timer", timer(1.36, 0.004), -700 * ms, 20 * ms, AlignTimer, ""},
		{"the other way: a timer", timer(1.3, 0.004), 700 * ms, 20 * ms, AlignTimer, ""},
		{"across the window's turn", timer(1.995, 0.002), 2*time.Second + 3*ms, 5 * ms, AlignEpoch, "behind"},
		{"a clock placed within ±0.6 s tells nothing", timer(1.3, 0.004), -700 * ms, 600 * ms, AlignTimer, ""},
		{"an epoch answer stays", epoch(), -700 * ms, 20 * ms, AlignEpoch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.inf.Params.PhaseS
			serverEpoch(tt.inf, tt.offset, tt.unc, 5*ms)
			if *tt.inf.Alignment != tt.wantAlign {
				t.Fatalf("alignment %s, want %s", *tt.inf.Alignment, tt.wantAlign)
			}
			switch {
			case tt.wantAlign == AlignEpoch && tt.inf.Params.PhaseS != nil:
				t.Errorf("an epoch answer keeps phase_s %+v", *tt.inf.Params.PhaseS)
			case tt.wantAlign == AlignTimer && tt.inf.Params.PhaseS != before:
				t.Errorf("a timer's phase changed")
			}
			if (tt.wantNote == "") != (tt.inf.Note == "") || !strings.Contains(tt.inf.Note, tt.wantNote) {
				t.Errorf("note %q, want one with %q", tt.inf.Note, tt.wantNote)
			}
		})
	}
}

// TestJudgedOnExact: the Retry-After grade and the headers' claims are
// judged against the answer's model, so only an exact answer keeps them;
// a malformed Retry-After is read, not judged, and stays whatever the fit.
func TestJudgedOnExact(t *testing.T) {
	early, malformed, no := "early", GradeMalformed, false
	wait := 1.249
	judged := func(fit Fit, grade *string) *Inference {
		return &Inference{Fit: fit, RetryAfter: RetryAfter{Sent: true, Honest: &no, Grade: grade, TrueWaitS: &wait},
			Advertised: []Advertised{{Field: "limit"}}}
	}
	tests := []struct {
		name       string
		inf        *Inference
		keepGrade  bool
		keepClaims bool
	}{
		{"exact: judged", judged(FitExact, &early), true, true},
		{"approximate: unjudged", judged(FitApproximate, &early), false, false},
		{"misfit: unjudged", judged(FitMisfit, &early), false, false},
		{"approximate, malformed: read, not judged", judged(FitApproximate, &malformed), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			judgedOnExact(tt.inf)
			ra := tt.inf.RetryAfter
			if kept := ra.Grade != nil && ra.Honest != nil; kept != tt.keepGrade || !ra.Sent {
				t.Errorf("grade %v, honest %v, sent %v; want kept %v and sent", ra.Grade, ra.Honest, ra.Sent, tt.keepGrade)
			}
			if kept := tt.inf.Advertised != nil; kept != tt.keepClaims {
				t.Errorf("claims %v, want kept %v", tt.inf.Advertised, tt.keepClaims)
			}
		})
	}
}
