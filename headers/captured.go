package headers

import (
	"net/http"
	"strings"
	"time"
)

// ArrivalHeader is the reference server's echo of the moment it received the
// request, in Unix nanoseconds (decimal), sent with `serve --echo-arrival`.
const ArrivalHeader = "X-Rlprobe-Arrival"

// DecisionHeader is the reference server's number of the request's limiter
// decision in the order its limiter made them (1, 2, …; decimal), sent
// beside [ArrivalHeader]. Arrival stamps do not fix the order in which a
// server decided two requests that arrived close together; this does.
const DecisionHeader = "X-Rlprobe-Decision"

// Captured is the list of response header names rlprobe records verbatim:
// the rate-limit fields of every dialect (vendor ones included), the fields that decide caching
// (for the cacheable-429 finding), Date, Envoy's rejection marker and
// [ArrivalHeader]. The names are matched case-insensitively; a record keeps
// the server's spelling. Callers must not modify it.
var Captured = []string{
	fieldRetryAfter,
	fieldRateLimit,
	fieldPolicy,
	fieldPartition,
	fieldLimit6,
	fieldRemaining6,
	fieldReset6,
	fieldXLimit,
	fieldXRemaining,
	fieldXReset,
	fieldXUsed,
	fieldXResource,
	fieldXAltLimit,
	fieldXAltRemaining,
	fieldXAltReset,
	fieldOpenAILimitRequests,
	fieldOpenAIRemainingRequests,
	fieldOpenAIResetRequests,
	fieldOpenAILimitTokens,
	fieldOpenAIRemainingTokens,
	fieldOpenAIResetTokens,
	fieldShopify,
	fieldCacheControl,
	fieldExpires,
	"Age",
	fieldDate,
	fieldEnvoyLimited,
	ArrivalHeader,
}

// Cacheable reports whether a response with these headers carries explicit
// freshness a cache may serve it with (RFC 9111 §4.2.1, §5.2.2): Cache-Control
// public, s-maxage > 0 or max-age > 0, or, without max-age, an Expires later
// than the response's Date (received when Date is absent or invalid) — and
// neither no-store nor private. An invalid Expires counts as already
// expired. Directive names are case-insensitive; the first of repeated
// directives counts. received is when the response arrived.
func Cacheable(h http.Header, received time.Time) bool {
	dirs := cacheDirectives(Values(h, fieldCacheControl))
	if _, ok := dirs["no-store"]; ok {
		return false
	}
	if _, ok := dirs["private"]; ok {
		return false
	}
	if _, ok := dirs["public"]; ok {
		return true
	}
	if v, ok := dirs["s-maxage"]; ok {
		if n, ok := parseDigits(v); ok && n > 0 {
			return true
		}
	}
	if v, ok := dirs["max-age"]; ok {
		n, ok := parseDigits(v)
		return ok && n > 0
	}
	exp := Values(h, fieldExpires)
	if len(exp) == 0 {
		return false
	}
	t, ok := parseHTTPDate(strings.Trim(exp[0], " \t"), received)
	if !ok {
		return false
	}
	base := received
	if d := Values(h, fieldDate); len(d) > 0 {
		if dt, ok := parseHTTPDate(strings.Trim(d[0], " \t"), received); ok {
			base = dt
		}
	}
	return t.After(base)
}

// cacheDirectives parses Cache-Control lines into lower-case directive
// names and their (unquoted) values, keeping the first of repeated ones.
func cacheDirectives(lines []string) map[string]string {
	if len(lines) == 0 {
		return nil
	}
	dirs := map[string]string{}
	for _, d := range splitMembers(strings.Join(lines, ", ")) {
		name, value, _ := strings.Cut(d, "=")
		name = strings.ToLower(strings.Trim(name, " \t"))
		value = strings.Trim(value, " \t")
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = strings.ReplaceAll(value[1:len(value)-1], `\`, "")
		}
		if _, seen := dirs[name]; !seen {
			dirs[name] = value
		}
	}
	return dirs
}
