package headers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rlprobe/rlprobe/headers"
)

func ExampleSet() {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	headers.Set(h, headers.Draft8, now, headers.Quota{
		Policy: "default", Limit: 100, Window: time.Minute, Remaining: 50, UntilMore: 29500 * time.Millisecond,
	})
	// Set writes the drafts' spellings verbatim: read them with headers.Get,
	// since http.Header.Get would look for Go's "Ratelimit-Policy".
	fmt.Println("RateLimit-Policy:", headers.Get(h, "RateLimit-Policy"))
	fmt.Println("RateLimit:", headers.Get(h, "ratelimit"))
	fmt.Printf("h.Get misses them: %q\n", h.Get("RateLimit"))
	// Output:
	// RateLimit-Policy: "default";q=100;w=60
	// RateLimit: "default";r=50;t=30
	// h.Get misses them: ""
}

// ExampleParse_openAI reads the rate-limit fields of an OpenAI answer.
func ExampleParse_openAI() {
	h := http.Header{
		"x-ratelimit-limit-requests":     {"60"},
		"x-ratelimit-remaining-requests": {"0"},
		"x-ratelimit-reset-requests":     {"6m0s"},
		"x-ratelimit-limit-tokens":       {"150000"},
		"x-ratelimit-remaining-tokens":   {"149984"},
		"x-ratelimit-reset-tokens":       {"6ms"},
	}
	p := headers.Parse(h, time.Now())
	fmt.Println(p.Dialects)
	for i, l := range p.Limits {
		fmt.Printf("%s: %d of %d left, full in %s\n", l.Name, l.Remaining, p.Policies[i].Quota, l.Reset)
	}
	// Output:
	// [openai]
	// requests: 0 of 60 left, full in 6m0s
	// tokens: 149984 of 150000 left, full in 6ms
}

func ExampleParse() {
	received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	h.Set("RateLimit", "limit=100, remaining=0, reset=30")
	h.Set("RateLimit-Policy", "100;w=60")
	h.Set("Retry-After", "Fri, 02 Jan 2026 03:04:35 GMT")
	p := headers.Parse(h, received)
	fmt.Println(p.Dialects, *p.RetryAfter)
	for _, l := range p.Limits {
		fmt.Println(l.Dialect, l.Limit, l.Remaining, l.Reset)
	}
	for _, pol := range p.Policies {
		fmt.Println(pol.Dialect, pol.Quota, pol.Window)
	}
	// Output:
	// [draft-7] 30s
	// draft-7 100 0 30s
	// draft-7 100 1m0s
}

func ExampleParse_problems() {
	h := http.Header{}
	h.Set("RateLimit", "quota;t=1") // from the -10 draft's appendix
	for _, pr := range headers.Parse(h, time.Now()).Problems {
		fmt.Println(pr)
	}
	// Output:
	// RateLimit: "quota;t=1": policy name quota must be a String ("quota"), not a Token
	// RateLimit: "quota;t=1": limit "quota": r is required
}
