package headers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// The RateLimit field of every draft (the -07 dictionary, the -08…-11
// r/t list, the -12 a/w/c list) and draft-12's RateLimit-Partition.

// draft7Keys are the keys of the draft-7 RateLimit dictionary.
var draft7Keys = []string{"limit", "remaining", "reset"}

func (p *parser) rateLimit() {
	vals := Values(p.h, fieldRateLimit)
	if len(vals) == 0 {
		return
	}
	// A draft-7 dictionary cannot parse as a List (the list parser meets '='
	// after the token), and a draft-8 list of Strings cannot parse as a
	// Dictionary (keys start with a lower-case letter or '*'). A list of
	// Tokens such as `quota;t=1` parses as both; it is a dictionary only when
	// a draft-7 key has a value.
	dict, derr := httpsfv.UnmarshalDictionary(vals)
	if derr == nil && isDraft7(dict, true) {
		p.draft7Dict(strings.Join(vals, ", "), dict)
		return
	}
	list, lerr := httpsfv.UnmarshalList(vals)
	if lerr != nil && derr == nil && isDraft7(dict, false) {
		p.draft7Dict(strings.Join(vals, ", "), dict)
		return
	}
	if lerr != nil && derr != nil && isDraft7Salvage(vals) {
		value := strings.Join(vals, ", ")
		salvaged := httpsfv.NewDictionary()
		for _, m := range splitMembers(value) {
			md, err := httpsfv.UnmarshalDictionary([]string{m})
			if err != nil {
				continue
			}
			for _, k := range md.Names() {
				v, _ := md.Get(k)
				salvaged.Add(k, v)
			}
		}
		p.problem(fieldRateLimit, value, "not a Structured Field Dictionary (%v); clients MUST ignore it; the valid members were read", derr)
		p.draft7Dict(value, salvaged)
		return
	}
	p.draft8Limits(vals, list, lerr)
}

// isDraft7 reports whether d has a draft-7 key; with valued, only a key
// given a value (key=…) counts.
func isDraft7(d *httpsfv.Dictionary, valued bool) bool {
	for _, k := range draft7Keys {
		m, ok := d.Get(k)
		if !ok {
			continue
		}
		if it, isItem := m.(httpsfv.Item); !valued || !isItem || it.Value != true {
			return true
		}
	}
	return false
}

// isDraft7Salvage reports whether a field that parses as neither List nor
// Dictionary has a member key=value with a draft-7 key.
func isDraft7Salvage(vals []string) bool {
	for _, m := range splitMembers(strings.Join(vals, ", ")) {
		if d, err := httpsfv.UnmarshalDictionary([]string{m}); err == nil && isDraft7(d, true) {
			return true
		}
	}
	return false
}

// draft7Dict reads RateLimit: limit=100, remaining=50, reset=30.
func (p *parser) draft7Dict(value string, d *httpsfv.Dictionary) {
	p.draft7 = true
	lim := Limit{Dialect: Draft7}
	for _, k := range draft7Keys {
		m, ok := d.Get(k)
		if !ok {
			if k != "remaining" {
				p.problem(fieldRateLimit, value, "%s is required", k)
			}
			continue
		}
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			p.problem(fieldRateLimit, value, "%s must be an Integer, not an Inner List", k)
			continue
		}
		n, isInt := it.Value.(int64)
		switch {
		case !isInt:
			p.problem(fieldRateLimit, value, "%s must be an Integer, not %s", k, describe(it.Value))
			continue
		case n < 0:
			p.problem(fieldRateLimit, value, "%s must not be negative", k)
			continue
		}
		switch k {
		case "limit":
			lim.Limit, lim.HasLimit = n, true
		case "remaining":
			lim.Remaining, lim.HasRemaining = n, true
		case "reset":
			lim.Reset, lim.HasReset = secondsDuration(n), true
			if n >= epochSecondsAtLeast {
				p.problem(fieldRateLimit, value, "reset %d looks like a Unix time; draft-7 reset is delay seconds", n)
			}
		}
	}
	if lim.HasLimit || lim.HasRemaining || lim.HasReset {
		p.out.Limits = append(p.out.Limits, lim)
	}
}

