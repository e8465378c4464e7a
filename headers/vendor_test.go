package headers

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseVendor reads the vendor dialects as their APIs send them, and
// their broken forms.
func TestParseVendor(t *testing.T) {
	tests := []struct {
		name     string
		header   map[string]string
		dialects []Dialect
		pols     []Policy
		lims     []Limit
		problems []string // substrings, one per Problem
	}{
		{
			name: "openai chat completion",
			header: map[string]string{
				"x-ratelimit-limit-requests": "5000", "x-ratelimit-remaining-requests": "4999", "x-ratelimit-reset-requests": "12ms",
				"x-ratelimit-limit-tokens": "800000", "x-ratelimit-remaining-tokens": "799975", "x-ratelimit-reset-tokens": "1ms",
			},
			dialects: []Dialect{OpenAI},
			pols: []Policy{{Name: "requests", Quota: 5000, Dialect: OpenAI},
				{Name: "tokens", Quota: 800000, Unit: "tokens", Dialect: OpenAI}},
			lims: []Limit{{Name: "requests", Remaining: 4999, HasRemaining: true, Reset: 12 * time.Millisecond, HasReset: true, Dialect: OpenAI},
				{Name: "tokens", Remaining: 799975, HasRemaining: true, Reset: time.Millisecond, HasReset: true, Dialect: OpenAI}},
		},
		{
			name: "openai exhausted, reset in minutes",
			header: map[string]string{
				"x-ratelimit-limit-requests": "200", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
			},
			dialects: []Dialect{OpenAI},
			pols:     []Policy{{Name: "requests", Quota: 200, Dialect: OpenAI}},
			lims:     []Limit{{Name: "requests", Remaining: 0, HasRemaining: true, Reset: 6 * time.Minute, HasReset: true, Dialect: OpenAI}},
		},
		{
			name:     "groq fractional reset",
			header:   map[string]string{"x-ratelimit-remaining-tokens": "5992", "x-ratelimit-reset-tokens": "2m59.56s"},
			dialects: []Dialect{OpenAI},
			lims:     []Limit{{Name: "tokens", Remaining: 5992, HasRemaining: true, Reset: 2*time.Minute + 59560*time.Millisecond, HasReset: true, Dialect: OpenAI}},
		},
		{
			name:     "openai broken values",
			header:   map[string]string{"x-ratelimit-limit-requests": "lots", "x-ratelimit-remaining-requests": "-1", "x-ratelimit-reset-requests": "-5s"},
			dialects: []Dialect{None},
			problems: []string{`x-ratelimit-limit-requests: "lots": not a non-negative integer`,
				`x-ratelimit-remaining-requests: "-1": not a non-negative integer`,
				`x-ratelimit-reset-requests: "-5s": not a duration such as 6m0s`},
		},
		{
			name:     "openai reset as a date",
			header:   map[string]string{"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "2026-05-14T10:21:00Z"},
			dialects: []Dialect{OpenAI},
			lims:     []Limit{{Name: "requests", Remaining: 3, HasRemaining: true, Dialect: OpenAI}},
			problems: []string{`x-ratelimit-reset-requests: "2026-05-14T10:21:00Z": not a duration`},
		},
		{
			name: "github core",
			header: map[string]string{"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4987", "x-ratelimit-reset": "1778754090",
				"x-ratelimit-used": "13", "x-ratelimit-resource": "core"},
			dialects: []Dialect{GitHub},
			lims: []Limit{{Name: "core", Limit: 5000, HasLimit: true, Remaining: 4987, HasRemaining: true, Used: 13, HasUsed: true,
				Reset: 59750 * time.Millisecond, HasReset: true, ResetIsEpoch: true, Dialect: GitHub}},
		},
		{
			name: "github graphql, used only",
			header: map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4998", "X-RateLimit-Reset": "1778754031",
				"X-RateLimit-Used": "2"},
			dialects: []Dialect{GitHub},
			lims: []Limit{{Limit: 5000, HasLimit: true, Remaining: 4998, HasRemaining: true, Used: 2, HasUsed: true,
				Reset: 750 * time.Millisecond, HasReset: true, ResetIsEpoch: true, Dialect: GitHub}},
		},
		{
			name:     "used with a delay reset is not github",
			header:   map[string]string{"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "599", "X-RateLimit-Reset": "420", "X-RateLimit-Used": "1"},
			dialects: []Dialect{XRateLimit},
			lims: []Limit{{Limit: 600, HasLimit: true, Remaining: 599, HasRemaining: true, Used: 1, HasUsed: true,
				Reset: 420 * time.Second, HasReset: true, Dialect: XRateLimit}},
		},
		{
			name:     "github broken used",
			header:   map[string]string{"x-ratelimit-limit": "60", "x-ratelimit-remaining": "59", "x-ratelimit-reset": "1778754090", "x-ratelimit-used": "one"},
			dialects: []Dialect{XRateLimitEpoch},
			lims: []Limit{{Limit: 60, HasLimit: true, Remaining: 59, HasRemaining: true,
				Reset: 59750 * time.Millisecond, HasReset: true, ResetIsEpoch: true, Dialect: XRateLimitEpoch}},
			problems: []string{`X-RateLimit-Used: "one": not a non-negative integer`},
		},
		{
			name:     "shopify",
			header:   map[string]string{"X-Shopify-Shop-Api-Call-Limit": "32/40"},
			dialects: []Dialect{Shopify},
			lims:     []Limit{{Limit: 40, HasLimit: true, Remaining: 8, HasRemaining: true, Used: 32, HasUsed: true, Dialect: Shopify}},
		},
		{
			name:     "shopify plus, spaces",
			header:   map[string]string{"x-shopify-shop-api-call-limit": " 1 / 80 "},
			dialects: []Dialect{Shopify},
			lims:     []Limit{{Limit: 80, HasLimit: true, Remaining: 79, HasRemaining: true, Used: 1, HasUsed: true, Dialect: Shopify}},
		},
		{
			name:     "shopify overfull",
			header:   map[string]string{"X-Shopify-Shop-Api-Call-Limit": "41/40"},
			dialects: []Dialect{Shopify},
			lims:     []Limit{{Limit: 40, HasLimit: true, Used: 41, HasUsed: true, Dialect: Shopify}},
			problems: []string{`X-Shopify-Shop-Api-Call-Limit: "41/40": 41 calls used in a bucket of 40`},
		},
		{
			name:     "shopify broken",
			header:   map[string]string{"X-Shopify-Shop-Api-Call-Limit": "32 of 40"},
			dialects: []Dialect{None},
			problems: []string{`X-Shopify-Shop-Api-Call-Limit: "32 of 40": not USED/SIZE`},
		},
		{
			name: "openai behind a draft-8 gateway",
			header: map[string]string{"RateLimit-Policy": `"gw";q=100;w=60`, "RateLimit": `"gw";r=99;t=60`,
				"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s"},
			dialects: []Dialect{Draft8, OpenAI},
			pols:     []Policy{{Name: "gw", Quota: 100, Window: time.Minute, HasWindow: true, Dialect: Draft8}, {Name: "requests", Quota: 60, Dialect: OpenAI}},
			lims: []Limit{{Name: "gw", Remaining: 99, HasRemaining: true, Reset: time.Minute, HasReset: true, Dialect: Draft8},
				{Name: "requests", Remaining: 59, HasRemaining: true, Reset: time.Second, HasReset: true, Dialect: OpenAI}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h[k] = []string{v}
			}
			p := Parse(h, received)
			if !slices.Equal(p.Dialects, tt.dialects) {
				t.Errorf("dialects %v, want %v\n%s", p.Dialects, tt.dialects, dump(p))
			}
			if !slices.EqualFunc(p.Policies, tt.pols, samePolicy) {
				t.Errorf("policies %+v\nwant %+v", p.Policies, tt.pols)
			}
			if !slices.EqualFunc(p.Limits, tt.lims, sameLimit) {
				t.Errorf("limits %+v\nwant %+v", p.Limits, tt.lims)
			}
			if len(p.Problems) != len(tt.problems) {
				t.Fatalf("problems %v, want %d: %q", p.Problems, len(tt.problems), tt.problems)
			}
			for i, want := range tt.problems {
				if got := p.Problems[i].String(); !strings.Contains(got, want) {
					t.Errorf("problem %d = %s, want it to contain %s", i, got, want)
				}
			}
		})
	}
}

