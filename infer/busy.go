package infer

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// BusyRest reads the first answer of a run, pre (its times counted from
// origin), for a limiter busy before the run: refused, or admitted with an
// advertised remaining below the quota − 1 a whole limiter leaves (an
// earlier run's requests, or others'). The fit takes the state at its
// first request as whole, so a run should rest first. rest is the longest
// time the answer advertises: Retry-After, the reset of its state, and the
// window of its policy (after that much silence a window, or a bucket of q
// per w, is whole); 0 when it advertises none. whole says whether rest is
// the time until the quota is whole — a reset or a policy window was
// advertised — rather than a Retry-After alone, which is the time until
// one request is admitted (a bucket then holds one token, not its
// capacity). why says what showed the limiter busy ("" when it is not).
func BusyRest(pre record.Result, origin time.Time, rejectStatus int) (rest time.Duration, whole bool, why string, busy bool) {
	c, _ := record.Classify(pre, rejectStatus)
	if c != record.ClassAccepted && c != record.ClassRejected {
		return 0, false, "", false
	}
	var p headers.Parsed
	if len(pre.Headers) > 0 {
		p = headers.Parse(pre.Headers, origin.Add(time.Duration(pre.TTFB)))
	}
	if c == record.ClassRejected {
		why = "it was refused"
	} else {
		rem, quota, ok := remainingOf(&pre, origin)
		if !ok || quota <= 0 || rem >= quota-1 {
			return 0, false, "", false
		}
		why = fmt.Sprintf("it advertised %d of %d left", rem, quota)
	}
	if p.RetryAfter != nil {
		rest = max(rest, *p.RetryAfter)
	}
	for _, l := range p.Limits {
		if l.HasReset {
			rest, whole = max(rest, l.Reset), true
		}
	}
	for _, pol := range p.Policies {
		if pol.HasWindow {
			rest, whole = max(rest, pol.Window), true
		}
	}
	return rest, whole, why, true
}
