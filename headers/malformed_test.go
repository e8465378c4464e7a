package headers

import (
	"net/http"
	"strings"
	"testing"
)

// TestParseMalformed feeds one bad value at a time: each must give a Problem
// naming its field, and Parse must not panic.
func TestParseMalformed(t *testing.T) {
	tests := []struct {
		field, value string
		message      string // substring of the Problem's message
	}{
		// RateLimit-Policy, draft-8.
		{"RateLimit-Policy", `quota;q=100;w=1`, "must be a String"},
		{"RateLimit-Policy", `"default";w=60`, "q is required"},
		{"RateLimit-Policy", `"default";q=-1;w=60`, "q must not be negative"},
		{"RateLimit-Policy", `"default";q=10.0;w=60`, "q must be an Integer, not the Decimal 10"},
		{"RateLimit-Policy", `"default";q;w=60`, "q must be an Integer, not the Boolean"},
		{"RateLimit-Policy", `"default";q=10;w=0`, "w must be positive"},
		{"RateLimit-Policy", `"default";q=10;w="60"`, "w must be an Integer"},
		{"RateLimit-Policy", `"default";q=10;qu="reqs"`, "not a registered quota unit"},
		{"RateLimit", `"default";a=-1;w=3`, "a must not be negative"},
		{"RateLimit", `"default";w=3`, "a is required"},
		{"RateLimit", `"default";r=0;t=1800000000`, "looks like a Unix time"},
		{"RateLimit", `"default";a=0;w=1800000000`, "looks like a Unix time"},
		{"RateLimit", `"default";a=1;c=1.5`, "c must be an Integer"},
		{"RateLimit-Partition", `"api";user_id=?0`, "a dimension is a bare key or has a value"},
		{"RateLimit-Partition", `api;user_id`, "must be a String"},
		{"RateLimit-Policy", `"default";q=10;qu=bytes`, "qu must be a String"},
		{"RateLimit-Policy", `"default";q=10;pk="abc"`, "pk must be a Byte Sequence"},
		{"RateLimit-Policy", `"default";Q=10`, "not a Structured Field List"},
		{"RateLimit-Policy", `"default" ;q=10`, "not a Structured Field List"},
		{"RateLimit-Policy", `("a" "b");q=10`, "Inner List"},
		{"RateLimit-Policy", `?1;q=10`, "must be a String (draft-8) or an Integer"},
		{"RateLimit-Policy", `"default";q=1000000000000000`, "not a Structured Field List"},
		{"RateLimit-Policy", ``, "empty list"},
		// RateLimit-Policy, draft-6/-7.
		{"RateLimit-Policy", `100`, "w is required"},
		{"RateLimit-Policy", `-5;w=60`, "must not be negative"},
		{"RateLimit-Policy", `10;w=1, 10;w=60`, "MUST NOT share"},
		// RateLimit, draft-8.
		{"RateLimit", `quota;t=1`, "must be a String"},
		{"RateLimit", `"quota";t=1`, "r is required"},
		{"RateLimit", `"sliding";q=12;r=6;t=1`, "q belongs in RateLimit-Policy"},
		{"RateLimit", `"default";r=5;t=-1`, "t must not be negative"},
		{"RateLimit", `"default";r=1.5`, "r must be an Integer"},
		{"RateLimit", `"default";r=5;pk=5`, "pk must be a Byte Sequence"},
		{"RateLimit", `100;r=5`, "must be a String naming its policy"},
		{"RateLimit", `"default";r=5,`, "not a Structured Field List"},
		{"RateLimit", `"unterminated;r=5`, "not a Structured Field List"},
		// RateLimit, draft-7.
		{"RateLimit", `limit=100, remaining=50`, "reset is required"},
		{"RateLimit", `remaining=50, reset=3`, "limit is required"},
		{"RateLimit", `limit=100, remaining=-1, reset=3`, "remaining must not be negative"},
		{"RateLimit", `limit="100", reset=3`, "limit must be an Integer"},
		{"RateLimit", `limit=(1 2), reset=3`, "Inner List"},
		{"RateLimit", `limit=100, reset=1767225600`, "looks like a Unix time"},
		{"RateLimit", `limit=100, reset=3, x="unterminated`, "not a Structured Field Dictionary"},
		// RateLimit-Limit / -Remaining / -Reset, draft-6.
		{"RateLimit-Limit", `abc`, "must be an Integer"},
		{"RateLimit-Limit", `10, 10;w=1`, "a List"},
		{"RateLimit-Limit", `1.5`, "must be an Integer, not the Decimal"},
		{"RateLimit-Remaining", `-3`, "must not be negative"},
		{"RateLimit-Remaining", `"3"`, "must be an Integer, not the String"},
		{"RateLimit-Reset", `1767225600`, "looks like a Unix time"},
		{"RateLimit-Reset", `soon`, "must be an Integer"},
		{"RateLimit-Reset", `3 4`, "not a Structured Field Integer"},
		// X-RateLimit-*.
		{"X-RateLimit-Limit", `ten`, "must be a non-negative Integer"},
		{"X-RateLimit-Limit", `-1`, "must be a non-negative Integer"},
		{"X-RateLimit-Limit", `10, 20`, "only the first member may be a bare limit"},
		{"X-RateLimit-Limit", `10, 10;w=0`, "w must be positive"},
		{"X-RateLimit-Limit", `10 minutes`, "neither an integer nor a list"},
		{"X-RateLimit-Remaining", `-1`, "not a non-negative integer"},
		{"X-RateLimit-Remaining", `1e3`, "not a non-negative integer"},
		{"X-RateLimit-Reset", `-5`, "neither delay seconds"},
		{"X-RateLimit-Reset", `in 5s`, "neither delay seconds"},
		{"X-Rate-Limit-Reset", `1.`, "neither delay seconds"},
		// Retry-After.
		{"Retry-After", `-1`, "neither delay-seconds"},
		{"Retry-After", `1.5`, "neither delay-seconds"},
		{"Retry-After", `2026-05-14T10:22:00Z`, "neither delay-seconds"},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Add(tt.field, tt.value)
		var p Parsed
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Parse(%s: %s) panicked: %v", tt.field, tt.value, r)
				}
			}()
			p = Parse(h, received)
		}()
		found := false
		for _, pr := range p.Problems {
			if pr.Field == tt.field && strings.Contains(pr.Message, tt.message) {
				found = true
			}
		}
		if !found {
			t.Errorf("Parse(%s: %s) problems = %v; want one for %s containing %q", tt.field, tt.value, p.Problems, tt.field, tt.message)
		}
	}
}

