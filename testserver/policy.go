package testserver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// RetryAfterMode says how honest a rejection's Retry-After is.
type RetryAfterMode string

// The Retry-After modes (serve --retry-after).
const (
	// RetryAccurate advertises the true wait, rounded up to a whole second:
	// never earlier than the moment a retry is really admitted.
	RetryAccurate RetryAfterMode = "accurate"
	// RetryMissing sends no Retry-After at all.
	RetryMissing RetryAfterMode = "missing"
	// RetryEarly advertises half the true wait, rounded down to a whole
	// second (a 1.9 s wait advertises 0).
	RetryEarly RetryAfterMode = "early"
	// RetryLate advertises the true wait plus one window (the policy's
	// window, or a bucket's advertised window), rounded up.
	RetryLate RetryAfterMode = "late"
)

// RetryAfterModes lists the modes in the contract's order.
var RetryAfterModes = []RetryAfterMode{RetryAccurate, RetryMissing, RetryEarly, RetryLate}

// Fault is a deliberate defect in the headers the server emits, each the
// trigger of one verifier finding.
type Fault string

// The faults (serve --fault).
const (
	// FaultMalformedRateLimit breaks the grammar of the current-state field
	// of every dialect emitted (RateLimit, RateLimit-Remaining,
	// X-RateLimit-Remaining) by appending ";" to its value, which no
	// Structured Field and no integer accepts. Finding:
	// ratelimit-header-malformed.
	FaultMalformedRateLimit Fault = "malformed-ratelimit"
	// FaultMalformedRetryAfter writes Retry-After as a decimal number of
	// seconds ("2.5") or, with the http-date format, as an RFC 3339 time;
	// neither is allowed by RFC 9110. Finding: retry-after-malformed.
	FaultMalformedRetryAfter Fault = "malformed-retry-after"
	// FaultRemainingStuck advertises remaining = limit − 1 on every
	// response, whatever the limiter decided. Finding:
	// ratelimit-header-inconsistent.
	FaultRemainingStuck Fault = "remaining-stuck"
	// FaultPolicyLie advertises twice the enforced quota (limit, q).
	// Finding: ratelimit-policy-mismatch.
	FaultPolicyLie Fault = "policy-lie"
	// FaultCacheableReject marks rejections "Cache-Control: public,
	// max-age=3600" instead of no-store. Finding: cacheable-429.
	FaultCacheableReject Fault = "cacheable-reject"
	// FaultAdvertiseRate advertises the refill rate per second as the
	// quota, over a window of 1 s, instead of the limit or capacity:
	// RateLimit-Policy q=RATE;w=1, X-RateLimit-Limit: RATE (RATE rounded to
	// the nearest whole number, at least 1; a window algorithm's rate is
	// limit/window). Remaining stays honest.
	FaultAdvertiseRate Fault = "advertise-rate"
	// FaultConstantReset advertises the full window (a bucket's advertised
	// window) as the time until more quota (RateLimit t) and until the
	// quota is full (reset), whatever the limiter's state. Retry-After
	// stays honest.
	FaultConstantReset Fault = "constant-reset"
	// FaultRetryAfterMs writes Retry-After in milliseconds: the wait in ms
	// as delay-seconds digits (2 s becomes "2000"). Finding:
	// retry-after-implausible.
	FaultRetryAfterMs Fault = "retry-after-ms"
	// FaultRetryAfterUnix writes Retry-After as the Unix time (seconds,
	// rounded up) of the moment a retry is admitted, as delay-seconds
	// digits, as if copied from an epoch reset. Finding:
	// retry-after-implausible.
	FaultRetryAfterUnix Fault = "retry-after-unix"
	// FaultRetryAfterZero writes Retry-After: 0 on every rejection.
	// Finding: retry-after-early.
	FaultRetryAfterZero Fault = "retry-after-zero"
	// FaultRetryAfterWindow writes the advertised window (whole seconds,
	// rounded up) as Retry-After on every rejection, whatever the time
	// left. Finding: retry-after-constant.
	FaultRetryAfterWindow Fault = "retry-after-window"
	// FaultRetryAfterOnSuccess adds Retry-After (the time until the quota
	// is full, at least 1 s) to admitted responses too. Finding:
	// retry-after-on-success.
	FaultRetryAfterOnSuccess Fault = "retry-after-on-success"
	// FaultRemainingOffByOne advertises one more remaining than the limiter
	// has left on admitted responses (the request counted after the
	// answer: the first shows the full quota, none shows 0 before a
	// rejection). Finding: ratelimit-header-inconsistent.
	FaultRemainingOffByOne Fault = "remaining-off-by-one"
	// FaultRemainingRandom advertises a uniformly random remaining in
	// [0, quota] on every response, as a distributed store gone wrong.
	// Finding: ratelimit-header-inconsistent.
	FaultRemainingRandom Fault = "remaining-random"
	// FaultResetEpoch writes the drafts' delay fields (RateLimit-Reset,
	// reset, t, w) as the Unix time of the moment they name. x-ratelimit
	// accepts either form and is left alone. Finding:
	// ratelimit-header-malformed.
	FaultResetEpoch Fault = "reset-epoch"
	// FaultResetDelta writes x-ratelimit-epoch's X-RateLimit-Reset as a
	// delay in seconds instead of a Unix time. Finding:
	// ratelimit-header-malformed.
	FaultResetDelta Fault = "reset-delta"
)

