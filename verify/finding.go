package verify

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Severity ranks findings; --fail-on takes one.
type Severity string

// Severities, from least to most severe.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

func (s Severity) rank() int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarning:
		return 2
	case SeverityError:
		return 3
	}
	return 0
}

// AtLeast reports whether s is as severe as t or more.
func (s Severity) AtLeast(t Severity) bool { return s.rank() >= t.rank() }

// ParseSeverity parses info, warning or error (the --fail-on values).
func ParseSeverity(s string) (Severity, error) {
	switch v := Severity(strings.ToLower(strings.TrimSpace(s))); v {
	case SeverityInfo, SeverityWarning, SeverityError:
		return v, nil
	}
	return "", fmt.Errorf("verify: severity must be info, warning or error, not %q", s)
}

// Certainty says whether a finding holds whatever the true arrival times
// were (Certain) or only for some arrival times within the measured bounds
// (Possible). Only certain findings decide exit code 1.
type Certainty string

// Certainties.
const (
	Certain  Certainty = "certain"
	Possible Certainty = "possible"
)

// Finding ids (contract.md, "Findings").
const (
	IDWindowLimitExceeded         = "window-limit-exceeded"
	IDBurstLimitExceeded          = "burst-limit-exceeded"
	IDRateLimitExceeded           = "rate-limit-exceeded"
	IDNoLimitingObserved          = "no-limiting-observed"
	IDRaceOverAdmission           = "race-over-admission"
	IDPerInstanceLimit            = "per-instance-limit"
	IDRejectStatusMismatch        = "reject-status-mismatch"
	IDRetryAfterMalformed         = "retry-after-malformed"
	IDRateLimitHeaderMalformed    = "ratelimit-header-malformed"
	IDRetryAfterEarly             = "retry-after-early"
	IDRetryAfterImplausible       = "retry-after-implausible"
	IDRateLimitHeaderInconsistent = "ratelimit-header-inconsistent"
	IDRateLimitPolicyMismatch     = "ratelimit-policy-mismatch"
	IDCacheable429                = "cacheable-429"
	IDKeySpoofable                = "key-spoofable"
	IDKeyCollapsed                = "key-collapsed"
	IDRetryAfterMissing           = "retry-after-missing"
	IDRetryAfterLate              = "retry-after-late"
	IDRetryAfterConstant          = "retry-after-constant"
	IDRetryAfterBeforeWindow      = "retry-after-before-window"
	IDRetryAfterOnSuccess         = "retry-after-on-success"
	IDUnderAdmission              = "under-admission"
	IDUndeclaredPenalty           = "undeclared-penalty"
	IDRateLimitHeaderMissing      = "ratelimit-header-missing"
	IDConfigNotEnforced           = "config-not-enforced"
	IDConfigMismatch              = "config-mismatch"
	IDPolicyDrift                 = "policy-drift"
)

// findingSpec is one row of the finding table: what every finding of an id
// shares. A new finding adds its id above, a row here, and the check that
// raises it in its family's file.
type findingSpec struct {
	id string
	// severity is the finding's severity unless its check sets another
	// (retry-after-missing and ratelimit-header-missing depend on the
	// policy).
	severity Severity
	// check is the check that looks for it: the finding's check when its
	// evidence carries no check phase.
	check string
	// hint is one line a user can act on.
	hint string
}