func samePolicy(a, b Policy) bool {
	return a.Name == b.Name && a.Quota == b.Quota && a.Window == b.Window && a.HasWindow == b.HasWindow &&
		a.Unit == b.Unit && string(a.PartitionKey) == string(b.PartitionKey) && a.Dialect == b.Dialect
}

func sameLimit(a, b Limit) bool {
	return a.Name == b.Name && a.Limit == b.Limit && a.HasLimit == b.HasLimit && a.Remaining == b.Remaining &&
		a.HasRemaining == b.HasRemaining && a.Used == b.Used && a.HasUsed == b.HasUsed && a.Reset == b.Reset &&
		a.HasReset == b.HasReset && a.ResetIsEpoch == b.ResetIsEpoch && string(a.PartitionKey) == string(b.PartitionKey) &&
		a.Dialect == b.Dialect
}

// TestVendorSpeaks checks that what a declared dialect asks for is found in
// vendor answers: GitHub's fields satisfy x-ratelimit and x-ratelimit-epoch.
func TestVendorSpeaks(t *testing.T) {
	gh := http.Header{"x-ratelimit-limit": {"60"}, "x-ratelimit-remaining": {"59"}, "x-ratelimit-reset": {"1778754090"},
		"x-ratelimit-used": {"1"}, "x-ratelimit-resource": {"core"}}
	p := Parse(gh, received)
	for d, want := range map[Dialect]bool{GitHub: true, XRateLimit: true, XRateLimitEpoch: true, OpenAI: false, Draft8: false, None: false} {
		if got := p.Speaks(d); got != want {
			t.Errorf("GitHub answer Speaks(%s) = %v, want %v", d, got, want)
		}
	}
}

