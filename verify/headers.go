package verify

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// The headers family: reject-status-mismatch, retry-after-malformed,
// ratelimit-header-malformed, ratelimit-header-inconsistent,
// ratelimit-policy-mismatch and ratelimit-header-missing.

// noteFunc collects one contradiction: the first call's message explains
// the finding.
type noteFunc func(o *obs, format string, a ...any)

// statusMismatch raises reject-status-mismatch for rejections with another
// status than the declared one.
func (r *rule) statusMismatch(t *traffic) []Finding {
	bad := filter(t.rej, func(o *obs) bool { return o.mismatch })
	if len(bad) == 0 {
		return nil
	}
	statuses := map[int]int{}
	for _, o := range bad {
		statuses[o.res.Status]++
	}
	var parts []string
	for s, n := range statuses {
		parts = append(parts, fmt.Sprintf("%d × %d", n, s))
	}
	slices.Sort(parts)
	return []Finding{r.finding(IDRejectStatusMismatch, Certain, t.g, bad, Finding{
		Message:  fmt.Sprintf("%d rejections answered %s instead of the declared %d", len(bad), strings.Join(parts, ", "), r.e.Status),
		Evidence: Evidence{Headers: bad[0].res.Headers},
	})}
}

// malformed reports header values that break their grammar.
func (r *rule) malformed(t *traffic) []Finding {
	type agg struct {
		ev    []*obs
		value string
	}
	byID := map[string]*agg{}
	epochDeclared := slices.Contains(r.e.Headers, string(headers.XRateLimitEpoch))
	for _, o := range t.os {
		problems := o.ph.Problems
		if epochDeclared && !o.cached {
			problems = append(slices.Clip(problems), deltaResets(&o.ph)...)
		}
		for _, p := range problems {
			if p.Before != "" && r.effectiveWindow() {
				continue // an unknown parameter from -11 on: ignored
			}
			id := IDRateLimitHeaderMalformed
			if strings.EqualFold(p.Field, "Retry-After") {
				id = IDRetryAfterMalformed
			}
			a := byID[id]
			if a == nil {
				a = &agg{value: p.String()}
				byID[id] = a
			}
			if len(a.ev) == 0 || a.ev[len(a.ev)-1] != o {
				a.ev = append(a.ev, o)
			}
		}
	}
	var out []Finding
	for _, id := range []string{IDRetryAfterMalformed, IDRateLimitHeaderMalformed} {
		a := byID[id]
		if a == nil {
			continue
		}
		out = append(out, r.finding(id, Certain, t.g, a.ev, Finding{
			Check:    CheckHeaders,
			Message:  fmt.Sprintf("%d responses carry a malformed value, e.g. %s", len(a.ev), a.value),
			Evidence: Evidence{Headers: a.ev[0].res.Headers},
		}))
	}
	return out
}

// deltaResets returns a Problem for an X-RateLimit-Reset given as a delay
// where the declared dialect x-ratelimit-epoch says a Unix time.
func deltaResets(ph *headers.Parsed) []headers.Problem {
	for _, l := range ph.Limits {
		if l.Dialect == headers.XRateLimit && l.HasReset && !l.ResetIsEpoch {
			return []headers.Problem{{Field: "X-RateLimit-Reset", Value: fmt.Sprint(int64(l.Reset / time.Second)),
				Message: "a delay in seconds where the declared x-ratelimit-epoch says a Unix time"}}
		}
	}
	return nil
}

// inconsistency collects the contradictions of one check into one
// ratelimit-header-inconsistent finding.
type inconsistency struct {
	bad []*obs
	why string
}

func (c *inconsistency) note(o *obs, format string, a ...any) {
	if len(c.bad) == 0 {
		c.why = fmt.Sprintf(format, a...)
	}
	c.bad = append(c.bad, o)
}

// finding returns the inconsistency as a finding, its message made by
// message from the first contradiction's explanation and their number;
// nil when there is none.
func (c *inconsistency) finding(r *rule, g string, message func(why string, n int) string) []Finding {
	if len(c.bad) == 0 {
		return nil
	}
	return []Finding{r.finding(IDRateLimitHeaderInconsistent, Certain, g, c.bad, Finding{
		Check:    CheckHeaders,
		Message:  message(c.why, len(c.bad)),
		Evidence: Evidence{Headers: c.bad[0].res.Headers},
	})}
}