// Faults lists every fault.
var Faults = []Fault{FaultMalformedRateLimit, FaultMalformedRetryAfter, FaultRemainingStuck, FaultPolicyLie, FaultCacheableReject,
	FaultAdvertiseRate, FaultConstantReset, FaultRetryAfterMs, FaultRetryAfterUnix, FaultRetryAfterZero, FaultRetryAfterWindow,
	FaultRetryAfterOnSuccess, FaultRemainingOffByOne, FaultRemainingRandom, FaultResetEpoch, FaultResetDelta}

// Key kinds (serve --key): KeyGlobal, KeyIP, or KeyHeaderPrefix followed by
// a header name.
const (
	// KeyGlobal gives every request the same quota.
	KeyGlobal = "global"
	// KeyIP keys by the connection's source address (never by
	// X-Forwarded-For or similar headers, which a client can forge).
	KeyIP = "ip"
	// KeyHeaderPrefix keys by a request header's value: "header:X-Api-Key".
	// Requests without the header share one quota.
	KeyHeaderPrefix = "header:"
)

// DefaultStatus is the reject status when Policy.Status is zero.
const DefaultStatus = 429

// DefaultPolicyName names the policy in draft-8 headers when Policy.Name is
// empty.
const DefaultPolicyName = "default"

// DefaultDialects are the header dialects of a Policy whose Dialects is nil
// (serve --headers default).
var DefaultDialects = []headers.Dialect{headers.Draft8}

// Policy is how one route limits and what it tells clients. It is plain
// data; the zero value is invalid (its Limiter is). Validate reports every
// problem at once.
type Policy struct {
	// Name is the draft-8 policy name; "" means DefaultPolicyName.
	Name string
	// Limiter is the algorithm and its parameters.
	Limiter limiter.Config
	// Key says what shares a quota: KeyGlobal (or ""), KeyIP, or
	// KeyHeaderPrefix+NAME.
	Key string
	// Status is the rejection status (400–599); 0 means DefaultStatus.
	Status int
	// Dialects are the header dialects emitted on every response; nil
	// means DefaultDialects, and []headers.Dialect{headers.None} emits no
	// rate-limit header. At most one of draft-6, draft-7, draft-8,
	// draft-11, draft-12 and one of x-ratelimit, x-ratelimit-epoch:
	// dialects of a group share field names.
	Dialects []headers.Dialect
	// RetryAfter says how honest Retry-After is on rejections; "" means
	// RetryAccurate.
	RetryAfter RetryAfterMode
	// RetryAfterFormat is the Retry-After format; "" means seconds.
	RetryAfterFormat headers.RetryAfterFormat
	// Faults are the defects to inject into the headers.
	Faults []Fault
	// KeyFault is a defect of the key derivation ("" none; KeyCollapse).
	KeyFault KeyFault
	// TimerAtStart starts the limiter's timer (RefillInterval, AlignTimer)
	// with the server: the Handler (or Server) sets Limiter.Phase to its
	// creation time modulo the timer's period, and keeps that start across
	// reloads. Limiter.Phase must then be 0.
	TimerAtStart bool
}

// withStart returns p with its timer started at start (TimerAtStart): the
// Phase set, TimerAtStart cleared. Other policies are returned as they are.
func (p Policy) withStart(start time.Time) Policy {
	if !p.TimerAtStart {
		return p
	}
	c := p.Limiter
	var period time.Duration
	switch {
	case c.Refill == limiter.RefillInterval:
		period = c.RefillPeriod()
	case c.Align == limiter.AlignTimer:
		period = c.Window
	}
	if period > 0 {
		us := period.Microseconds()
		p.Limiter.Phase = time.Duration(((start.UnixMicro()%us)+us)%us) * time.Microsecond
	}
	p.TimerAtStart = false
	return p
}

