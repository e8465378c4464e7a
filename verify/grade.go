package verify

import "time"

// RetryAfterGrade says how an advertised Retry-After compares with the
// true wait until quota returned.
type RetryAfterGrade string

// Retry-After grades, from best to worst.
const (
	// GradeExact: the advertised wait lies within the measured bounds of
	// the true wait.
	GradeExact RetryAfterGrade = "exact"
	// GradeRoundedUp: longer than the true wait, but by less than the
	// rounding to a whole second allows (delay-seconds are the ceiling of
	// the true wait, an HTTP-date the second the quota returns in).
	GradeRoundedUp RetryAfterGrade = "rounded-up"
	// GradeLate: longer than the true wait rounded up to a whole second.
	GradeLate RetryAfterGrade = "late"
	// GradeEarly: shorter than the true wait; a retry at the advertised
	// moment would be rejected.
	GradeEarly RetryAfterGrade = "early"
)

// Honest reports whether g is exact or rounded-up.
func (g RetryAfterGrade) Honest() bool { return g == GradeExact || g == GradeRoundedUp }

func (g RetryAfterGrade) rank() int {
	switch g {
	case GradeExact:
		return 1
	case GradeRoundedUp:
		return 2
	case GradeLate:
		return 3
	case GradeEarly:
		return 4
	}
	return 0
}

// Worse returns the worse of g and h (early, then late, then rounded-up,
// then exact; the empty grade is the best), so that a run's grades fold
// into one.
func (g RetryAfterGrade) Worse(h RetryAfterGrade) RetryAfterGrade {
	if h.rank() > g.rank() {
		return h
	}
	return g
}

// RetryAfterGrading is the grade of one advertised Retry-After.
type RetryAfterGrading struct {
	Grade RetryAfterGrade
	// Advertised is the wait the header asked for.
	Advertised time.Duration
	// TrueWait is the measured true wait (the middle of its bounds), and
	// TrueWaitLo, TrueWaitHi the bounds it was graded with.
	TrueWait, TrueWaitLo, TrueWaitHi time.Duration
	// LateFinding reports whether the advertised moment is later than the
	// true one by at least RetryAfterLateMargin(Advertised): what the
	// retry-after-late finding reports.
	LateFinding bool
}

// GradeRetryAfter grades an advertised wait against the true wait, known
// to lie within [waitLo, waitHi] (the measurement uncertainty: the caller
// widens the bounds by its clock and latency uncertainty, including the
// time between the server's decision and the answer's receipt). Both are
// counted from the same moment, normally the answer's receipt, from which
// delay-seconds count (an HTTP-date's wait is the date minus that moment).
//
//   - early: advertised < waitLo;
//   - exact: advertised ≤ waitHi;
//   - rounded-up: advertised < waitHi + 1 s, which for a whole number of
//     seconds n is n ≤ ⌈waitHi⌉, and for an HTTP-date is a date no later
//     than the second the quota returns in;
//   - late: anything longer.
//
// Inverted bounds are swapped.
func GradeRetryAfter(advertised, waitLo, waitHi time.Duration) RetryAfterGrading {
	return GradeRetryAfterWithin(advertised, advertised, waitLo, waitHi)
}

// GradeRetryAfterWithin is GradeRetryAfter for an advertised wait known
// only to lie within [advLo, advHi] (an HTTP-date read against a Date of
// whole seconds, headers.DateSlack): early only when even advHi is short
// of waitLo, exact when the two ranges meet, rounded-up or late as advLo
// is; LateFinding by advLo. Advertised is advHi. Inverted bounds are
// swapped.
func GradeRetryAfterWithin(advLo, advHi, waitLo, waitHi time.Duration) RetryAfterGrading {
	if waitLo > waitHi {
		waitLo, waitHi = waitHi, waitLo
	}
	if advLo > advHi {
		advLo, advHi = advHi, advLo
	}
	g := RetryAfterGrading{Advertised: advHi, TrueWait: waitLo + (waitHi-waitLo)/2, TrueWaitLo: waitLo, TrueWaitHi: waitHi}
	switch {
	case advHi < waitLo:
		g.Grade = GradeEarly
	case advLo <= waitHi:
		g.Grade = GradeExact
	case advLo < waitHi+time.Second:
		g.Grade = GradeRoundedUp
	default:
		g.Grade = GradeLate
	}
	g.LateFinding = advLo-RetryAfterLateMargin(advLo) >= waitHi
	return g
}

// RetryAfterLateMargin is how much later than the true moment an advertised
// Retry-After must be for the retry-after-late finding: max(2 s, half the
// advertised delay) (contract.md).
func RetryAfterLateMargin(advertised time.Duration) time.Duration {
	return max(2*time.Second, advertised/2)
}