// consistency checks advertised remaining values against what the server
// did: buckets stay within the model's band (bucketBand); a rejection
// never advertises two or more remaining; fixed windows are judged by
// fixedWindowRemaining. The spoofed key-spoof requests, which may count
// against another quota, are left out of the counts.
func (r *rule) consistency(t *traffic) []Finding {
	c := &inconsistency{}
	for _, o := range t.rej {
		if o.cached {
			continue
		}
		if l, ok := limitFor(&o.ph, r.e); ok && l.Remaining >= 2 {
			c.note(o, "a rejection advertised %d remaining", l.Remaining)
		}
	}
	acc := filter(t.acc, func(o *obs) bool { return !slices.Contains(t.spoofed, o) })
	switch {
	case r.e.IsBucket() && r.sp != nil:
		// A declared block refills the bucket when it ends: each clean
		// stretch is replayed from full.
		for _, s := range r.sp.list {
			if s.clean() {
				r.bucketBand(t, r.sp.inStretch(acc, s), c.note)
			}
		}
	case r.e.IsBucket():
		r.bucketBand(t, acc, c.note)
	case r.e.WindowType == Fixed:
		r.fixedWindowRemaining(t, acc, c.note)
	}
	return c.finding(r, t.g, func(why string, n int) string {
		return fmt.Sprintf("remaining contradicts what the server did: %s (%d responses)", why, n)
	})
}

// resets checks each response's time until more (draft-8 t) or until full
// (reset of the other dialects), given with remaining 0, against the
// recovery measured afterwards; an effective window (draft-11 t, draft-12
// w) is checked as the upper bound it is instead (effectiveWindows). Like retryAfter, it leaves out the race
// and key-spoof probes, and never takes an order the evidence leaves open
// for a contradiction.
func (r *rule) resets(t *traffic) []Finding {
	c := &inconsistency{}
	r.effectiveWindows(t, c)
	for _, o := range t.judged {
		if o.cached || !o.class.Counts() {
			continue
		}
		for _, l := range limitsFor(&o.ph, r.e) {
			if !l.HasReset || l.Remaining != 0 || r.windowMeaning(l) {
				continue
			}
			if r.resetContradicted(t, o, l, c) {
				break
			}
		}
	}
	return c.finding(r, t.g, func(why string, _ int) string {
		return "the advertised time until quota returns contradicts the recovery measured: " + why
	})
}

// resetContradicted notes and reports whether the recovery after o
// contradicts its state l's time until quota returns.
func (r *rule) resetContradicted(t *traffic, o *obs, l headers.Limit, c *inconsistency) bool {
	d := int64(l.Reset)
	name := "reset"
	if l.Dialect == headers.Draft8 {
		name = "t"
	}
	if ev := r.earlyRetries(t, o, o.recv+o.u+d); ev != nil {
		for _, x := range ev {
			c.note(x, "%s=%s, yet both requests at or after it were rejected", name, dur(d))
		}
		return true
	}
	if l.Dialect == headers.Draft8 {
		if ev := lateAccept(t, o, d); ev != nil {
			for _, x := range ev {
				c.note(x, "t=%s, yet a request was accepted long before", dur(d))
			}
			return true
		}
	}
	return false
}

// headerPresence reports responses without the expected rate-limit
// headers: an error for each declared dialect missing, otherwise info when
// no response carries any.
func (r *rule) headerPresence() []Finding {
	resp := filter(r.all, func(o *obs) bool { return o.class.Counts() && !o.cached })
	if len(resp) == 0 {
		return nil
	}
	declared := r.e.Headers
	if len(declared) == 1 && declared[0] == string(headers.None) {
		return nil
	}
	if len(declared) == 0 {
		for _, o := range resp {
			if !o.ph.Speaks(headers.None) {
				return nil
			}
		}
		return []Finding{r.finding(IDRateLimitHeaderMissing, Certain, "", resp, Finding{
			Check:   CheckHeaders,
			Message: fmt.Sprintf("none of %d responses carries a rate-limit header", len(resp)),
		})}
	}
	var out []Finding
	for _, d := range declared {
		missing := filter(resp, func(o *obs) bool {
			// An x-ratelimit-epoch triple with a delay reset is there,
			// malformed (deltaResets), not missing.
			return !o.ph.Speaks(headers.Dialect(d)) && !(d == string(headers.XRateLimitEpoch) && o.ph.Speaks(headers.XRateLimit))
		})
		if len(missing) > 0 {
			out = append(out, r.finding(IDRateLimitHeaderMissing, Certain, "", missing, Finding{
				Severity: SeverityError,
				Check:    CheckHeaders,
				Message:  fmt.Sprintf("%d of %d responses lack the declared %s headers", len(missing), len(resp), d),
				Evidence: Evidence{Headers: missing[0].res.Headers},
			}))
		}
	}
	return out
}

