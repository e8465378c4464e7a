package headers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Parsed is everything rate-limit related found in one response's headers.
// The zero value means nothing was parsed; [Parse] always fills Dialects.
type Parsed struct {
	// Dialects lists the dialects detected, in the order of [Dialects]: each
	// dialect of which at least one Policy or Limit was extracted, or just
	// None when there is none. Several dialects may be present at once.
	Dialects []Dialect
	// Policies are the advertised quota policies: RateLimit-Policy items of
	// every draft, the quota-policy members of a list-valued RateLimit-Limit
	// (drafts before -06) and of Envoy's X-RateLimit-Limit, in field order,
	// then OpenAI's limits (named "requests" and "tokens", without window).
	Policies []Policy
	// Limits are the current states: one per draft-8 RateLimit item, one for
	// the draft-7 RateLimit dictionary, one for the draft-6 fields, one for
	// the X-RateLimit-* (or X-Rate-Limit-*) fields, one per OpenAI quota
	// (named as its policy), one for Shopify's, in that order.
	Limits []Limit
	// RetryAfter is the delay Retry-After asks for, counted from the
	// received time given to Parse; nil when absent or malformed.
	RetryAfter *time.Duration
	// Partitions are the RateLimit-Partition items (draft-12): per policy,
	// the dimensions its quota is partitioned by. Recorded, not yet checked.
	Partitions []Partition
	// Problems lists each value that breaks its grammar, with what was
	// still extracted from it kept in Policies and Limits. Clients MUST
	// ignore malformed RateLimit fields; a verifier reports them.
	Problems []Problem
}

// Partition is one RateLimit-Partition item: the policy it names and the
// dimensions (user_id, client_id, method, …) its quota is partitioned by.
type Partition struct {
	// Policy is the policy name, the item String.
	Policy string
	// Dimensions are the item's parameters, in field order.
	Dimensions []Dimension
}

// Dimension is one partition dimension: a Boolean parameter (user_id)
// varies per request; a valued one (method=GET) restricts the policy to
// requests with that value.
type Dimension struct {
	// Name is the dimension's key.
	Name string
	// Value is the fixed value a valued dimension restricts the policy to,
	// formatted as a string; "" when !Fixed.
	Value string
	// Fixed reports whether the dimension carries a value.
	Fixed bool
}

// Policy is one advertised quota policy. The zero value is a nameless policy
// of quota 0 with no window.
type Policy struct {
	// Name is the policy's name: the draft-8 item String (or Token, with a
	// Problem), the name parameter of an Envoy member, OpenAI's "requests"
	// or "tokens"; "" for draft-6/-7 Integer items, which have no name.
	Name string
	// Quota is q (draft-8) or the Integer item value (draft-6/-7, Envoy):
	// quota units allowed per Window.
	Quota int64
	// Window is w, in whole seconds; 0 when !HasWindow.
	Window time.Duration
	// HasWindow reports whether a valid w was given.
	HasWindow bool
	// Unit is draft-8's qu, or "tokens" for OpenAI's token quota; "" when
	// absent, which means "requests".
	Unit string
	// PartitionKey is draft-8's pk; nil when absent.
	PartitionKey []byte
	// Dialect is the dialect whose syntax the policy was written in. Integer
	// items of RateLimit-Policy are draft-7 when the response carries a
	// draft-7 RateLimit dictionary, draft-6 otherwise.
	Dialect Dialect
}

// Limit is one current rate-limit state. The zero value knows nothing.
type Limit struct {
	// Name is the policy the state belongs to: the draft-8 item name, the
	// X-RateLimit-Resource value for X-RateLimit-* (GitHub), OpenAI's
	// "requests" or "tokens"; "" otherwise.
	Name string
	// Limit is the current quota (draft-7 limit, RateLimit-Limit,
	// X-RateLimit-Limit, Shopify's bucket size); valid when HasLimit.
	// Draft-8 and OpenAI carry it in the policy of the same Name instead.
	Limit    int64
	HasLimit bool
	// Remaining is r / remaining / draft-12's a: quota units left (for
	// Shopify, the size less the calls used); valid when HasRemaining.
	Remaining    int64
	HasRemaining bool
	// Used is what the server says was used of the quota:
	// X-RateLimit-Used (GitHub), the calls of Shopify's bucket; valid when
	// HasUsed.
	Used    int64
	HasUsed bool
	// Reset is, for draft-8, t: the delay until more quota is available
	// (under draft-11, whose syntax is draft-8's, t is the effective window
	// instead); for draft-12, w: the effective window, within which no more
	// than Remaining is available; for draft-6, draft-7, X-RateLimit-* and
	// OpenAI, the delay until the quota resets (is full again). An epoch reset is converted to a delay
	// from the received time given to Parse (never negative) and
	// ResetIsEpoch is set. Valid when HasReset. Shopify gives none.
	Reset        time.Duration
	HasReset     bool
	ResetIsEpoch bool
	// Cost is draft-12's c: the quota units this request consumed; valid
	// when HasCost. Recorded, not yet checked.
	Cost    int64
	HasCost bool
	// PartitionKey is draft-8's pk; nil when absent.
	PartitionKey []byte
	// Dialect is the dialect the state was written in: draft-8 for r/t
	// items (draft-11 shares their syntax), draft-12 for a/w items.
	Dialect Dialect
}

