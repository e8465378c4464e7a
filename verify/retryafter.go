package verify

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// The Retry-After family: retry-after-missing, retry-after-early and
// retry-after-late (the grading of one value is GradeRetryAfter, grade.go).
// The race and key-spoof probes are left out: they are judged by their own
// checks, and a spoofed request's answer speaks for another quota.

// retryAfter checks Retry-After on rejections: missing, early, late.
func (r *rule) retryAfter(t *traffic) []Finding {
	rej := filter(t.judged, func(o *obs) bool { return o.class == record.ClassRejected })
	var out []Finding
	var missing []*obs
	for _, o := range rej {
		if len(headers.Values(o.res.Headers, "Retry-After")) == 0 {
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		sev := SeverityWarning
		if r.e.RetryAfter == RetryAfterRequired {
			sev = SeverityError
		}
		out = append(out, r.finding(IDRetryAfterMissing, Certain, t.g, missing, Finding{
			Severity: sev,
			Message:  fmt.Sprintf("%d of %d rejections carry no Retry-After", len(missing), len(rej)),
			Evidence: Evidence{Headers: missing[0].res.Headers},
		}))
	}
	var early, late [][]*obs
	for _, o := range rej {
		if o.cached || o.ph.RetryAfter == nil {
			continue
		}
		// An HTTP-date read against the server's Date may be up to
		// raSlack longer than meant: the early moment takes the longest
		// reading, lateness the shortest.
		d := int64(*o.ph.RetryAfter)
		if ev := r.earlyRetries(t, o, o.recv+o.u+d); ev != nil {
			early = append(early, ev)
		}
		if ev := lateAccept(t, o, d-o.raSlack); ev != nil {
			late = append(late, ev)
		}
	}
	if len(early) > 0 {
		ev := early[0]
		out = append(out, r.finding(IDRetryAfterEarly, Certain, t.g, flatten(early), Finding{
			Message: fmt.Sprintf("Retry-After: %s was too early: both retries at or after the advertised moment were rejected (%d times)",
				headers.Get(ev[0].res.Headers, "Retry-After"), len(early)),
			Evidence: Evidence{Count: len(early), Headers: ev[0].res.Headers},
		}))
	}
	// A Retry-After in milliseconds or a Unix time is late by its unit:
	// retry-after-implausible says so, and lateness would only repeat it.
	if len(late) > 0 && len(r.implausible(t)) == 0 {
		ev := late[0]
		out = append(out, r.finding(IDRetryAfterLate, Certain, t.g, flatten(late), Finding{
			Message: fmt.Sprintf("Retry-After: %s was late: a request was accepted %s before the advertised moment (%d times)",
				headers.Get(ev[0].res.Headers, "Retry-After"), dur(ev[0].iv.Lo+int64(*ev[0].ph.RetryAfter)-ev[0].raSlack-ev[1].iv.Hi), len(late)),
			Evidence: Evidence{Count: len(late), Headers: ev[0].res.Headers},
		}))
	}
	return out
}

func flatten(evs [][]*obs) []*obs {
	var out []*obs
	seen := map[*obs]bool{}
	for _, ev := range evs {
		for _, o := range ev {
			if !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	return out
}

// earlyRetries returns [x, q1, q2] when the first two requests of the
// group (outside the probes) surely decided at or after moment were both
// rejected, and no accepted request of any check may have been decided
// between x and them (it may have taken the quota that returned), nor,
// under a declared extend or restart, a request that moved the window's
// end past the moment (retryMoved); nil otherwise.
func (r *rule) earlyRetries(t *traffic, x *obs, moment int64) []*obs {
	var qs []*obs
	for _, o := range t.from(moment) {
		if o.iv.Lo < moment || !o.class.Counts() || o.check == CheckRace || o.check == CheckKeySpoof {
			continue
		}
		qs = append(qs, o)
		if len(qs) == 2 {
			break
		}
	}
	if len(qs) < 2 || qs[0].class != record.ClassRejected || qs[1].class != record.ClassRejected || r.retryMoved(t, x, qs[0]) {
		return nil
	}
	last := qs[0]
	if surelyAfter(qs[0], qs[1]) || qs[1].iv.Hi > qs[0].iv.Hi {
		last = qs[1]
	}
	for _, o := range t.from(x.iv.Lo) {
		if o.iv.Lo > last.iv.Hi {
			break
		}
		if o.class == record.ClassAccepted && possiblyAfter(x, o) && possiblyAfter(o, last) {
			return nil
		}
	}
	return []*obs{x, qs[0], qs[1]}
}

// lateAccept returns [x, a] when a request a (outside the probes) surely
// decided after x was accepted so early that GradeRetryAfter finds x's
// advertised delay d late by the finding's margin: the true wait, counted
// from x's earliest decision, is at most a's latest decision. Requests
// whose order with x the evidence leaves open prove nothing.
func lateAccept(t *traffic, x *obs, d int64) []*obs {
	limit := x.iv.Lo + d - int64(RetryAfterLateMargin(time.Duration(d)))
	for _, o := range t.from(x.iv.Lo) {
		if o.iv.Lo > limit {
			break
		}
		if o.class != record.ClassAccepted || o.check == CheckRace || o.check == CheckKeySpoof || !surelyAfter(x, o) {
			continue
		}
		if GradeRetryAfter(time.Duration(d), 0, time.Duration(o.iv.Hi-x.iv.Lo)).LateFinding {
			return []*obs{x, o}
		}
	}
	return nil
}
