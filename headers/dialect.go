package headers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Dialect names one way of advertising rate-limit state in response headers.
// Its values are the contract's spellings; the zero value "" is not a
// dialect (see [Dialect.Valid]).
type Dialect string

// The dialects, in the order of [Dialects].
const (
	// None means no rate-limit header at all.
	None Dialect = "none"
	// XRateLimit is the legacy X-RateLimit-Limit / -Remaining / -Reset
	// triple with the reset as a delay in seconds (throttled, Envoy). When
	// declared by a policy it is also satisfied by [XRateLimitEpoch]; see
	// [Parsed.Speaks].
	XRateLimit Dialect = "x-ratelimit"
	// XRateLimitEpoch is the same triple with the reset as a Unix time in
	// seconds (GitHub, express-rate-limit).
	XRateLimitEpoch Dialect = "x-ratelimit-epoch"
	// Draft6 is draft-ietf-httpapi-ratelimit-headers-06: RateLimit-Limit,
	// RateLimit-Remaining, RateLimit-Reset (delay seconds) and
	// RateLimit-Policy with Integer items.
	Draft6 Dialect = "draft-6"
	// Draft7 is draft -07: RateLimit as a Dictionary (limit, remaining,
	// reset) and RateLimit-Policy with Integer items.
	Draft7 Dialect = "draft-7"
	// Draft8 is the syntax of drafts -08, -09 and -10: RateLimit and
	// RateLimit-Policy as Lists of String items with parameters, RateLimit's
	// r the remaining quota and t the time until it resets.
	Draft8 Dialect = "draft-8"
	// Draft11 is draft -11 (May 2026): the syntax of [Draft8] with new
	// meanings. RateLimit's r is the available quota and t the effective
	// window, the seconds within which the client can use no more than r —
	// an upper bound on how long r holds, no longer a reset. Retry-After
	// SHOULD NOT end before the effective window. A single response cannot
	// tell it from draft-8: [Parse] reports r/t items as draft-8 and
	// [Detect] decides over a run; [Parsed.Speaks] treats the two alike.
	Draft11 Dialect = "draft-11"
	// Draft12 is draft -12 as the working group's open PR #166 writes it:
	// RateLimit: "default";a=50;w=30;c=1 — a the available quota, w the
	// effective window (the meaning of -11's r and t), c the quota units
	// this request cost — with RateLimit-Policy unchanged (q, qu, w, pk)
	// and a new RateLimit-Partition field naming each policy's partition
	// dimensions ("api";user_id;method=GET).
	Draft12 Dialect = "draft-12"
	// OpenAI is OpenAI's pair of triples, read and never served by the
	// reference server: x-ratelimit-limit-requests,
	// x-ratelimit-remaining-requests, x-ratelimit-reset-requests (a Go-style
	// duration such as 6m0s, 1s or 20ms: the time until the quota is full
	// again), and the same three for -tokens. Many OpenAI-compatible APIs
	// (Groq, Azure OpenAI, LiteLLM) send them too.
	OpenAI Dialect = "openai"
	// GitHub is the x-ratelimit-epoch triple with x-ratelimit-used and
	// x-ratelimit-resource (GitHub's REST API). A response speaking it also
	// speaks x-ratelimit-epoch and x-ratelimit; see [Parsed.Speaks].
	GitHub Dialect = "github"
	// Shopify is X-Shopify-Shop-Api-Call-Limit: 32/40, the calls in
	// Shopify's leaky bucket and its size (the REST Admin API).
	Shopify Dialect = "shopify"
)

// Dialects lists every dialect in a stable order (the order of the
// contract). Callers must not modify it.
var Dialects = []Dialect{None, XRateLimit, XRateLimitEpoch, Draft6, Draft7, Draft8, Draft11, Draft12, OpenAI, GitHub, Shopify}

// EffectiveWindow reports whether d's RateLimit time parameter (t of
// [Draft11], w of [Draft12]) is an effective window — an upper bound on how
// long the available quota holds — rather than a reset, as in the drafts
// before -11.
func (d Dialect) EffectiveWindow() bool {
	return d == Draft11 || d == Draft12
}

// Vendor reports whether d is a vendor dialect ([OpenAI], [GitHub],
// [Shopify]): one rlprobe reads but the reference server does not serve.
func (d Dialect) Vendor() bool {
	return d == OpenAI || d == GitHub || d == Shopify
}

// ErrUnknownDialect is wrapped by the errors of [ParseDialects].
var ErrUnknownDialect = errors.New("unknown header dialect")

// Valid reports whether d is one of [Dialects].
func (d Dialect) Valid() bool {
	return dialectRank(d) >= 0
}

// dialectRank is d's index in Dialects, or -1.
func dialectRank(d Dialect) int {
	for i, v := range Dialects {
		if v == d {
			return i
		}
	}
	return -1
}

// validDialects is the list shown in error messages.
func validDialects() string {
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = string(d)
	}
	return strings.Join(names, ", ")
}

// ParseDialects parses a comma-separated list of dialect names, as in
// `--headers draft-8,x-ratelimit`. Spaces around names are ignored and names
// are case-insensitive; duplicates are dropped; the result keeps the order of
// s. An empty list, an empty member, an unknown name, or "none" combined with
// another dialect is an error wrapping [ErrUnknownDialect] that names the
// valid values.
func ParseDialects(s string) ([]Dialect, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("headers: empty dialect list (valid: %s): %w", validDialects(), ErrUnknownDialect)
	}
	var out []Dialect
	for part := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			return nil, fmt.Errorf("headers: empty dialect in %q (valid: %s): %w", s, validDialects(), ErrUnknownDialect)
		}
		d := Dialect(strings.ToLower(name))
		if !d.Valid() {
			return nil, fmt.Errorf("headers: dialect %q (valid: %s): %w", name, validDialects(), ErrUnknownDialect)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if slices.Contains(out, None) && len(out) > 1 {
		return nil, fmt.Errorf("headers: dialect %q cannot be combined with others in %q: %w", None, s, ErrUnknownDialect)
	}
	return out, nil
}
