package record

import (
	"net/http"
	"strconv"
	"strings"
)

// Class is what one result counts as in every verdict, inference, summary
// and report: the contract's accepted, rejected, other, error and
// not-sent. Outcome says what happened on the wire; Class says what it
// means for a rate limit.
type Class string

// Classes, in the contract's words.
const (
	// ClassAccepted: a 2xx answer that is not a cache hit.
	ClassAccepted Class = "accepted"
	// ClassRejected: the declared reject status, and 429 and 503 always.
	ClassRejected Class = "rejected"
	// ClassOther: any other answer (401, 404, 3xx, a 5xx other than the
	// declared one, a cache hit): reported apart, never counted as
	// accepted or rejected.
	ClassOther Class = "other"
	// ClassError: no HTTP answer (Result.Err says which transport error).
	ClassError Class = "error"
	// ClassNotSent: scheduled but never sent (cap, abort, signal).
	ClassNotSent Class = "not-sent"
)

// Classify is the one rule that turns a result into its class, given the
// declared reject status (0 when none is declared):
//
//   - an answer with Age > 0 is a cache hit that never reached the
//     limiter: other, whatever its status;
//   - 2xx is accepted;
//   - the declared status is rejected, and so are 429 and 503 always;
//     mismatch is true when such a rejection uses another status than a
//     declared one (itself a finding: reject-status-mismatch);
//   - any other status is other.
//
// Results without an answer are error or not-sent. No other package maps
// statuses to outcomes.
func Classify(r Result, declared int) (c Class, mismatch bool) {
	switch r.Outcome {
	case OutcomeNotSent:
		return ClassNotSent, false
	case OutcomeResponse:
	default:
		return ClassError, false
	}
	return ClassifyStatus(r.Status, declared, r.Headers)
}

// ClassifyStatus is Classify for an answer known only by its status and
// captured headers (h may be nil), as a preflight or a server's log sees
// it.
func ClassifyStatus(status, declared int, h http.Header) (c Class, mismatch bool) {
	switch {
	case IsCacheHit(h):
		return ClassOther, false
	case status >= 200 && status <= 299:
		return ClassAccepted, false
	case declared != 0 && status == declared:
		return ClassRejected, false
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return ClassRejected, declared != 0
	}
	return ClassOther, false
}

// IsCacheHit reports whether captured headers mark an answer served from a
// cache (Age > 0): such an answer never reached the limiter.
func IsCacheHit(h http.Header) bool {
	if h == nil {
		return false
	}
	for k, vs := range h {
		if !strings.EqualFold(k, "Age") {
			continue
		}
		for _, v := range vs {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				return true
			}
		}
	}
	return false
}

// Counts reports whether the class counts in a rate limit's tallies:
// accepted or rejected.
func (c Class) Counts() bool { return c == ClassAccepted || c == ClassRejected }
