package headers

import (
	"fmt"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// The fields of draft-6 (RateLimit-Limit, -Remaining, -Reset) and the
// legacy X-RateLimit-* triple.

// item6 reads one draft-6 Integer item field.
func (p *parser) item6(field string) (n int64, ok, present bool) {
	vals := Values(p.h, field)
	if len(vals) == 0 {
		return 0, false, false
	}
	value := strings.Join(vals, ", ")
	it, err := httpsfv.UnmarshalItem(vals)
	if err != nil {
		if field == fieldLimit6 {
			if n, ok := p.limitList6(value, vals); ok {
				return n, true, true
			}
		}
		p.problem(field, value, "not a Structured Field Integer (%v)", err)
		return 0, false, true
	}
	return p.nonNegative(field, value, it.Value)
}

// limitList6 reads the list form RateLimit-Limit: 100, 100;w=60 of drafts
// before -06: the first bare Integer is the limit, members with w are
// policies.
func (p *parser) limitList6(value string, vals []string) (int64, bool) {
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil || len(l) < 2 {
		return 0, false
	}
	p.problem(fieldLimit6, value, "a List (the quota-policy syntax of drafts before -06); RateLimit-Limit is a single Integer")
	limit, has := int64(0), false
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		n, isInt := it.Value.(int64)
		if !isInt || n < 0 {
			continue
		}
		if _, hasW := it.Params.Get("w"); hasW {
			if w, ok := p.intParam(fieldLimit6, value, fmt.Sprintf("policy %d", n), it.Params, "w", true); ok {
				p.out.Policies = append(p.out.Policies, Policy{Quota: n, Window: secondsDuration(w), HasWindow: true, Dialect: Draft6})
			}
			continue
		}
		if !has {
			limit, has = n, true
		}
	}
	return limit, has
}

// nonNegative checks that an item's value is a non-negative Integer.
func (p *parser) nonNegative(field, value string, v any) (int64, bool, bool) {
	n, isInt := v.(int64)
	switch {
	case !isInt:
		p.problem(field, value, "must be an Integer, not %s", describe(v))
	case n < 0:
		p.problem(field, value, "must not be negative")
	default:
		return n, true, true
	}
	return 0, false, true
}

func (p *parser) draft6() {
	lim := Limit{Dialect: Draft6}
	var limitPresent, resetPresent, remainingPresent bool
	lim.Limit, lim.HasLimit, limitPresent = p.item6(fieldLimit6)
	lim.Remaining, lim.HasRemaining, remainingPresent = p.item6(fieldRemaining6)
	var reset int64
	reset, lim.HasReset, resetPresent = p.item6(fieldReset6)
	if lim.HasReset {
		lim.Reset = secondsDuration(reset)
		if reset >= epochSecondsAtLeast {
			p.problem(fieldReset6, strings.Join(Values(p.h, fieldReset6), ", "),
				"%d looks like a Unix time; RateLimit-Reset is delay seconds", reset)
		}
	}
	switch {
	case limitPresent && !resetPresent:
		p.problem(fieldReset6, "", "missing; a response with RateLimit-Limit must include RateLimit-Reset")
	case !limitPresent && (resetPresent || remainingPresent):
		p.problem(fieldLimit6, "", "missing; RateLimit-Remaining and RateLimit-Reset come with RateLimit-Limit")
	}
	if lim.HasLimit || lim.HasRemaining || lim.HasReset {
		p.out.Limits = append(p.out.Limits, lim)
	}
}

// firstOf returns the field lines of the first of names present, and which.
func (p *parser) firstOf(names ...string) ([]string, string) {
	for _, n := range names {
		if v := Values(p.h, n); len(v) > 0 {
			return v, n
		}
	}
	return nil, ""
}

