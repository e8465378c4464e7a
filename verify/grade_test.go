package verify

import (
	"testing"
	"time"
)

func TestGradeRetryAfter(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		name           string
		adv, lo, hi    time.Duration
		want           RetryAfterGrade
		honest, lateOK bool
	}{
		{"exact to the millisecond", 2 * s, 1990 * ms, 2010 * ms, GradeExact, true, false},
		{"exact at the lower bound", 2 * s, 2 * s, 2100 * ms, GradeExact, true, false},
		{"whole second for 0.1 s", 1 * s, 90 * ms, 110 * ms, GradeRoundedUp, true, false},
		{"ceiling of 4.2 s", 5 * s, 4150 * ms, 4250 * ms, GradeRoundedUp, true, false},
		{"ceiling of exactly 4 s is 4", 5 * s, 3990 * ms, 4 * s, GradeLate, false, false},
		{"a date at the next whole second", 1600 * ms, 700 * ms, 710 * ms, GradeRoundedUp, true, false},
		{"two seconds over a 0.1 s wait", 2 * s, 90 * ms, 110 * ms, GradeLate, false, false},
		{"30 s for 2 s", 30 * s, 1900 * ms, 2100 * ms, GradeLate, false, true},
		{"1 s for 5 s", 1 * s, 4900 * ms, 5100 * ms, GradeEarly, false, false},
		{"just early", 999 * ms, 1 * s, 1 * s, GradeEarly, false, false},
		{"0 when quota is back", 0, 0, 0, GradeExact, true, false},
		{"inverted bounds", 2 * s, 2010 * ms, 1990 * ms, GradeExact, true, false},
		{"late finding threshold: 2 s", 3 * s, 900 * ms, 1 * s, GradeLate, false, true},
		{"just under the threshold", 3 * s, 900 * ms, 1001 * ms, GradeLate, false, false},
		{"half the delay for long waits", 60 * s, 29 * s, 30 * s, GradeLate, false, true},
		{"under half the delay", 60 * s, 29 * s, 31 * s, GradeLate, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := GradeRetryAfter(tt.adv, tt.lo, tt.hi)
			if g.Grade != tt.want || g.Grade.Honest() != tt.honest || g.LateFinding != tt.lateOK {
				t.Errorf("GradeRetryAfter(%v, %v, %v) = %s (honest %v, late finding %v); want %s (honest %v, late finding %v)",
					tt.adv, tt.lo, tt.hi, g.Grade, g.Grade.Honest(), g.LateFinding, tt.want, tt.honest, tt.lateOK)
			}
			if g.TrueWait < min(tt.lo, tt.hi) || g.TrueWait > max(tt.lo, tt.hi) || g.Advertised != tt.adv {
				t.Errorf("true wait %v outside [%v, %v] or advertised %v", g.TrueWait, tt.lo, tt.hi, g.Advertised)
			}
		})
	}
}

func TestRetryAfterGradeWorse(t *testing.T) {
	order := []RetryAfterGrade{"", GradeExact, GradeRoundedUp, GradeLate, GradeEarly}
	for i, a := range order {
		for j, b := range order {
			want := order[max(i, j)]
			if got := a.Worse(b); got != want {
				t.Errorf("%q.Worse(%q) = %q, want %q", a, b, got, want)
			}
		}
	}
}

// TestGradeRetryAfterWithin: an advertised wait known within a range (an
// HTTP-date read against a Date of whole seconds) is early only when its
// longest reading is, late only when its shortest is.
func TestGradeRetryAfterWithin(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		name         string
		advLo, advHi time.Duration
		lo, hi       time.Duration
		want         RetryAfterGrade
		lateFinding  bool
	}{
		{"the true wait inside the reading", 4 * s, 5 * s, 4300 * ms, 4400 * ms, GradeExact, false},
		{"early even at the longest reading", 1 * s, 2 * s, 4900 * ms, 5 * s, GradeEarly, false},
		{"the longest reading meets the wait", 2 * s, 3 * s, 3 * s, 3100 * ms, GradeExact, false},
		{"rounded up by the shortest reading", 4500 * ms, 5500 * ms, 4 * s, 4100 * ms, GradeRoundedUp, false},
		{"late by the shortest reading", 8 * s, 9 * s, 4 * s, 4 * s, GradeLate, true},
		{"late finding only by the longest reading", 7 * s, 8 * s, 3600 * ms, 3700 * ms, GradeLate, false},
		{"one value is GradeRetryAfter", 3 * s, 3 * s, 900 * ms, 1 * s, GradeLate, true},
		{"inverted reading", 5 * s, 4 * s, 4300 * ms, 4400 * ms, GradeExact, false},
	}
	for _, tt := range tests {
		g := GradeRetryAfterWithin(tt.advLo, tt.advHi, tt.lo, tt.hi)
		if g.Grade != tt.want || g.LateFinding != tt.lateFinding {
			t.Errorf("%s: GradeRetryAfterWithin(%v, %v, %v, %v) = %s (late finding %v); want %s (late finding %v)",
				tt.name, tt.advLo, tt.advHi, tt.lo, tt.hi, g.Grade, g.LateFinding, tt.want, tt.lateFinding)
		}
	}
}
