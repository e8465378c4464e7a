package verify

import (
	"fmt"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// The header audits of servers in the wild: retry-after-implausible,
// retry-after-constant, retry-after-on-success, retry-after-before-window,
// and the effective window of drafts -11 and -12 (an upper bound on how
// long r holds, ratelimit-header-inconsistent when more is admitted within
// it).

// implausibleFactor bounds a plausible Retry-After: an honest value,
// rounded up to whole seconds, is at most g + 1 s, g being the longest the
// true wait can have been; one at least implausibleFactor × (g + 1 s) is
// in other units — milliseconds are 1000× the wait, a Unix time 10⁹ s and
// more — rather than merely late.
const implausibleFactor = 30

// effectiveWindow reports whether the rule's r/t states carry -11's
// meaning (t an effective window): draft-11 or draft-12 declared, or the
// responses read so (headers.Detect). Computed once per rule.
func (r *rule) effectiveWindow() bool {
	if r.late != nil {
		return *r.late
	}
	late := slices.Contains(r.e.Headers, string(headers.Draft11)) || slices.Contains(r.e.Headers, string(headers.Draft12))
	if !late {
		var samples []headers.Sample
		for _, o := range r.all {
			if o.cached || !o.class.Counts() {
				continue
			}
			samples = append(samples, headers.Sample{Sent: time.Unix(0, o.iv.Lo), Received: time.Unix(0, o.iv.Hi),
				Admitted: o.class == record.ClassAccepted, Parsed: o.ph})
		}
		late = slices.Contains(headers.Detect(samples, nil), headers.Draft11)
	}
	r.late = &late
	return late
}

// windowMeaning reports whether state l's time parameter is an effective
// window: a draft-12 w, or a draft-8-syntax t under effectiveWindow.
func (r *rule) windowMeaning(l headers.Limit) bool {
	return l.Dialect == headers.Draft12 || (l.Dialect == headers.Draft8 && r.effectiveWindow())
}

// effectiveWindows checks each effective window as the upper bound -11
// makes it: no more than r requests admitted within t. A request counts
// when it was surely decided after the response and surely before the
// window's earliest end, the response's earliest decision + t − 1 s (t is
// rounded up to whole seconds and counts from the response, which comes
// after the decision). It never reads t as "the quota is back after t".
// Under a declared penalty that starts the count afresh after a refusal
// (a block shorter than the period), a request that may follow such a
// refusal (freshAt) is not counted: the penalty's fresh start is a promise the
// header could not foresee.
func (r *rule) effectiveWindows(t *traffic, c *inconsistency) {
	for _, o := range t.judged {
		if o.cached || !o.class.Counts() {
			continue
		}
		for _, l := range limitsFor(&o.ph, r.e) {
			if !l.HasReset || !r.windowMeaning(l) || l.Reset <= time.Second {
				continue
			}
			end := o.iv.Lo + int64(l.Reset-time.Second)
			fresh := r.freshAt(t, o, end)
			var within []*obs
			for _, x := range t.from(o.iv.Lo) {
				if x.iv.Lo > end {
					break
				}
				if x.class == record.ClassAccepted && x.check != CheckRace && x.check != CheckKeySpoof &&
					surelyAfter(o, x) && x.iv.Hi < end && x.iv.Hi < fresh {
					within = append(within, x)
				}
			}
			if int64(len(within)) > l.Remaining {
				name := "r=%d, t=%s"
				if l.Dialect == headers.Draft12 {
					name = "a=%d, w=%s"
				}
				c.note(o, name+", yet %d requests were accepted within that effective window",
					l.Remaining, dur(int64(l.Reset)), len(within))
				break
			}
		}
	}
}

// retryAfterAudits raises the audits of Retry-After values seen in the
// wild: implausible units, a constant window length, Retry-After on
// success and, under an effective window, Retry-After before its end.
func (r *rule) retryAfterAudits(t *traffic) []Finding {
	var out []Finding
	out = append(out, r.implausible(t)...)
	out = append(out, r.constantRetryAfter(t)...)
	out = append(out, r.beforeWindow(t)...)
	return append(out, r.onSuccess(t)...)
}

// implausible raises retry-after-implausible: a rejection's Retry-After
// asks for at least implausibleFactor × (g + 1 s), g being the longest the
// true wait can have been — until a request surely decided after it was
// accepted.
func (r *rule) implausible(t *traffic) []Finding {
	var ev []*obs
	var first string
	for _, x := range t.judged {
		if x.class != record.ClassRejected || x.cached || x.ph.RetryAfter == nil {
			continue
		}
		d := *x.ph.RetryAfter - time.Duration(x.raSlack) // the shortest reading of a date
		for _, o := range t.from(x.iv.Lo) {
			if o.class != record.ClassAccepted || o.check == CheckRace || o.check == CheckKeySpoof || !surelyAfter(x, o) {
				continue
			}
			g := time.Duration(o.iv.Hi - x.iv.Lo)
			if d >= implausibleFactor*(g+time.Second) {
				if first == "" {
					first = fmt.Sprintf("Retry-After: %s asked for %s, yet a request was accepted %s later",
						headers.Get(x.res.Headers, "Retry-After"), d, dur(int64(g)))
				}
				ev = append(ev, x, o)
			}
			break
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{r.finding(IDRetryAfterImplausible, Certain, t.g, ev, Finding{
		Message:  fmt.Sprintf("%s: milliseconds or a Unix time, not delay-seconds (%d rejections)", first, len(ev)/2),
		Evidence: Evidence{Count: len(ev) / 2, Headers: ev[0].res.Headers},
	})}
}

// constantRetryAfter raises retry-after-constant (possible): every
// rejection's Retry-After (three or more) is the declared window, W ≥ 2 s,
// under a window policy without penalty, and two of them lie surely more
// than 1 s apart with no acceptance possibly between them — when no
// request is admitted, the true wait shrinks with the time that passed,
// and a wait shorter by more than 1 s rounds up to a smaller number.
func (r *rule) constantRetryAfter(t *traffic) []Finding {
	e := r.e
	w := time.Duration((int64(e.Window) + int64(time.Second) - 1) / int64(time.Second) * int64(time.Second))
	if e.IsBucket() || !e.Penalty.IsZero() || e.Window < 2*time.Second {
		return nil
	}
	var rej []*obs
	for _, o := range t.judged {
		if o.class != record.ClassRejected || o.cached || o.ph.RetryAfter == nil {
			continue
		}
		if *o.ph.RetryAfter != w {
			return nil
		}
		rej = append(rej, o)
	}
	if len(rej) < 3 {
		return nil
	}
	for i, x := range rej {
		for _, y := range rej[i+1:] {
			if !surelyAfter(x, y) || y.iv.Lo-x.iv.Hi <= int64(time.Second) {
				continue
			}
			between := slices.ContainsFunc(t.os, func(a *obs) bool {
				return a.class == record.ClassAccepted && possiblyAfter(x, a) && possiblyAfter(a, y)
			})
			if !between {
				return []Finding{r.finding(IDRetryAfterConstant, Possible, t.g, rej, Finding{
					Message: fmt.Sprintf("every one of %d rejections says Retry-After: %d, the window length, even %s apart with nothing admitted between",
						len(rej), int64(w/time.Second), dur(y.iv.Lo-x.iv.Hi)),
					Evidence: Evidence{Headers: x.res.Headers},
				})}
			}
		}
	}
	return nil
}

// beforeWindow raises retry-after-before-window: a rejection whose
// effective window (r or a = 0) surely ends after its Retry-After, by more
// than 1 s (the rounding of both): delay-seconds count from the response
// as t does, and an HTTP-date is read against the response's Date, which
// reads it no shorter than the server meant — which draft -11 says SHOULD
// NOT be.
func (r *rule) beforeWindow(t *traffic) []Finding {
	var ev []*obs
	var first string
	for _, o := range t.judged {
		if o.class != record.ClassRejected || o.cached || o.ph.RetryAfter == nil {
			continue
		}
		// delay-seconds count from the response, as t does; an HTTP-date
		// is read against the response's Date (parseAnswer), never
		// shorter than the server meant.
		for _, l := range limitsFor(&o.ph, r.e) {
			if l.HasReset && l.Remaining == 0 && r.windowMeaning(l) && *o.ph.RetryAfter+time.Second < l.Reset {
				if first == "" {
					first = fmt.Sprintf("Retry-After: %s before the effective window's end (%s)", headers.Get(o.res.Headers, "Retry-After"), l.Reset)
				}
				ev = append(ev, o)
				break
			}
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{r.finding(IDRetryAfterBeforeWindow, Certain, t.g, ev, Finding{
		Message:  fmt.Sprintf("%s on %d rejections", first, len(ev)),
		Evidence: Evidence{Headers: ev[0].res.Headers},
	})}
}

// onSuccess raises retry-after-on-success: admitted responses carrying
// Retry-After.
func (r *rule) onSuccess(t *traffic) []Finding {
	ev := filter(t.os, func(o *obs) bool {
		return o.class == record.ClassAccepted && len(headers.Values(o.res.Headers, "Retry-After")) > 0
	})
	if len(ev) == 0 {
		return nil
	}
	return []Finding{r.finding(IDRetryAfterOnSuccess, Certain, t.g, ev, Finding{
		Message:  fmt.Sprintf("%d admitted responses carry Retry-After: %s", len(ev), headers.Get(ev[0].res.Headers, "Retry-After")),
		Evidence: Evidence{Headers: ev[0].res.Headers},
	})}
}