// policyMismatch compares advertised quotas and windows with the declared
// rule (buckets advertise q=capacity, w=max(1, ⌈capacity/rate⌉), or the
// w of the rate truncated to whole milli-requests per second as nginx
// keeps it: 100r/m fills 100 in 60.02 s, w=61).
func (r *rule) policyMismatch() []Finding {
	e := r.e
	q := e.Quota()
	w := e.Window
	alt := w
	if e.IsBucket() {
		w = time.Duration(max(1, int64(math.Ceil(float64(e.Capacity)/e.Rate-1e-9)))) * time.Second
		alt = limiter.Config{Algorithm: limiter.GCRA, Rate: e.Rate, Capacity: q}.AdvertisedWindow()
	}
	var bad []*obs
	var seen string
	for _, o := range r.all {
		if o.cached || !o.class.Counts() || advertisesPolicy(&o.ph, e, q, w) || alt > 0 && alt != w && advertisesPolicy(&o.ph, e, q, alt) {
			continue
		}
		if len(bad) == 0 {
			seen = describeAdvertised(&o.ph)
		}
		bad = append(bad, o)
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d responses advertise %s, but the policy is q=%d; w=%d", len(bad), seen, q, int64(w/time.Second))
	if rate, ok := advertisesRate(&bad[0].ph, e); ok {
		msg = fmt.Sprintf("%d responses advertise %s: the rate (%d per second), not the quota; the policy is q=%d; w=%d",
			len(bad), seen, rate, q, int64(w/time.Second))
	}
	return []Finding{r.finding(IDRateLimitPolicyMismatch, Certain, "", bad, Finding{
		Check:    CheckHeaders,
		Message:  msg,
		Evidence: Evidence{Headers: bad[0].res.Headers},
	})}
}

// advertisesRate reports whether a response advertises rule e's rate per
// second (rounded, at least 1) as its quota — a policy of that quota over
// 1 s, or a limit field of it — where e's quota is another number; and
// the rate.
func advertisesRate(ph *headers.Parsed, e *Endpoint) (int64, bool) {
	rate := e.Rate
	if !e.IsBucket() && e.Window > 0 {
		rate = float64(e.Quota()) / e.Window.Seconds()
	}
	n := max(1, int64(math.Round(rate)))
	if n == e.Quota() {
		return 0, false
	}
	for _, p := range ph.Policies {
		if p.Quota == n && (!p.HasWindow || p.Window == time.Second) {
			return n, true
		}
	}
	for _, l := range ph.Limits {
		if l.HasLimit && l.Limit == n {
			return n, true
		}
	}
	return 0, false
}

// advertisesPolicy reports whether a response advertises nothing about
// quotas, or quota q and window w of rule e.
func advertisesPolicy(ph *headers.Parsed, e *Endpoint, q int64, w time.Duration) bool {
	if len(ph.Policies) == 0 && !slices.ContainsFunc(ph.Limits, func(l headers.Limit) bool { return l.HasLimit }) {
		return true
	}
	match := false
	for _, p := range ph.Policies {
		if p.Quota == q && (!p.HasWindow || p.Window == w) && (e.Name == "" || p.Name == "" || p.Name == e.Name || len(ph.Policies) == 1) {
			match = true
		}
	}
	if len(ph.Policies) == 0 {
		match = slices.ContainsFunc(ph.Limits, func(l headers.Limit) bool { return l.HasLimit && l.Limit == q })
	}
	// A limit field with another quota contradicts a matching policy
	// unless it belongs to another advertised policy.
	for _, l := range ph.Limits {
		if l.HasLimit && l.Limit != q && !slices.ContainsFunc(ph.Policies, func(p headers.Policy) bool { return p.Quota == l.Limit }) {
			match = false
		}
	}
	return match
}

func describeAdvertised(ph *headers.Parsed) string {
	var parts []string
	for _, p := range ph.Policies {
		s := fmt.Sprintf("q=%d", p.Quota)
		if p.HasWindow {
			s += fmt.Sprintf("; w=%d", int64(p.Window/time.Second))
		}
		parts = append(parts, s)
	}
	for _, l := range ph.Limits {
		if l.HasLimit {
			parts = append(parts, fmt.Sprintf("limit %d", l.Limit))
		}
	}
	return strings.Join(parts, ", ")
}

// limitsFor returns a response's current states that belong to rule e:
// those with e's name, e's quota as limit, or a policy of e's quota; when
// nothing names a quota, all of them.
func limitsFor(ph *headers.Parsed, e *Endpoint) []headers.Limit {
	var named, all []headers.Limit
	for _, l := range ph.Limits {
		if !l.HasRemaining {
			continue
		}
		all = append(all, l)
		switch {
		case e.Name != "" && l.Name == e.Name:
			named = append(named, l)
		case l.HasLimit && l.Limit == e.Quota():
			named = append(named, l)
		case !l.HasLimit && slices.ContainsFunc(ph.Policies, func(p headers.Policy) bool { return p.Name == l.Name && p.Quota == e.Quota() }):
			named = append(named, l)
		}
	}
	if len(named) > 0 {
		return named
	}
	if len(all) > 0 && allSame(all) {
		return all
	}
	// Several states that disagree and none is e's: a multi-policy server
	// whose policy for e cannot be told apart; when every state advertises
	// a limit, none is e's.
	return nil
}

// limitFor picks the state of rule e on a response (see limitsFor).
func limitFor(ph *headers.Parsed, e *Endpoint) (headers.Limit, bool) {
	ls := limitsFor(ph, e)
	if len(ls) == 0 {
		return headers.Limit{}, false
	}
	return ls[0], true
}

func allSame(ls []headers.Limit) bool {
	for _, l := range ls[1:] {
		if l.Remaining != ls[0].Remaining {
			return false
		}
	}
	return true
}