// draft8Limits reads RateLimit: "default";r=50;t=30, "daily";r=900 (drafts
// -08…-11) and "default";a=50;w=30;c=1 (-12). An item with a or w is
// draft-12's; one with neither is draft-8's.
func (p *parser) draft8Limits(vals []string, l httpsfv.List, err error) {
	value := strings.Join(vals, ", ")
	for _, m := range p.salvage(fieldRateLimit, vals, l, err) {
		it, name, ok := p.namedItem(fieldRateLimit, value, m, "service limit", "its policy")
		if !ok {
			continue
		}
		what := fmt.Sprintf("limit %q", name)
		_, hasA := it.Params.Get("a")
		_, hasW := it.Params.Get("w")
		if hasA || hasW {
			p.out.Limits = append(p.out.Limits, p.limit12(value, what, name, it.Params))
			continue
		}
		lim := Limit{Name: name, Dialect: Draft8}
		if r, ok := p.intParam(fieldRateLimit, value, what, it.Params, "r", false); ok {
			lim.Remaining, lim.HasRemaining = r, true
		} else if _, present := it.Params.Get("r"); !present {
			p.problem(fieldRateLimit, value, "%s: r is required", what)
		}
		if t, ok := p.intParam(fieldRateLimit, value, what, it.Params, "t", false); ok {
			lim.Reset, lim.HasReset = secondsDuration(t), true
			if t >= epochSecondsAtLeast {
				p.problem(fieldRateLimit, value, "%s: t=%d looks like a Unix time; t is delay seconds", what, t)
			}
		}
		if _, present := it.Params.Get("q"); present {
			p.problem(fieldRateLimit, value, "%s: q belongs in RateLimit-Policy, not RateLimit", what)
			p.out.Problems[len(p.out.Problems)-1].Before = Draft11
			if q, ok := p.intParam(fieldRateLimit, value, what, it.Params, "q", false); ok {
				lim.Limit, lim.HasLimit = q, true
			}
		}
		lim.PartitionKey = p.bytesParam(fieldRateLimit, value, what, it.Params)
		p.out.Limits = append(p.out.Limits, lim)
	}
}

// limit12 reads a draft-12 service limit: a (required), w, c, pk. Other
// parameters, q among them, are unknown ones, ignored.
func (p *parser) limit12(value, what, name string, params *httpsfv.Params) Limit {
	lim := Limit{Name: name, Dialect: Draft12}
	if a, ok := p.intParam(fieldRateLimit, value, what, params, "a", false); ok {
		lim.Remaining, lim.HasRemaining = a, true
	} else if _, present := params.Get("a"); !present {
		p.problem(fieldRateLimit, value, "%s: a is required", what)
	}
	if w, ok := p.intParam(fieldRateLimit, value, what, params, "w", false); ok {
		lim.Reset, lim.HasReset = secondsDuration(w), true
		if w >= epochSecondsAtLeast {
			p.problem(fieldRateLimit, value, "%s: w=%d looks like a Unix time; w is delay seconds", what, w)
		}
	}
	if c, ok := p.intParam(fieldRateLimit, value, what, params, "c", false); ok {
		lim.Cost, lim.HasCost = c, true
	}
	lim.PartitionKey = p.bytesParam(fieldRateLimit, value, what, params)
	return lim
}

// partition reads RateLimit-Partition: "api";user_id;method=GET, a List of
// String items whose Boolean parameters are per-request dimensions and
// whose valued parameters restrict the policy.
func (p *parser) partition() {
	vals := Values(p.h, fieldPartition)
	if len(vals) == 0 {
		return
	}
	value := strings.Join(vals, ", ")
	for _, m := range p.list(fieldPartition, vals) {
		it, name, ok := p.namedItem(fieldPartition, value, m, "partitioned policy", "it")
		if !ok {
			continue
		}
		part := Partition{Policy: name}
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			d := Dimension{Name: k}
			switch v := v.(type) {
			case bool:
				if !v {
					p.problem(fieldPartition, value, "policy %q: dimension %s=?0; a dimension is a bare key or has a value", name, k)
					continue
				}
			case string:
				d.Value, d.Fixed = v, true
			case httpsfv.Token:
				d.Value, d.Fixed = string(v), true
			case int64:
				d.Value, d.Fixed = strconv.FormatInt(v, 10), true
			default:
				p.problem(fieldPartition, value, "policy %q: dimension %s: %s is not a value", name, k, describe(v))
				continue
			}
			part.Dimensions = append(part.Dimensions, d)
		}
		p.out.Partitions = append(p.out.Partitions, part)
	}
}

// namedItem reads a List member that must be an Item whose value is a
// String naming it (a service limit's policy, a partitioned policy): it
// returns the item and the name, or records the Problem and false. what
// names the member and naming what its String names, in the message.
func (p *parser) namedItem(field, value string, m httpsfv.Member, what, naming string) (httpsfv.Item, string, bool) {
	it, ok := m.(httpsfv.Item)
	if !ok {
		p.problem(field, value, "an Inner List is not a %s", what)
		return it, "", false
	}
	name, ok := p.name(field, value, it.Value)
	if !ok {
		p.problem(field, value, "a %s must be a String naming %s, not %s", what, naming, describe(it.Value))
		return it, "", false
	}
	return it, name, true
}