// legacy reads X-RateLimit-* (or X-Rate-Limit-*, field by field), with
// X-RateLimit-Used and X-RateLimit-Resource: GitHub's when the reset is a
// Unix time and either of those is given.
func (p *parser) legacy() {
	limVals, limField := p.firstOf(fieldXLimit, fieldXAltLimit)
	remVals, remField := p.firstOf(fieldXRemaining, fieldXAltRemaining)
	resVals, resField := p.firstOf(fieldXReset, fieldXAltReset)
	if limVals == nil && remVals == nil && resVals == nil {
		return
	}
	lim := Limit{Dialect: XRateLimit}
	if resVals != nil {
		value := strings.Join(resVals, ", ")
		d, epoch, ok := parseLegacyReset(value, p.received)
		if ok {
			lim.Reset, lim.HasReset, lim.ResetIsEpoch = d, true, epoch
			if epoch {
				lim.Dialect = XRateLimitEpoch
			}
		} else {
			p.problem(resField, value, "neither delay seconds, a Unix time in seconds or milliseconds, nor a date")
		}
	}
	if remVals != nil {
		value := strings.Join(remVals, ", ")
		if n, ok := parseDigits(strings.Trim(value, " \t")); ok {
			lim.Remaining, lim.HasRemaining = n, true
		} else {
			p.problem(remField, value, "not a non-negative integer")
		}
	}
	var pols []Policy
	if limVals != nil {
		lim.Limit, lim.HasLimit, pols = p.legacyLimit(limField, limVals)
	}
	if v := Values(p.h, fieldXResource); len(v) > 0 {
		lim.Name = strings.Trim(strings.Join(v, ", "), " \t")
	}
	if v := Values(p.h, fieldXUsed); len(v) > 0 {
		value := strings.Join(v, ", ")
		if n, ok := parseDigits(strings.Trim(value, " \t")); ok {
			lim.Used, lim.HasUsed = n, true
		} else {
			p.problem(fieldXUsed, value, "not a non-negative integer")
		}
	}
	if lim.ResetIsEpoch && (lim.HasUsed || lim.Name != "") {
		lim.Dialect = GitHub
	}
	for i := range pols {
		pols[i].Dialect = lim.Dialect
	}
	p.out.Policies = append(p.out.Policies, pols...)
	if lim.HasLimit || lim.HasRemaining || lim.HasReset {
		p.out.Limits = append(p.out.Limits, lim)
	}
}

// legacyLimit reads X-RateLimit-Limit: a plain integer, or Envoy's list
// 10, 10;w=1;name="per-ip", 1000;w=3600 whose first bare member is the
// current limit and whose members with w are policies.
func (p *parser) legacyLimit(field string, vals []string) (int64, bool, []Policy) {
	value := strings.Join(vals, ", ")
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		if n, ok := parseDigits(strings.Trim(value, " \t")); ok {
			return n, true, nil
		}
		p.problem(field, value, "neither an integer nor a list of quota policies (%v)", err)
		return 0, false, nil
	}
	if len(l) == 0 {
		p.problem(field, value, "empty")
		return 0, false, nil
	}
	var limit int64
	var has bool
	var pols []Policy
	for i, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			p.problem(field, value, "member %d: an Inner List is not a limit", i+1)
			continue
		}
		n, isInt := it.Value.(int64)
		if !isInt || n < 0 {
			p.problem(field, value, "member %d: must be a non-negative Integer, not %s", i+1, describe(it.Value))
			continue
		}
		if _, hasW := it.Params.Get("w"); hasW {
			what := fmt.Sprintf("member %d", i+1)
			w, ok := p.intParam(field, value, what, it.Params, "w", true)
			if !ok {
				continue
			}
			pol := Policy{Quota: n, Window: secondsDuration(w), HasWindow: true}
			switch v, _ := it.Params.Get("name"); v := v.(type) {
			case string:
				pol.Name = v
			case httpsfv.Token:
				pol.Name = string(v)
			}
			pols = append(pols, pol)
			continue
		}
		if i == 0 {
			limit, has = n, true
			continue
		}
		p.problem(field, value, "member %d: only the first member may be a bare limit; quota policies need w", i+1)
	}
	return limit, has, pols
}

// parseLegacyReset reads X-RateLimit-Reset: a number (with an optional
// fraction) that is epoch milliseconds from 1e12, epoch seconds from 1e9 and
// delay seconds below; or an HTTP-date or RFC 3339 time. Epoch values become
// a delay from received, at least 0.
func parseLegacyReset(v string, received time.Time) (time.Duration, bool, bool) {
	s := strings.Trim(v, " \t")
	if whole, frac, ok := parseDecimal(s); ok {
		var t time.Time
		switch {
		case whole >= epochMillisAtLeast:
			t = time.Unix(whole/1000, (whole%1000)*int64(time.Millisecond)+frac/1000)
		case whole >= epochSecondsAtLeast:
			t = time.Unix(whole, frac)
		default:
			return time.Duration(whole)*time.Second + time.Duration(frac), false, true
		}
		return max(0, t.Sub(received)), true, true
	}
	if t, ok := parseHTTPDate(s, received); ok {
		return max(0, t.Sub(received)), true, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return max(0, t.Sub(received)), true, true
	}
	return 0, false, false
}

// parseDecimal parses 1*DIGIT [ "." 1*DIGIT ] into its whole part
// (saturating) and its fraction in billionths (digits past the ninth are
// dropped).
func parseDecimal(s string) (whole, frac int64, ok bool) {
	w, f, hasDot := strings.Cut(s, ".")
	whole, ok = parseDigits(w)
	if !ok {
		return 0, 0, false
	}
	if !hasDot {
		return whole, 0, true
	}
	if _, ok := parseDigits(f); !ok {
		return 0, 0, false
	}
	f = (f + "000000000")[:9]
	frac, _ = parseDigits(f)
	return whole, frac, true
}
