package headers

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzFields are the fields FuzzParse fills, one fuzzed string each; a "\n"
// in a string splits it into several field lines.
var fuzzFields = []string{
	"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Rate-Limit-Reset", "Retry-After",
	"X-RateLimit-Resource",
}

// fuzzSeeds are the drafts' examples, good and bad, and real servers'.
var fuzzSeeds = [][11]string{
	{`"burst";q=100;w=60,"daily";q=1000;w=86400`, `"burst";r=50;t=30, "daily";r=999;pk=:dHJpYWwxMjEzMjM=:`},
	{`"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `"peruser";r=6;t=1`},
	{`quota;q=100;w=1`, `quota;t=1`},
	{`"sliding";q=12;w=1`, `"sliding";q=12;r=6;t=1`},
	{`"x"; q=5; w=60`, `"x"; r=5; t=3`},
	{`100;w=60`, `limit=100, remaining=50, reset=30`},
	{`10;w=1, 10;w=60`, ``, `10`, `9`, `1`},
	{`10;w=1;burst=1000, 1000;w=3600`, ``, `100, 100;w=60`, `5`, `7`},
	{``, ``, ``, ``, ``, `10, 10;w=1;name="per-ip", 1000;w=3600`, `9`, `1`},
	{``, ``, ``, ``, ``, `5000`, `4999`, `1767225600`, ``, `60`},
	{``, ``, ``, ``, ``, `60`, `12`, ``, `1767225600123`, `Fri, 31 Dec 1999 23:59:59 GMT`},
	{``, ``, ``, ``, ``, ``, ``, `2.5`, ``, `Thursday, 14-May-26 10:22:00 GMT`},
	{``, ``, ``, ``, ``, ``, ``, `Thu, 14 May 2026 10:22:00 GMT`, ``, `Thu May 14 10:22:00 2026`},
	{`"a";Q=1`, `"a";r=-1`, `-1`, `1.5`, `x`, `-1`, `ten`, `-5`, `1.`, `1.5`},
	{"\"a\";q=1\n\"b\";q=2", "\"a\";r=0\n\"b\";r=1;t=4", "", "", "", "", "", "", "", "5\n6"},
	{`100;w=60, "a";q=5;w=1`, `limit=100, reset=30`, ``, ``, ``, `10;w=1`, ``, `999999999.9`, ``, `0`, ` core `},
	{``, ``, ``, ``, ``, `7, 7;w=2;name=tok`, `1`, `1767225600.5`, ``, ``, `search`},
}

// FuzzParse checks that Parse never panics, and that whatever parses without
// a Problem, formatted again with the package's own writer, parses the same.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10])
	}
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, i, j, k, l, m string) {
		h := http.Header{}
		for n, v := range []string{a, b, c, d, e, g, i, j, k, l, m} {
			if v == "" {
				continue
			}
			for line := range strings.SplitSeq(v, "\n") {
				h.Add(fuzzFields[n], line)
			}
		}
		p := Parse(h, received)
		if len(p.Dialects) == 0 {
			t.Fatalf("no dialect, not even none:\n%s", dump(p))
		}
		if len(p.Problems) != 0 {
			return
		}
		h2 := http.Header{}
		writeFields(h2, received, p.Policies, p.Limits)
		if p.RetryAfter != nil {
			h2.Set(fieldRetryAfter, FormatRetryAfter(*p.RetryAfter, RetryAfterSeconds, received))
		}
		p2 := Parse(h2, received)
		if msg := sameParsed(p, p2); msg != "" {
			t.Fatalf("parse → format → parse is not stable: %s\ninput:\n%s\nparsed:\n%s\nformatted:\n%s\nparsed again:\n%s",
				msg, formatHeader(h), dump(p), formatHeader(h2), dump(p2))
		}
	})
}

// sameParsed compares two parses, allowing durations that were not whole
// seconds to come back rounded up, and X-RateLimit-Reset (a decimal, or an
// epoch in milliseconds) to move by less than a second.
func sameParsed(a, b Parsed) string {
	switch {
	case len(b.Problems) != 0:
		return "problems on the second parse"
	case !slices.Equal(a.Dialects, b.Dialects):
		return "dialects differ"
	case (a.RetryAfter == nil) != (b.RetryAfter == nil):
		return "Retry-After presence differs"
	case a.RetryAfter != nil && !roundedUp(*a.RetryAfter, *b.RetryAfter):
		return "Retry-After differs"
	case !slices.EqualFunc(a.Policies, b.Policies, func(x, y Policy) bool {
		return x.Name == y.Name && x.Quota == y.Quota && x.Window == y.Window && x.HasWindow == y.HasWindow &&
			x.Unit == y.Unit && bytes.Equal(x.PartitionKey, y.PartitionKey) && x.Dialect == y.Dialect
	}):
		return "policies differ"
	case !slices.EqualFunc(a.Limits, b.Limits, func(x, y Limit) bool {
		reset := x.Reset == y.Reset
		if x.Dialect == XRateLimit || x.Dialect == XRateLimitEpoch || x.Dialect == GitHub {
			reset = y.Reset-x.Reset > -time.Second && y.Reset-x.Reset < time.Second
		}
		return x.Name == y.Name && x.Limit == y.Limit && x.HasLimit == y.HasLimit && x.Remaining == y.Remaining &&
			x.HasRemaining == y.HasRemaining && x.Used == y.Used && x.HasUsed == y.HasUsed && reset && x.HasReset == y.HasReset && x.ResetIsEpoch == y.ResetIsEpoch &&
			bytes.Equal(x.PartitionKey, y.PartitionKey) && x.Dialect == y.Dialect && x.Cost == y.Cost && x.HasCost == y.HasCost
	}):
		return "limits differ"
	}
	return ""
}

// roundedUp reports whether got is want rounded up to whole seconds (or
// saturated with it).
func roundedUp(want, got time.Duration) bool {
	return got == want || (got > want && got-want < time.Second)
}

// FuzzParseRetryAfter checks that ParseRetryAfter never panics, never gives
// a negative delay, and that what it accepts formats back to a value asking
// for no less.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "1.5", "+5", " 30 ", "99999999999999999999",
		"Fri, 31 Dec 1999 23:59:59 GMT", "Thursday, 14-May-26 10:22:00 GMT", "Thu May 14 10:22:00 2026",
		"Thu, 14 May 2026 10:22:00 UTC", "2026-05-14T10:22:00Z", "Thu, 14 May 2026 25:61:61 GMT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := ParseRetryAfter(v, received)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v < 0", v, d)
		}
		for _, f := range []RetryAfterFormat{RetryAfterSeconds, RetryAfterHTTPDate} {
			s := FormatRetryAfter(d, f, received)
			d2, err := ParseRetryAfter(s, received)
			if err != nil || (d2 < d && d < time.Duration(1<<63-1)-time.Second) {
				t.Fatalf("ParseRetryAfter(%q) = %v; formatted as %s %q → %v, %v", v, d, f, s, d2, err)
			}
		}
	})
}

// FuzzParseDraft12 fuzzes the fields of drafts -11 and -12: RateLimit with
// a/w/c (or r/t with q inside), RateLimit-Policy and RateLimit-Partition.
// Parse must not panic, every partition must name its policy and carry
// dimensions with names, and what parses without a Problem must format and
// parse back the same.
func FuzzParseDraft12(f *testing.F) {
	for _, s := range [][3]string{
		{`"burst";q=100;w=60`, `"burst";a=80;w=45`, ``},
		{`"api";q=1000;w=3600;pk=:R0VUH2FsaWNl:`, `"api";a=950;w=1200;c=1;pk=:R0VUH2FsaWNl:`, `"api";user_id;method=GET, "search";client_id`},
		{`"sliding";q=12;w=1`, `"sliding";q=12;a=6;w=1`, `"sliding";method=?0`},
		{`"sliding";q=12;qu="request";w=1`, `"sliding";q=12;r=1;t=1`, `sliding;user_id`},
		{`"a";q=1`, `"a";w=3`, `"a";n=1;d=1.5;b=:AA==:`},
		{``, `"a";a=-1;c=x`, `("a")`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, policy, rateLimit, partition string) {
		h := http.Header{}
		for i, v := range []string{policy, rateLimit, partition} {
			for line := range strings.SplitSeq(v, "\n") {
				if line != "" {
					h.Add([]string{fieldPolicy, fieldRateLimit, fieldPartition}[i], line)
				}
			}
		}
		p := Parse(h, received)
		for _, part := range p.Partitions {
			for _, d := range part.Dimensions {
				if d.Name == "" || (!d.Fixed && d.Value != "") {
					t.Fatalf("partition %q has dimension %+v", part.Policy, d)
				}
			}
		}
		for _, l := range p.Limits {
			if l.HasCost && (l.Dialect != Draft12 || l.Cost < 0) {
				t.Fatalf("cost on %+v", l)
			}
		}
		if len(p.Problems) != 0 {
			return
		}
		h2 := http.Header{}
		writeFields(h2, received, p.Policies, p.Limits)
		if msg := sameParsed(p, Parse(h2, received)); msg != "" {
			t.Fatalf("parse → format → parse is not stable: %s\ninput:\n%s\nparsed:\n%s\nformatted:\n%s", msg, formatHeader(h), dump(p), formatHeader(h2))
		}
	})
}
