package headers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfterFormat selects how [FormatRetryAfter] writes Retry-After.
type RetryAfterFormat string

// The Retry-After formats of RFC 9110 §10.2.3.
const (
	// RetryAfterSeconds is delay-seconds, e.g. "120".
	RetryAfterSeconds RetryAfterFormat = "seconds"
	// RetryAfterHTTPDate is an IMF-fixdate, e.g.
	// "Fri, 31 Dec 1999 23:59:59 GMT".
	RetryAfterHTTPDate RetryAfterFormat = "http-date"
)

// ErrMalformed is wrapped by the errors of [ParseRetryAfter] and
// [ParseRetryAfterFormat].
var ErrMalformed = errors.New("malformed value")

// ParseRetryAfterFormat parses "seconds" or "http-date" (case-insensitive),
// as given to `serve --retry-after-format`. Anything else is an error
// wrapping [ErrMalformed] that names the valid values.
func ParseRetryAfterFormat(s string) (RetryAfterFormat, error) {
	switch f := RetryAfterFormat(strings.ToLower(strings.TrimSpace(s))); f {
	case RetryAfterSeconds, RetryAfterHTTPDate:
		return f, nil
	}
	return "", fmt.Errorf("headers: Retry-After format %q (valid: %s, %s): %w", s, RetryAfterSeconds, RetryAfterHTTPDate, ErrMalformed)
}

// FormatRetryAfter formats a Retry-After value telling the client to wait d
// from now. Seconds are rounded up and the date is rounded up to the next
// whole second, so the advertised moment is never earlier than now + d; a
// negative d is formatted as 0 (or now). Any format other than
// [RetryAfterHTTPDate] gives delay-seconds.
func FormatRetryAfter(d time.Duration, f RetryAfterFormat, now time.Time) string {
	if f == RetryAfterHTTPDate {
		return time.Unix(ceilUnix(now.Add(max(d, 0))), 0).UTC().Format(http.TimeFormat)
	}
	return strconv.FormatInt(ceilSeconds(d), 10)
}

// ParseRetryAfter parses a Retry-After value into the delay it asks for,
// counted from received (the moment the response arrived; RFC 9110 counts
// delay-seconds from receipt). It accepts delay-seconds (1*DIGIT; values
// beyond the range of a Duration saturate) and the three HTTP-date forms a
// recipient must accept: IMF-fixdate, RFC 850 (a two-digit year is read as
// the latest year at most 50 years after received) and asctime. A date
// before received gives 0; a date carries whole seconds, so the delay may
// have a fraction. Optional whitespace around the value is ignored.
// Anything else (a sign, a decimal point, a unit, another date format) is an
// error wrapping [ErrMalformed].
//
// An HTTP-date depends on the server's clock: pass the time the server's
// Date header names, rather than the local receipt time, for a skew-free
// delay.
func ParseRetryAfter(v string, received time.Time) (time.Duration, error) {
	s := strings.Trim(v, " \t")
	if s == "" {
		return 0, fmt.Errorf("headers: Retry-After is empty: %w", ErrMalformed)
	}
	if n, ok := parseDigits(s); ok {
		return secondsDuration(n), nil
	}
	t, ok := parseHTTPDate(s, received)
	if !ok {
		return 0, fmt.Errorf("headers: Retry-After %q is neither delay-seconds nor an HTTP-date: %w", v, ErrMalformed)
	}
	return max(0, t.Sub(received)), nil
}

// DateSlack is how much longer than the server meant a delay read against
// its Date header can be: a Date carries whole seconds, truncated, so the
// server's clock read between it and 1 s later when it answered.
const DateSlack = time.Second

// ServerNow returns the moment to read a response's absolute times against
// (a Retry-After HTTP-date, an epoch or date reset): the time its first
// Date header that parses names, with dated true — the server's own clock
// as it answered, so that a delay read against it owes nothing to the skew
// between that clock and the client's, and is never shorter than the
// server meant, nor longer by DateSlack or more — or received (the local
// receipt) with dated false when it has none. A moment on the server's
// clock read against received is off by that skew, unknown.
func ServerNow(h http.Header, received time.Time) (now time.Time, dated bool) {
	for _, v := range Values(h, "Date") {
		if t, ok := parseHTTPDate(strings.Trim(v, " \t"), received); ok {
			return t, true
		}
	}
	return received, false
}

// IsDelaySeconds reports whether a Retry-After value is delay-seconds
// (1*DIGIT, optional whitespace around it): a delay counted from the
// response, on no clock. An HTTP-date names a moment on the server's.
func IsDelaySeconds(v string) bool {
	_, ok := parseDigits(strings.Trim(v, " \t"))
	return ok
}

// parseDigits parses 1*DIGIT, saturating at the largest int64.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-int64(c-'0'))/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// The three HTTP-date forms of RFC 9110 §5.6.7. Go's "Mon"/"Monday" accept
// any day name without checking it against the date, which is as lenient as
// the RFC allows.
const (
	imfFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"
	rfc850Date = "Monday, 02-Jan-06 15:04:05 GMT"
	asctimeDay = "Mon Jan _2 15:04:05 2006"
)

// parseHTTPDate parses an HTTP-date; received resolves RFC 850's two-digit
// years.
func parseHTTPDate(s string, received time.Time) (time.Time, bool) {
	if t, err := time.Parse(imfFixdate, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(rfc850Date, s); err == nil {
		// RFC 9110 §5.6.7: a two-digit year more than 50 years in the future
		// is the most recent past year with the same last two digits.
		ry := received.UTC().Year()
		y := ry - mod(ry, 100) + t.Year()%100
		switch {
		case y > ry+50:
			y -= 100
		case y <= ry-50:
			y += 100
		}
		return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC), true
	}
	if t, err := time.Parse(asctimeDay, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// mod is the non-negative remainder of a/b.
func mod(a, b int) int {
	return ((a % b) + b) % b
}
