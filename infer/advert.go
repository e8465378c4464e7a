package infer

import (
	"math"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// advert is what the answers' rate-limit headers advertise: one quota per
// window (the same policy on every answer that carries one), and whether
// every rejection's advertised return falls on a multiple of the window
// counted from the Unix epoch (delay-seconds round a return up by less
// than a second). Used as evidence, checked against the observations: it
// settles what several windows of waiting would otherwise have to.
type advert struct {
	quota  int64
	window time.Duration
	epoch  bool
}

// minAdvertised is the fewest rejections whose returns must agree with an
// epoch-aligned window.
const minAdvertised = 2

// advertOf reads the advertisement of results; ok is false when there is
// none, or the answers disagree.
func advertOf(results []record.Result, origin time.Time, rejectStatus int) (a advert, ok bool) {
	returns := 0
	onEdge := true
	for _, r := range results {
		c, _ := record.Classify(r, rejectStatus)
		if !c.Counts() || len(r.Headers) == 0 {
			continue
		}
		received := origin.Add(time.Duration(r.TTFB))
		p := headers.Parse(r.Headers, received)
		for _, pol := range p.Policies {
			if !pol.HasWindow || pol.Quota <= 0 {
				continue
			}
			if a.window != 0 && (pol.Window != a.window || pol.Quota != a.quota) {
				return a, false
			}
			a.quota, a.window = pol.Quota, pol.Window
			break
		}
		if c != record.ClassRejected || a.window <= 0 {
			continue
		}
		for _, l := range p.Limits {
			if !l.HasReset {
				continue
			}
			ret := received.Add(l.Reset)
			into := ret.Sub(ret.Truncate(a.window)) // time.Truncate counts from the zero time; windows of whole seconds divide a day
			if into > time.Second+50*time.Millisecond && into < a.window-50*time.Millisecond {
				onEdge = false
			}
			returns++
			break
		}
	}
	a.epoch = onEdge && returns >= minAdvertised && a.window > 0 && (24*time.Hour)%a.window == 0
	return a, a.window > 0
}

// settles reports whether the advertisement settles the plausible
// hypotheses: it advertises an epoch-aligned window, and the best
// epoch-aligned fixed window, which has its quota and a window within 2 %
// of its window, misses no more outcomes than any plausible hypothesis.
func (a advert) settles(p []scored) bool {
	if !a.epoch || len(p) == 0 {
		return false
	}
	best := math.MaxInt
	for _, s := range p {
		best = min(best, s.miss)
	}
	for _, s := range p {
		if s.miss == best && a.names(s.h) {
			return true
		}
	}
	return false
}

// names reports whether h is the advertised model: an epoch-aligned fixed
// window of the advertised quota, its window within 2 % of the advertised.
func (a advert) names(h hyp) bool {
	return a.epoch && h.v.fam == FixedWindow && h.v.align == limiter.AlignEpoch && h.n == a.quota &&
		math.Abs(h.x-a.window.Seconds()) <= 0.02*a.window.Seconds()
}