// Problem describes one value that breaks its grammar.
type Problem struct {
	// Field is the header field name as spelled in [Captured].
	Field string
	// Value is the offending value: the field's combined value (its field
	// lines joined by ", "), or the member concerned.
	Value string
	// Message says what is wrong, in lower case without a trailing period.
	Message string
	// Before, when set, is the first dialect under which the value is no
	// longer wrong: q inside RateLimit breaks drafts -08…-10 and is an
	// unknown parameter, ignored, from -11 on (Before = draft-11). A reader
	// that knows the run speaks Before or later drops the Problem.
	Before Dialect
}

// String formats p as `Field: "Value": Message`.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %q: %s", p.Field, p.Value, p.Message)
}

// Speaks reports whether the response speaks dialect d: d was detected;
// for Draft8 and Draft11, either was (they share one syntax); for Draft12,
// draft-12 was, or draft-8 policies without a draft-8 state; for XRateLimit, x-ratelimit, x-ratelimit-epoch or github was (a policy
// declaring x-ratelimit accepts both resets); for XRateLimitEpoch,
// x-ratelimit-epoch or github was (GitHub's fields are that triple and
// more); for None, nothing was.
func (p Parsed) Speaks(d Dialect) bool {
	switch d {
	case None:
		for _, v := range p.Dialects {
			if v != None {
				return false
			}
		}
		return true
	case XRateLimit:
		return slices.Contains(p.Dialects, XRateLimit) || slices.Contains(p.Dialects, XRateLimitEpoch) ||
			slices.Contains(p.Dialects, GitHub)
	case XRateLimitEpoch:
		return slices.Contains(p.Dialects, XRateLimitEpoch) || slices.Contains(p.Dialects, GitHub)
	case Draft8, Draft11:
		return slices.Contains(p.Dialects, Draft8) || slices.Contains(p.Dialects, Draft11)
	case Draft12:
		// RateLimit-Policy did not change in -12: a response whose only
		// draft-8-syntax field is RateLimit-Policy (its RateLimit broken
		// or absent) speaks draft-12 as well.
		return slices.Contains(p.Dialects, Draft12) || (slices.Contains(p.Dialects, Draft8) &&
			!slices.ContainsFunc(p.Limits, func(l Limit) bool { return l.Dialect == Draft8 }))
	}
	return slices.Contains(p.Dialects, d)
}

// Parse reads every rate-limit dialect from h at once. received is when the
// response arrived: Retry-After dates and epoch resets become delays from it
// (pass the time of the server's Date header instead for skew-free delays).
//
// Parse is lenient: it follows RFC 9651 Structured Fields, but a malformed
// value only adds a Problem, and whatever it can still tell is kept — a
// Token where a String is required, a missing r, q inside RateLimit, the
// valid members of a list one member of which is broken. It never panics.
// Field names are matched case-insensitively; several field lines of one
// field are combined as RFC 9110 prescribes. Parse does not modify h and is
// safe for concurrent use.
func Parse(h http.Header, received time.Time) Parsed {
	p := &parser{h: h, received: received}
	p.retryAfter()
	p.policy()
	p.rateLimit()
	p.partition()
	p.draft6()
	p.legacy()
	p.openai()
	p.shopify()
	d := Draft6
	if p.draft7 {
		d = Draft7
	}
	seen := map[int64]bool{}
	for _, i := range p.intPolicies {
		pol := &p.out.Policies[i]
		pol.Dialect = d
		if seen[pol.Quota] {
			p.problem(fieldPolicy, strings.Join(Values(h, fieldPolicy), ", "),
				"two policies with quota %d; draft-6/-7 policies MUST NOT share a quota units value", pol.Quota)
		}
		seen[pol.Quota] = true
	}
	// Policies of a response whose states are all draft-12 are draft-12's
	// (RateLimit-Policy did not change).
	if slices.ContainsFunc(p.out.Limits, func(l Limit) bool { return l.Dialect == Draft12 }) &&
		!slices.ContainsFunc(p.out.Limits, func(l Limit) bool { return l.Dialect == Draft8 }) {
		for i := range p.out.Policies {
			if p.out.Policies[i].Dialect == Draft8 {
				p.out.Policies[i].Dialect = Draft12
			}
		}
	}
	for _, v := range Dialects {
		if slices.ContainsFunc(p.out.Policies, func(x Policy) bool { return x.Dialect == v }) ||
			slices.ContainsFunc(p.out.Limits, func(x Limit) bool { return x.Dialect == v }) {
			p.out.Dialects = append(p.out.Dialects, v)
		}
	}
	if len(p.out.Dialects) == 0 {
		p.out.Dialects = []Dialect{None}
	}
	return p.out
}