// Validate reports every problem of p, joined, each prefixed "testserver:".
func (p Policy) Validate() error {
	var errs []error
	if err := p.Limiter.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("testserver: %w", err))
	}
	if _, err := parseKey(p.Key); err != nil {
		errs = append(errs, err)
	}
	if p.Status != 0 && (p.Status < 400 || p.Status > 599) {
		errs = append(errs, fmt.Errorf("testserver: reject status %d is not a 4xx or 5xx status", p.Status))
	}
	if err := validateDialects(p.Dialects); err != nil {
		errs = append(errs, err)
	}
	if p.RetryAfter != "" && !slices.Contains(RetryAfterModes, p.RetryAfter) {
		errs = append(errs, fmt.Errorf("testserver: Retry-After mode %q (valid: accurate, missing, early, late)", p.RetryAfter))
	}
	if p.RetryAfterFormat != "" {
		if _, err := headers.ParseRetryAfterFormat(string(p.RetryAfterFormat)); err != nil {
			errs = append(errs, fmt.Errorf("testserver: %w", err))
		}
	}
	if p.KeyFault != "" && p.KeyFault != KeyCollapse {
		errs = append(errs, fmt.Errorf("testserver: key fault %q (valid: %s)", p.KeyFault, KeyCollapse))
	}
	for _, f := range p.Faults {
		if !slices.Contains(Faults, f) {
			errs = append(errs, fmt.Errorf("testserver: fault %q (valid: %s)", f, joinFaults()))
		}
	}
	if p.TimerAtStart {
		if c := p.Limiter; c.Refill != limiter.RefillInterval && c.Align != limiter.AlignTimer {
			errs = append(errs, errors.New("testserver: a timer started with the server needs refill interval or align timer"))
		} else if c.Phase != 0 {
			errs = append(errs, errors.New("testserver: a timer started with the server sets the phase itself: leave Limiter.Phase 0"))
		}
	}
	return errors.Join(errs...)
}

func joinFaults() string {
	s := make([]string, len(Faults))
	for i, f := range Faults {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// validateDialects refuses unknown dialects, the vendor dialects (read,
// never served), none with others, and two dialects that write the same
// fields.
func validateDialects(ds []headers.Dialect) error {
	var errs []error
	var ietf, x []headers.Dialect
	for _, d := range ds {
		switch d {
		case headers.Draft6, headers.Draft7, headers.Draft8, headers.Draft11, headers.Draft12:
			ietf = append(ietf, d)
		case headers.XRateLimit, headers.XRateLimitEpoch:
			x = append(x, d)
		case headers.OpenAI, headers.GitHub, headers.Shopify:
			errs = append(errs, fmt.Errorf("testserver: header dialect %s is read from real APIs, not served (serve: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8, draft-11, draft-12)", d))
		case headers.None:
			if len(ds) > 1 {
				errs = append(errs, errors.New("testserver: header dialect none cannot be combined with others"))
			}
		default:
			errs = append(errs, fmt.Errorf("testserver: unknown header dialect %q", d))
		}
	}
	for _, g := range [][]headers.Dialect{ietf, x} {
		if len(g) > 1 {
			errs = append(errs, fmt.Errorf("testserver: header dialects %s write the same fields: choose one", joinDialects(g)))
		}
	}
	return errors.Join(errs...)
}

func joinDialects(ds []headers.Dialect) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = string(d)
	}
	return strings.Join(s, " and ")
}

// keySpec is a parsed Policy.Key: kind KeyGlobal, KeyIP or "header" with
// the canonical header name.
type keySpec struct {
	kind   string
	header string
}

func parseKey(s string) (keySpec, error) {
	switch s {
	case "", KeyGlobal:
		return keySpec{kind: KeyGlobal}, nil
	case KeyIP:
		return keySpec{kind: KeyIP}, nil
	}
	if name, ok := strings.CutPrefix(s, KeyHeaderPrefix); ok {
		if name == "" || strings.ContainsAny(name, " \t:\r\n") {
			return keySpec{}, fmt.Errorf("testserver: key %q: the header name is empty or invalid", s)
		}
		return keySpec{kind: "header", header: name}, nil
	}
	return keySpec{}, fmt.Errorf("testserver: key %q (valid: global, ip, header:NAME)", s)
}