// findingTable lists every finding in the contract's order.
var findingTable = []findingSpec{
	{IDWindowLimitExceeded, SeverityError, CheckBurst, "The limiter admits more than the policy allows in some window; a fixed window lets up to 2N through around its edge: use a sliding log or sliding-window counter, or declare --window-type fixed if that is the intended promise."},
	{IDBurstLimitExceeded, SeverityError, CheckBurst, "The bucket admits a larger burst than declared: lower its capacity (nginx burst = capacity − 1) or declare the real one."},
	{IDRateLimitExceeded, SeverityError, CheckSustained, "The long-run admitted rate is above the declared rate: check the configured refill rate and its unit (r/s vs r/m), and that every replica shares one limiter."},
	{IDNoLimitingObserved, SeverityError, CheckSustained, "Nothing was rejected under twice the allowed load: check that the limiter is enabled for this route (nginx: 'return' runs before limit_req) and keyed as declared."},
	{IDRaceOverAdmission, SeverityError, CheckRace, "Concurrent requests were admitted beyond the quota: make the check-and-increment atomic (a Lua script, INCR before compare, or a lock per key)."},
	{IDPerInstanceLimit, SeverityError, CheckBurst, "Each instance behind the balancer enforces the whole limit, so K instances admit K times it: keep the limiter's state in one store every instance shares (Redis, memcached), or divide the limit by the number of instances."},
	{IDRejectStatusMismatch, SeverityError, CheckHeaders, "Rejections use another status than declared: set the limiter's reject status (nginx limit_req_status 429) or declare --status."},
	{IDRetryAfterMalformed, SeverityError, CheckHeaders, "Send Retry-After as whole seconds (1*DIGIT) or an IMF-fixdate HTTP-date (RFC 9110 §10.2.3)."},
	{IDRateLimitHeaderMalformed, SeverityError, CheckHeaders, "Fix the header's syntax: clients must ignore malformed RateLimit fields (Structured Fields, RFC 9651)."},
	{IDRetryAfterEarly, SeverityError, CheckRetryAfter, "Retry-After tells clients to come back before a retry can succeed: advertise the real wait, rounded up."},
	{IDRetryAfterImplausible, SeverityError, CheckRetryAfter, "Retry-After is delay-seconds: send the wait in seconds, not milliseconds or a Unix time (use an HTTP-date for a moment)."},
	{IDRateLimitHeaderInconsistent, SeverityError, CheckHeaders, "The advertised remaining/reset values contradict what the server did: compute them from the same state the decision uses."},
	{IDRateLimitPolicyMismatch, SeverityError, CheckHeaders, "The advertised quota or window differs from the declared or observed policy: advertise what is enforced (buckets: q=capacity, w=ceil(capacity/rate))."},
	{IDCacheable429, SeverityError, CheckHeaders, "Rejections must not be cached (RFC 6585): send Cache-Control: no-store on them."},
	{IDKeySpoofable, SeverityError, CheckKeySpoof, "The per-IP limit trusts client-supplied headers: key on the connection's address, or on X-Forwarded-For only as set by your own proxy."},
	{IDKeyCollapsed, SeverityError, CheckKeySpoof, "Every client shares one quota though the limit is per client: key on the client's own address or header (behind a proxy, the address the proxy forwards, from your proxy only), not on the connection's peer."},
	{IDRetryAfterMissing, SeverityWarning, CheckRetryAfter, "Send Retry-After on rejections so that clients know when to retry."},
	{IDRetryAfterLate, SeverityWarning, CheckRetryAfter, "Retry-After asks clients to wait much longer than needed: advertise the real wait."},
	{IDRetryAfterConstant, SeverityWarning, CheckRetryAfter, "Retry-After is always the window length: advertise the time left until a retry is admitted."},
	{IDRetryAfterBeforeWindow, SeverityWarning, CheckRetryAfter, "Under draft -11 Retry-After SHOULD NOT end before the effective window (RateLimit t): advertise the same moment or later."},
	{IDUnderAdmission, SeverityWarning, CheckBurst, "Requests were rejected well below the declared limit: check for rejected requests counting against the quota, a smaller configured limit, or a key shared with other traffic; a sliding-window counter also rejects early after a busy window, as it weighs in the previous window's traffic."},
	{IDUndeclaredPenalty, SeverityWarning, CheckRecovery, "The key stayed refused long after its quota returned: the limiter penalises clients that exceed it (a block, or a window that refusals or requests extend); declare it with --penalty (penalty: in a policy file) if it is intended, and send a Retry-After that says when a retry is admitted."},
	{IDRetryAfterOnSuccess, SeverityInfo, CheckHeaders, "Retry-After belongs on 429/503 and redirects: admitted responses should not tell clients to wait."},
	{IDRateLimitHeaderMissing, SeverityInfo, CheckHeaders, "Send rate-limit headers (e.g. RateLimit and RateLimit-Policy) so that clients can pace themselves."},
	// Raised beside the check suite: by limitconf (a config held against
	// the live target) and by watch (drift).
	{IDConfigNotEnforced, SeverityError, CheckSustained, "The config limits this location, but the limiter never runs for it: a 'return' (or another rewrite-phase answer) comes before limit_req; serve the response from a handler that runs after it (proxy_pass, try_files)."},
	{IDConfigMismatch, SeverityError, CheckBurst, "The live limiter's family or parameters fall outside what the config declares: a stale reload, another layer limiting first, or units misread (r/s vs r/m)."},
	{IDPolicyDrift, SeverityError, CheckHeaders, "The limiter's behaviour changed since the watch began: check recent config reloads, deploys and failovers."},
}

