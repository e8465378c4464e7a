package infer

import (
	"math"

	"github.com/rlprobe/rlprobe/limiter"
)

// class is what a report says about a hypothesis beyond its continuous
// parameter: family, the switches that are reported, counts.
type class struct {
	fam   Family
	align limiter.Align
	cr    bool
	n, d  int64
	beh   Behaviour
	// pb is the timed behaviour's length on a logarithmic grid of ratio
	// timedSpan (0 for untimed variants): lengths that differ by more
	// are different answers.
	pb int
}

// timedSpan is the relative width of a timed behaviour's length within
// which two lengths count as one answer.
const timedSpan = 1.04

// classOf returns h's class. Models that decide identically are one
// class: a fixed window started by the first request, a sliding log that
// logs only accepted requests and a token bucket, all of quota 1, each
// admit a request exactly when the last admitted one is one period old —
// they are the token-bucket class of capacity 1 (canonX gives the common
// parameter, the rate).
func classOf(h hyp) class {
	if single(h) {
		return class{fam: TokenBucket, n: 1}
	}
	c := class{fam: h.v.fam, n: h.n, d: h.d, beh: h.v.beh}
	if h.v.timed() && h.p > 0 {
		c.pb = int(math.Floor(math.Log(h.p) / math.Log(timedSpan)))
	}
	switch h.v.fam {
	case FixedWindow:
		c.align = h.v.align
	case SlidingLog:
		c.cr = h.v.cr
	case SlidingWindowCounter:
		c.align, c.cr = h.v.align, h.v.cr
	}
	return c
}

// single reports whether h is one of the quota-1 models that decide like a
// token bucket of capacity 1.
func single(h hyp) bool {
	if h.n != 1 || h.v.beh != "" {
		return false
	}
	switch h.v.fam {
	case TokenBucket:
		return true
	case FixedWindow:
		return h.v.align == limiter.AlignFirstRequest
	case SlidingLog:
		return !h.v.cr
	}
	return false
}

// canonX is h's continuous parameter in its class's terms: the rate (1/W)
// for a quota-1 window model of the token-bucket class.
func canonX(h hyp) float64 {
	if single(h) && h.v.windowed() {
		return 1 / h.x
	}
	return h.x
}