// TestSetVendor checks that Set writes the vendor dialects the way Parse
// reads them, and replaces them whatever their spelling.
func TestSetVendor(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{"X-RATELIMIT-LIMIT-REQUESTS": {"stale"}, "x-shopify-shop-api-call-limit": {"stale"}}
	Set(h, OpenAI, now, Quota{Policy: "requests", Limit: 60, Remaining: 0, UntilFull: 90 * time.Second},
		Quota{Policy: "tokens", Limit: 1000, Remaining: 10, UntilFull: 20 * time.Millisecond})
	Set(h, Shopify, now, Quota{Limit: 40, Remaining: 8})
	Set(h, GitHub, now, Quota{Policy: "search", Limit: 30, Remaining: 29, UntilFull: 59500 * time.Millisecond})
	want := "X-RateLimit-Limit: 30\nX-RateLimit-Remaining: 29\nX-RateLimit-Reset: 1800000060\nX-RateLimit-Resource: search\n" +
		"X-RateLimit-Used: 1\nX-Shopify-Shop-Api-Call-Limit: 32/40\n" +
		"x-ratelimit-limit-requests: 60\nx-ratelimit-limit-tokens: 1000\nx-ratelimit-remaining-requests: 0\n" +
		"x-ratelimit-remaining-tokens: 10\nx-ratelimit-reset-requests: 1m30s\nx-ratelimit-reset-tokens: 20ms\n"
	if got := formatHeader(h); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p := Parse(h, now)
	if !slices.Equal(p.Dialects, []Dialect{OpenAI, GitHub, Shopify}) || len(p.Problems) != 0 {
		t.Errorf("parsed back:\n%s", dump(p))
	}
	Set(h, OpenAI, now)
	Set(h, GitHub, now)
	Set(h, Shopify, now)
	if len(h) != 0 {
		t.Errorf("Set with no quota left %v", h)
	}
}

// respell returns h with every key rewritten by f.
func respell(h http.Header, f func(string) string) http.Header {
	out := http.Header{}
	for k, v := range h {
		out[f(k)] = append(out[f(k)], v...)
	}
	return out
}

// TestParseAnySpelling writes each dialect, then spells the names every
// way a server or a record may (lower case as HTTP/2 does, upper case, Go's
// canonical form, alternating case): Parse must read the same whatever the
// spelling, and Values must find every name.
func TestParseAnySpelling(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	alternate := func(s string) string {
		b := []byte(s)
		for i := range b {
			if i%2 == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			} else {
				b[i] = strings.ToLower(string(b[i]))[0]
			}
		}
		return string(b)
	}
	spellings := map[string]func(string) string{
		"lower": strings.ToLower, "upper": strings.ToUpper, "canonical": http.CanonicalHeaderKey, "alternate": alternate,
	}
	for _, d := range Dialects[1:] {
		h := http.Header{}
		Set(h, d, now, Quota{Policy: "requests", Limit: 10, Window: time.Minute, Remaining: 3, UntilMore: time.Second, UntilFull: 20 * time.Second})
		setField(h, fieldRetryAfter, "7")
		want := dump(Parse(h, now))
		read := d
		if d == Draft11 { // draft-8's syntax; Detect tells them apart over a run
			read = Draft8
		}
		if !strings.Contains(want, "dialects: ["+string(read)+"]") {
			t.Fatalf("%s: written as\n%sparsed as\n%s", d, formatHeader(h), want)
		}
		for name, f := range spellings {
			h2 := respell(h, f)
			if got := dump(Parse(h2, now)); got != want {
				t.Errorf("%s spelled %s:\n%sparsed as\n%swant\n%s", d, name, formatHeader(h2), got, want)
			}
			for k, v := range h {
				if got := Values(h2, k); !slices.Equal(got, v) {
					t.Errorf("%s spelled %s: Values(%q) = %q, want %q", d, name, k, got, v)
				}
			}
		}
	}
}