type parser struct {
	h           http.Header
	received    time.Time
	out         Parsed
	draft7      bool  // a draft-7 RateLimit dictionary was read
	intPolicies []int // indices of Integer-item policies, dialect pending
}

func (p *parser) problem(field, value, format string, args ...any) {
	p.out.Problems = append(p.out.Problems, Problem{Field: field, Value: value, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) retryAfter() {
	vals := Values(p.h, fieldRetryAfter)
	if len(vals) == 0 {
		return
	}
	if len(vals) > 1 {
		p.problem(fieldRetryAfter, strings.Join(vals, ", "), "appears %d times; Retry-After is a single value (the first is used)", len(vals))
	}
	d, err := ParseRetryAfter(vals[0], p.received)
	if err != nil {
		p.problem(fieldRetryAfter, vals[0], "neither delay-seconds (1*DIGIT) nor an HTTP-date")
		return
	}
	p.out.RetryAfter = &d
}

// list parses a Structured Field List. When the whole field does not parse,
// it reports one Problem and returns the members that parse on their own
// (split at commas outside Strings), so that what can be read is read.
func (p *parser) list(field string, vals []string) httpsfv.List {
	l, err := httpsfv.UnmarshalList(vals)
	return p.salvage(field, vals, l, err)
}

// salvage is list for a field already parsed into l, err.
func (p *parser) salvage(field string, vals []string, l httpsfv.List, err error) httpsfv.List {
	value := strings.Join(vals, ", ")
	if err == nil {
		if len(l) == 0 {
			p.problem(field, value, "empty list")
		}
		return l
	}
	var good httpsfv.List
	var bad []string
	for _, m := range splitMembers(value) {
		ml, err := httpsfv.UnmarshalList([]string{m})
		if err != nil || len(ml) != 1 {
			bad = append(bad, fmt.Sprintf("%q", m))
			continue
		}
		good = append(good, ml[0])
	}
	switch {
	case len(good) == 0:
		p.problem(field, value, "not a Structured Field List (%v)", err)
	case len(bad) == 0:
		p.problem(field, value, "not a Structured Field List (%v); clients MUST ignore it; its members were read", err)
	default:
		p.problem(field, value, "not a Structured Field List (%v); clients MUST ignore it; the valid members were read, not %s",
			err, strings.Join(bad, ", "))
	}
	return good
}

// splitMembers splits s at the commas outside Strings, trimming spaces and
// dropping empty members.
func splitMembers(s string) []string {
	var out []string
	start, quoted := 0, false
	add := func(m string) {
		if m = strings.Trim(m, " \t"); m != "" {
			out = append(out, m)
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			add(s[start:i])
			start = i + 1
		}
	}
	add(s[start:])
	return out
}

// describe names a bare item's type, and its value where short, for messages.
func describe(v any) string {
	switch v := v.(type) {
	case int64:
		return fmt.Sprintf("the Integer %d", v)
	case float64:
		return fmt.Sprintf("the Decimal %v", v)
	case string:
		return fmt.Sprintf("the String %q", v)
	case httpsfv.Token:
		return fmt.Sprintf("the Token %s", v)
	case bool:
		if v {
			return "the Boolean ?1 (a bare key)"
		}
		return "the Boolean ?0"
	case []byte:
		return "a Byte Sequence"
	case time.Time:
		return "a Date"
	case httpsfv.DisplayString:
		return "a Display String"
	case httpsfv.InnerList:
		return "an Inner List"
	}
	return fmt.Sprintf("a %T", v)
}

// intParam reads the optional parameter key of an item as a non-negative
// (positive if so asked) Integer, reporting a Problem when it is present but
// not one.
func (p *parser) intParam(field, value, what string, params *httpsfv.Params, key string, positive bool) (int64, bool) {
	v, ok := params.Get(key)
	if !ok {
		return 0, false
	}
	n, isInt := v.(int64)
	switch {
	case !isInt:
		p.problem(field, value, "%s: %s must be an Integer, not %s", what, key, describe(v))
	case n < 0:
		p.problem(field, value, "%s: %s must not be negative", what, key)
	case positive && n == 0:
		p.problem(field, value, "%s: %s must be positive", what, key)
	default:
		return n, true
	}
	return 0, false
}

// bytesParam reads the optional Byte Sequence parameter pk.
func (p *parser) bytesParam(field, value, what string, params *httpsfv.Params) []byte {
	v, ok := params.Get("pk")
	if !ok {
		return nil
	}
	b, isBytes := v.([]byte)
	if !isBytes {
		p.problem(field, value, "%s: pk must be a Byte Sequence, not %s", what, describe(v))
		return nil
	}
	return b
}

// name reads a draft-8 item's policy name: a String, or a Token with a
// Problem. Other types report a Problem and give ok false.
func (p *parser) name(field, value string, v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case httpsfv.Token:
		p.problem(field, value, "policy name %s must be a String (\"%s\"), not a Token", v, v)
		return string(v), true
	}
	return "", false
}

// registeredUnits are the quota units of the -10 IANA registry.
var registeredUnits = []string{"requests", "content-bytes", "concurrent-requests"}

func (p *parser) policy() {
	vals := Values(p.h, fieldPolicy)
	if len(vals) == 0 {
		return
	}
	value := strings.Join(vals, ", ")
	for _, m := range p.list(fieldPolicy, vals) {
		it, ok := m.(httpsfv.Item)
		if !ok {
			p.problem(fieldPolicy, value, "an Inner List is not a quota policy")
			continue
		}
		if n, isInt := it.Value.(int64); isInt {
			p.policyInteger(value, n, it.Params)
			continue
		}
		name, ok := p.name(fieldPolicy, value, it.Value)
		if !ok {
			p.problem(fieldPolicy, value, "a policy must be a String (draft-8) or an Integer (draft-6/-7), not %s", describe(it.Value))
			continue
		}
		p.policy8(value, name, it.Params)
	}
}

// policy8 reads a draft-8 quota policy: "name";q=…;w=…;qu=…;pk=….
func (p *parser) policy8(value, name string, params *httpsfv.Params) {
	what := fmt.Sprintf("policy %q", name)
	q, ok := p.intParam(fieldPolicy, value, what, params, "q", false)
	if !ok {
		if _, present := params.Get("q"); !present {
			p.problem(fieldPolicy, value, "%s: q is required", what)
		}
		return
	}
	pol := Policy{Name: name, Quota: q, Dialect: Draft8}
	if w, ok := p.intParam(fieldPolicy, value, what, params, "w", true); ok {
		pol.Window, pol.HasWindow = secondsDuration(w), true
	}
	if v, ok := params.Get("qu"); ok {
		switch u := v.(type) {
		case string:
			pol.Unit = u
		case httpsfv.Token:
			pol.Unit = string(u)
			p.problem(fieldPolicy, value, "%s: qu must be a String, not %s", what, describe(v))
		default:
			p.problem(fieldPolicy, value, "%s: qu must be a String, not %s", what, describe(v))
		}
		if pol.Unit == "request" {
			// -11's IANA table registers "request" while its text says
			// "requests": the same unit.
			pol.Unit = "requests"
		}
		if _, isInt := v.(int64); !isInt && !slices.Contains(registeredUnits, pol.Unit) {
			p.problem(fieldPolicy, value, "%s: qu %q is not a registered quota unit (%s)", what, pol.Unit, strings.Join(registeredUnits, ", "))
		}
	}
	pol.PartitionKey = p.bytesParam(fieldPolicy, value, what, params)
	p.out.Policies = append(p.out.Policies, pol)
}

// policyInteger reads a draft-6/-7 quota policy: 100;w=60.
func (p *parser) policyInteger(value string, n int64, params *httpsfv.Params) {
	what := fmt.Sprintf("policy %d", n)
	if n < 0 {
		p.problem(fieldPolicy, value, "%s: the quota must not be negative", what)
		return
	}
	pol := Policy{Quota: n}
	if w, ok := p.intParam(fieldPolicy, value, what, params, "w", true); ok {
		pol.Window, pol.HasWindow = secondsDuration(w), true
	} else if _, present := params.Get("w"); !present {
		p.problem(fieldPolicy, value, "%s: w is required", what)
	}
	p.intPolicies = append(p.intPolicies, len(p.out.Policies))
	p.out.Policies = append(p.out.Policies, pol)
}
