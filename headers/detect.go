package headers

import (
	"slices"
	"time"
)

// Sample is one answered request as [Detect] reads it: when it was sent,
// when its response arrived, whether the limiter admitted it, and its
// parsed headers.
type Sample struct {
	Sent     time.Time
	Received time.Time
	Admitted bool
	Parsed   Parsed
}

// Detect returns the dialects a run of responses speaks, in the order of
// [Dialects]: each dialect some response was parsed in, or just None. A
// response cannot tell draft-11 from draft-8 (one syntax), so r/t responses
// are reported as draft-11 when declared lists it, or when the values read
// with -11's meaning and no other: some response carries t > 0 with r > 0
// (under -08…-10 as servers send them, t is the time until more quota and 0
// while some remains), and no t is contradicted — no response's effective
// window is seen admitting more than its r: requests sent after the
// response arrived and answered before t − 1 s (the rounding of t to whole
// seconds) after the request that carried it was sent. Otherwise they are
// draft-8. samples may be in any order.
func Detect(samples []Sample, declared []Dialect) []Dialect {
	seen := map[Dialect]bool{}
	for _, s := range samples {
		for _, d := range s.Parsed.Dialects {
			if d != None {
				seen[d] = true
			}
		}
	}
	if seen[Draft8] && (slices.Contains(declared, Draft11) || readsAsDraft11(samples)) {
		seen[Draft8], seen[Draft11] = false, true
	}
	var out []Dialect
	for _, d := range Dialects {
		if seen[d] {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = []Dialect{None}
	}
	return out
}

// readsAsDraft11 applies Detect's evidence rule to the r/t states.
func readsAsDraft11(samples []Sample) bool {
	positive := false
	for _, s := range samples {
		for _, l := range s.Parsed.Limits {
			if l.Dialect != Draft8 || !l.HasRemaining || !l.HasReset || l.Reset <= 0 {
				continue
			}
			if l.Remaining > 0 {
				positive = true
			}
			if admittedWithin(samples, s, l.Reset-time.Second) > l.Remaining {
				return false
			}
		}
	}
	return positive
}

// admittedWithin counts the admitted samples certainly decided after s's
// response and before s.Sent + d: sent after s arrived (a request sent
// the instant s arrived may have been decided with s), answered before
// s.Sent + d.
func admittedWithin(samples []Sample, s Sample, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	end := s.Sent.Add(d)
	var n int64
	for _, x := range samples {
		if x.Admitted && x.Sent.After(s.Received) && x.Received.Before(end) {
			n++
		}
	}
	return n
}