// TestValues checks the case-insensitive accessor, including a field sent
// under two spellings (a proxy that re-spells one line).
func TestValues(t *testing.T) {
	h := http.Header{
		"RateLimit-Policy": {`"a";q=1`},
		"Ratelimit-Policy": {`"b";q=2`},
		"ratelimit":        {`"a";r=0`},
		"Retry-After":      {"3", "4"},
	}
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"ratelimit-policy", []string{`"a";q=1`, `"b";q=2`}},
		{"RateLimit", []string{`"a";r=0`}},
		{"RETRY-AFTER", []string{"3", "4"}},
		{"X-RateLimit-Limit", nil},
		{"RateLimit-Polic", nil},
	} {
		if got := Values(h, tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("Values(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := Get(h, "ratelimit"); got != `"a";r=0` {
		t.Errorf(`Get("ratelimit") = %q`, got)
	}
	if got := Get(h, "Date"); got != "" {
		t.Errorf(`Get("Date") = %q, want ""`, got)
	}
	if h.Get("RateLimit") != "" {
		t.Error("http.Header.Get found the verbatim key: the accessor would not be needed")
	}
	p := Parse(h, received)
	if len(p.Policies) != 2 || p.Policies[1].Name != "b" {
		t.Errorf("Parse of two spellings of RateLimit-Policy:\n%s", dump(p))
	}
}

// vendorFuzzFields are the fields FuzzParseVendor fills.
var vendorFuzzFields = []string{
	"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
	"X-RateLimit-Limit-Tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
	"X-Shopify-Shop-Api-Call-Limit", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
	"x-ratelimit-used", "x-ratelimit-resource",
}

// FuzzParseVendor is FuzzParse over the vendor dialects' fields: Parse
// never panics, and what parses without a Problem formats and parses again
// to the same.
func FuzzParseVendor(f *testing.F) {
	for _, s := range [][12]string{
		{"10000", "9999", "6ms", "2000000", "1999982", "0s"},
		{"60", "0", "6m0s", "150000", "149984", "1m26.4s"},
		{"30", "29", "2.5", "", "", "99999999999999999999"},
		{"", "", "1h2m3.000000004s", "", "", "-1s", "32/40"},
		{"", "", "", "", "", "", "40/40", "5000", "4999", "1778754060", "1", "core"},
		{"", "", "", "", "", "", " 1 / 80 ", "60", "59", "1767225600.5", "", "search"},
		{"x", "1.5", "1d", "+1s", ".5s", "1e3s", "41/40", "10, 10;w=1", "-1", "3", "two", ""},
		{"7\n8", "", "1s\n2s", "", "", "", "1/2\n3/4", "", "", "", "1\n2", "a\nb"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11])
	}
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, i, j, k, l, m, n string) {
		h := http.Header{}
		for x, v := range []string{a, b, c, d, e, g, i, j, k, l, m, n} {
			if v == "" {
				continue
			}
			for line := range strings.SplitSeq(v, "\n") {
				h[vendorFuzzFields[x]] = append(h[vendorFuzzFields[x]], line)
			}
		}
		p := Parse(h, received)
		if len(p.Dialects) == 0 {
			t.Fatalf("no dialect, not even none:\n%s", dump(p))
		}
		for _, l := range p.Limits {
			if l.Reset < 0 || l.Remaining < 0 || l.Used < 0 || l.Limit < 0 {
				t.Fatalf("negative value:\n%s", dump(p))
			}
		}
		if len(p.Problems) != 0 {
			return
		}
		h2 := http.Header{}
		writeFields(h2, received, p.Policies, p.Limits)
		p2 := Parse(h2, received)
		if msg := sameParsed(p, p2); msg != "" {
			t.Fatalf("parse → format → parse is not stable: %s\ninput:\n%s\nparsed:\n%s\nformatted:\n%s\nparsed again:\n%s",
				msg, formatHeader(h), dump(p), formatHeader(h2), dump(p2))
		}
	})
}