// TestParseMissingCompanions checks the draft-6 rules tying the three fields.
func TestParseMissingCompanions(t *testing.T) {
	h := http.Header{}
	h.Set("RateLimit-Limit", "10")
	if p := Parse(h, received); !hasProblem(p, "RateLimit-Reset", "missing") {
		t.Errorf("RateLimit-Limit without RateLimit-Reset: problems = %v", p.Problems)
	}
	h = http.Header{}
	h.Set("RateLimit-Remaining", "3")
	if p := Parse(h, received); !hasProblem(p, "RateLimit-Limit", "missing") {
		t.Errorf("RateLimit-Remaining alone: problems = %v", p.Problems)
	}
	h = http.Header{}
	h.Add("Retry-After", "5")
	h.Add("Retry-After", "6")
	p := Parse(h, received)
	if !hasProblem(p, "Retry-After", "appears 2 times") || p.RetryAfter == nil || *p.RetryAfter != 5e9 {
		t.Errorf("two Retry-After lines: problems = %v, RetryAfter = %v; want a problem and the first value", p.Problems, p.RetryAfter)
	}
}

func hasProblem(p Parsed, field, message string) bool {
	for _, pr := range p.Problems {
		if pr.Field == field && strings.Contains(pr.Message, message) {
			return true
		}
	}
	return false
}

// TestParseLenientExtraction checks what is kept from the draft's own bad
// examples.
func TestParseLenientExtraction(t *testing.T) {
	h := http.Header{}
	h.Set("RateLimit-Policy", "quota;q=100;w=1")
	h.Set("RateLimit", "quota;t=1")
	p := Parse(h, received)
	if len(p.Policies) != 1 || p.Policies[0].Name != "quota" || p.Policies[0].Quota != 100 || p.Policies[0].Window != 1e9 {
		t.Errorf("policies = %+v; want quota q=100 w=1s", p.Policies)
	}
	if len(p.Limits) != 1 || p.Limits[0].Name != "quota" || p.Limits[0].HasRemaining || !p.Limits[0].HasReset || p.Limits[0].Reset != 1e9 {
		t.Errorf("limits = %+v; want quota with t=1s and no r", p.Limits)
	}
	if len(p.Dialects) != 1 || p.Dialects[0] != Draft8 {
		t.Errorf("dialects = %v; want [draft-8]", p.Dialects)
	}
}

// TestParseFieldNameCase checks that field names match case-insensitively,
// also in a hand-built map with non-canonical keys.
func TestParseFieldNameCase(t *testing.T) {
	h := http.Header{"RateLimit": {`"a";r=1;t=2`}, "ratelimit-policy": {`"a";q=5;w=10`}, "x-ratelimit-remaining": {"3"}}
	p := Parse(h, received)
	if len(p.Policies) != 1 || len(p.Limits) != 2 || len(p.Problems) != 0 {
		t.Errorf("Parse(non-canonical keys) = %s", dump(p))
	}
}

// TestParseDictionaryOrList checks the §0.4 rule: a Token list can parse as a
// Dictionary too, and is draft-7 only when a draft-7 key has a value.
func TestParseDictionaryOrList(t *testing.T) {
	tests := []struct {
		value string
		want  Dialect
	}{
		{`limit=100, remaining=5, reset=3`, Draft7},
		{`limit=100,remaining=5,reset=3`, Draft7},
		{`"default";r=5;t=3`, Draft8},
		{`limit;r=5;t=3`, Draft8}, // a Token named limit, with a Problem
		{`reset;r=0`, Draft8},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("RateLimit", tt.value)
		if p := Parse(h, received); len(p.Dialects) != 1 || p.Dialects[0] != tt.want {
			t.Errorf("RateLimit: %s → dialects %v; want [%s]", tt.value, p.Dialects, tt.want)
		}
	}
}
