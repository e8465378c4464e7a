package verify

import (
	"fmt"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// The admission checks every policy family shares: no-limiting-observed
// and under-admission, and the quota available to a race or a spoofed key.
// Each asks its family (windows.go, buckets.go) for the counts.

// peak is the largest set of offered requests a family found in one
// window or bucket span.
type peak struct {
	members            []int
	count              int
	start, end, length int64
}

// noLimiting raises no-limiting-observed when nothing was rejected while
// the offered load certainly reached twice the bound somewhere. The race
// and key-spoof probes are not offered load: a batch released together
// that is all admitted is a race, not the absence of a limit.
func (r *rule) noLimiting(t *traffic) []Finding {
	if len(t.rej) > 0 {
		return nil
	}
	offered := filter(t.judged, func(o *obs) bool {
		return o.class == record.ClassAccepted || o.class == record.ClassOther
	})
	if len(offered) == 0 {
		return nil
	}
	iv := ivsOf(offered)
	var p peak
	var b int64
	if r.e.IsBucket() {
		var ok bool
		if p, b, ok = r.bucketOffered(iv); !ok {
			return nil
		}
	} else if p, b = r.windowOffered(iv); p.count < 2*int(b) {
		return nil
	}
	ev := pick(offered, p.members)
	return []Finding{r.finding(IDNoLimitingObserved, Certain, t.g, ev, Finding{
		Message:  fmt.Sprintf("no request was rejected, although %d were sent within %s (the policy allows %d)", p.count, dur(p.length), b),
		Evidence: Evidence{StartNS: p.start, EndNS: p.end, Count: p.count, Bound: bound(b), Refs: refsOf(ev)},
	})}
}

// availMax bounds from above the quota available to the group over
// [lo, hi], given the accepted requests prior (not in the set judged):
// only prior requests that certainly still count are subtracted. wins are
// the fixed windows to judge in.
func (r *rule) availMax(lo, hi int64, prior []*obs, wins []Window) int64 {
	switch {
	case r.e.IsBucket():
		return r.bucketAvailMax(lo, hi, prior)
	case r.e.WindowType == Fixed:
		return r.fixedAvailMax(lo, hi, prior, wins)
	}
	return r.slidingAvailMax(lo, hi, prior)
}

// underAdmission raises a warning for rejections while even the
// pessimistic count left at least max(1, ⌈N/10⌉) of the quota. Under a
// fixed-window policy only the current window's acceptances count, so a
// sliding-window counter, which honestly rejects early after a busy
// previous window, shows here: it stays a warning (the policy's promise is
// kept, but clients get less than it grants), never hidden. A rejection a
// declared penalty may explain is expected (penaltyExplains; under extend
// the count runs over the busy period, extendLeft), and one that is
// evidence of an undeclared penalty (penalty, from undeclaredPenalty) is
// reported as that. The preflight's refusal is not judged: the run's
// first request meets the limiter in whatever state requests before the run
// left it (check then rests before its suites), and nor is a rejection
// while the state may still hold such requests (settledFrom).
func (r *rule) underAdmission(t *traffic, penalty map[*obs]bool) []Finding {
	q := r.e.Quota()
	slack := max(1, (q+9)/10)
	explains := r.penaltyExplains(t)
	judged := filter(t.judged, func(o *obs) bool {
		return o.class == record.ClassRejected && o.phase != phasePreflight && (r.e.IsBucket() || !t.unsure(o)) && !penalty[o] && !r.collapsedObs[o] && (explains == nil || !explains(o))
	})
	if len(judged) == 0 {
		return nil
	}
	var left func(o *obs) int64
	switch {
	case r.e.Penalty.Kind == limiter.PenaltyExtend:
		left = r.extendLeft(t)
	case r.e.IsBucket():
		left = r.bucketPessimist(t.acc, t.unknownStart())
	case r.e.WindowType == Fixed && r.sp != nil && r.e.firstRequest():
		// The windows of a stretch that is not clean are unknown; a fixed
		// window holds no more than the window's length before a
		// rejection does.
		left = r.slidingLeft(t.acc)
	case r.e.WindowType == Fixed:
		left = r.fixedLeft(t.acc)
	default:
		left = r.slidingLeft(t.acc)
	}
	var bad []*obs
	worst := int64(-1)
	for _, o := range judged {
		if a := left(o); a >= slack {
			bad = append(bad, o)
			worst = max(worst, a)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return []Finding{r.finding(IDUnderAdmission, Certain, t.g, bad, Finding{
		Message: fmt.Sprintf("%d requests were rejected while at least %d of the quota of %d was left (up to %d)", len(bad), slack, q, worst),
		Evidence: Evidence{Count: len(bad), Bound: bound(q - slack), Refs: refsOf(bad),
			Headers: bad[0].res.Headers},
	})}
}