// SuiteFindingIDs lists the ids the check suite itself raises, in the
// contract's order: FindingIDs without config-not-enforced,
// config-mismatch and policy-drift, which limitconf and watch raise.
var SuiteFindingIDs = FindingIDs[:slices.Index(FindingIDs, IDConfigNotEnforced)]

// FindingIDs lists every finding id in the contract's order.
var FindingIDs = func() []string {
	ids := make([]string, len(findingTable))
	for i, f := range findingTable {
		ids[i] = f.id
	}
	return ids
}()

// DefaultCheck returns the check a finding of id belongs to when the
// finding names none ("" for an id not in the table).
func DefaultCheck(id string) string {
	for _, f := range findingTable {
		if f.id == id {
			return f.check
		}
	}
	return ""
}

// specOf returns the table row of id.
func specOf(id string) findingSpec {
	for _, f := range findingTable {
		if f.id == id {
			return f
		}
	}
	return findingSpec{id: id, severity: SeverityError}
}

// Check names (contract.md: --only, --skip, JUnit).
const (
	CheckBurst      = "burst"
	CheckEdge       = "edge"
	CheckSustained  = "sustained"
	CheckRecovery   = "recovery"
	CheckRetryAfter = "retry-after"
	CheckRace       = "race"
	CheckKeySpoof   = "key-spoof"
	CheckHeaders    = "headers"
)

// Checks lists the check names in the order the suite runs them.
var Checks = []string{CheckBurst, CheckEdge, CheckSustained, CheckRecovery, CheckRetryAfter, CheckRace, CheckKeySpoof, CheckHeaders}

// Finding is one verdict about the target, as in the check and analyze
// documents.
type Finding struct {
	ID        string    `json:"id"`
	Severity  Severity  `json:"severity"`
	Certainty Certainty `json:"certainty"`
	// Check is the check whose traffic shows the finding ("" when the
	// records carry no check phase).
	Check string `json:"check"`
	// Endpoint is the rule's endpoint ("METHOD /path", or the requests'
	// path when the rule names none).
	Endpoint string `json:"endpoint"`
	// Client is the client whose quota is concerned ("" for a global key).
	Client string `json:"client"`
	// Message states what was seen, with numbers.
	Message string `json:"message"`
	// Hint is one line a user can act on.
	Hint     string   `json:"hint"`
	Evidence Evidence `json:"evidence"`
}

// Evidence points at the records behind a finding.
type Evidence struct {
	// Refs are the results concerned, as "agent:seq" (at most MaxRefs).
	Refs []string `json:"refs"`
	// StartNS and EndNS bound the interval concerned, in nanoseconds since
	// the run's start on the reference clock.
	StartNS int64 `json:"start_ns"`
	EndNS   int64 `json:"end_ns"`
	// Count is how many requests the finding counts.
	Count int `json:"count"`
	// Bound is the number Count was compared with, when there is one.
	Bound *int64 `json:"bound,omitempty"`
	// Headers are the response headers of an example result.
	Headers http.Header `json:"headers,omitempty"`
	// BySrc counts the accepted requests per connection (record src) of
	// the requests concerned (per-instance-limit).
	BySrc map[string]int `json:"by_src,omitempty"`
}

// MaxRefs bounds Evidence.Refs.
const MaxRefs = 50

func bound(n int64) *int64 { return &n }

// fails reports whether f decides exit 1 under failOn.
func (f *Finding) fails(failOn Severity) bool {
	return f.Certainty == Certain && f.Severity.AtLeast(failOn)
}

// sortFindings orders findings by severity (most severe first), certainty
// (certain first), then the contract's id order, endpoint and client.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if d := b.Severity.rank() - a.Severity.rank(); d != 0 {
			return d
		}
		if a.Certainty != b.Certainty {
			if a.Certainty == Certain {
				return -1
			}
			return 1
		}
		if d := slices.Index(FindingIDs, a.ID) - slices.Index(FindingIDs, b.ID); d != 0 {
			return d
		}
		if c := strings.Compare(a.Endpoint, b.Endpoint); c != 0 {
			return c
		}
		return strings.Compare(a.Client, b.Client)
	})
}
