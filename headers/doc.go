// Package headers formats and parses every rate-limit header dialect rlprobe
// knows, so that what the reference server emits and what the verifier and
// the inferrer read go through one grammar and can be tested as round trips.
//
// The dialects (see [Dialect]):
//
//   - draft-8: the IETF draft-ietf-httpapi-ratelimit-headers -08…-10 syntax,
//     two Structured Field Lists:
//     RateLimit-Policy: "default";q=100;w=60 and RateLimit: "default";r=50;t=30.
//   - draft-7: RateLimit as a Dictionary, RateLimit: limit=100, remaining=50, reset=30,
//     with RateLimit-Policy: 100;w=60 (Integer items).
//   - draft-6: separate Items RateLimit-Limit, RateLimit-Remaining,
//     RateLimit-Reset (delay seconds), with the same RateLimit-Policy.
//   - x-ratelimit and x-ratelimit-epoch: the legacy X-RateLimit-Limit,
//     X-RateLimit-Remaining and X-RateLimit-Reset, the reset being a delay in
//     seconds or a Unix time. Envoy's list form
//     (x-ratelimit-limit: 10, 10;w=1) and the X-Rate-Limit-* spelling are read
//     too.
//   - vendor dialects, read but not served by the reference server: openai
//     (x-ratelimit-limit-requests, -remaining-requests, -reset-requests: 6m0s,
//     and the -tokens triple), github (the x-ratelimit-epoch triple with
//     x-ratelimit-used and x-ratelimit-resource) and shopify
//     (X-Shopify-Shop-Api-Call-Limit: 32/40).
//
// Field names are matched case-insensitively everywhere ([Values], [Get]):
// records keep the server's spelling, which http.Header.Get would miss
// unless it is Go's canonical one. [Set] writes the drafts' spellings
// verbatim.
//
// [Set] writes a dialect; [Parse] reads all of them at once, never fails and
// never panics: each value that breaks its grammar becomes a [Problem] and
// whatever can still be extracted from it is kept. [FormatRetryAfter] and
// [ParseRetryAfter] handle Retry-After (RFC 9110 §10.2.3), [Cacheable] the
// freshness rules of RFC 9111 for the cacheable-429 finding.
//
// Everything in this package is a pure function of its arguments: the
// current time is always passed in, nothing reads the clock, and every
// function is safe for concurrent use (Set on distinct headers).
package headers
