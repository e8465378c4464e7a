package limitconf

import (
	"fmt"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// Format names a limiter's configuration format.
type Format string

// Formats.
const (
	Nginx   Format = "nginx"   // nginx.conf with limit_req_zone / limit_req
	Envoy   Format = "envoy"   // Envoy YAML with the HTTP local rate limit filter
	Traefik Format = "traefik" // Traefik dynamic configuration, YAML or TOML, or a Middleware CRD
	Kong    Format = "kong"    // Kong declarative configuration (decK / kong.yaml)
)

// Formats lists the formats in the order the CLI documents them.
var Formats = []Format{Nginx, Envoy, Traefik, Kong}

// ParseFormat parses a --format value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == strings.ToLower(strings.TrimSpace(s)) {
			return f, nil
		}
	}
	return "", fmt.Errorf("limitconf: format must be nginx, envoy, traefik or kong, not %q", s)
}

// Family is the algorithm family a rule declares, in the contract's names
// of inferred families.
type Family string

// Families a config can declare.
const (
	FixedWindow      Family = "fixed-window"       // N per clock- or timer-aligned window
	TokenBucket      Family = "token-bucket"       // a bucket that rejects at once (GCRA, nginx nodelay)
	LeakyBucketQueue Family = "leaky-bucket-queue" // a bucket that holds the excess (nginx without nodelay)
)

// Alignments of fixed windows that configs declare. AlignEpoch is the
// contract's; AlignTimer (windows on the limiter's own fill timer, whose
// phase nobody outside knows) cannot be written in a policy file.
const (
	AlignEpoch = "epoch"
	AlignTimer = "timer"
)

// KeyUnknown is the key of a rule whose key expression maps to none of the
// contract's keys (an nginx variable such as $request_uri).
const KeyUnknown = "unknown"

// Source is where in a configuration a rule or finding comes from.
type Source struct {
	File string `json:"file"`
	Line int    `json:"line"`
}

// String formats the source as "file:line" (the file alone when the line
// is unknown).
func (s Source) String() string {
	if s.Line <= 0 {
		return s.File
	}
	return fmt.Sprintf("%s:%d", s.File, s.Line)
}

// Rule is one limit a configuration declares: where it applies, what the
// product's documentation says it does (Family and its parameters), and
// the policy rule that rlprobe checks it with (Endpoint). Several rules may
// cover one location: all apply.
//
// Endpoint is exact where the product's algorithm is one of rlprobe's
// policies, and otherwise the tightest policy that the product's algorithm
// can never exceed (Envoy's stepwise fill: see the package doc), so that a
// certain finding against it is a certain broken promise.
type Rule struct {
	// Source is the directive, key or plugin that sets the limit; Zone is
	// where its parameters come from when that is elsewhere (an nginx
	// limit_req_zone), else the zero Source.
	Source   Source `json:"source"`
	ZoneAt   Source `json:"zone_source,omitzero"`
	Zone     string `json:"zone,omitempty"`
	Server   string `json:"server,omitempty"`
	Location string `json:"location"`
	// Path is the URL path a probe uses: the location's own path when it
	// is one URL (nginx "= /x", Envoy "path", Traefik Path(...)), else ""
	// (a prefix or regular expression needs a URL from the user).
	Path string `json:"path,omitempty"`
	// Prefix is the literal prefix of a prefix location ("" otherwise).
	Prefix string `json:"prefix,omitempty"`

	Family Family `json:"family"`
	// Also are families the live limiter may show as well, where the
	// product's versions differ (Envoy's timer-based and continuous
	// buckets).
	Also []Family `json:"also,omitempty"`
	// Limit and Window: a fixed window's quota; Align where windows start.
	Limit  int64         `json:"limit,omitempty"`
	Window time.Duration `json:"-"` // written as window_s
	Align  string        `json:"align,omitempty"`
	// Rate (requests per second) and Capacity: a bucket.
	Rate     float64 `json:"rate_per_s,omitempty"`
	Capacity int64   `json:"capacity,omitempty"`
	// Undelayed is, for LeakyBucketQueue, how many requests from idle are
	// served at once before queueing starts (nginx delay + 1).
	Undelayed int64 `json:"undelayed,omitempty"`
	// Key is the contract's key (global, ip, header:NAME) or KeyUnknown;
	// KeyExpr is what the config wrote.
	Key     string `json:"key"`
	KeyExpr string `json:"key_expr,omitempty"`
	// Status is the reject status the product answers with.
	Status int `json:"status,omitempty"`
	// DryRun: the limiter counts but never rejects (nginx
	// limit_req_dry_run on).
	DryRun bool `json:"dry_run,omitempty"`
	// Binding is set on the rule that rejects first, from idle, when
	// several cover one location (the smallest capacity, then rate).
	Binding bool `json:"binding,omitempty"`

	// RefillTokens per RefillEvery: how a bucket refills where the
	// product refills in steps (Envoy's tokens_per_fill per
	// fill_interval); zero elsewhere. Capacity is then the product's
	// (max_tokens), and the policy checks the bound Endpoint gives.
	RefillTokens int64         `json:"refill_tokens,omitempty"`
	RefillEvery  time.Duration `json:"-"` // written as refill_interval_s

	// Endpoint is the policy rule that checks this limit.
	Endpoint verify.Endpoint `json:"policy"`
	// Notes say how the config became the policy, one sentence each.
	Notes []string `json:"notes,omitempty"`

	// server is the nginx server block the rule is in (1, 2, …; 0 for
	// other formats): two servers may share a name.
	server int
}

// Covered reports whether the rule names one URL that a probe can use
// without help.
func (r *Rule) Covered() bool { return r.Path != "" }

// Describe is the config's limit in one line, in the product's terms
// (verify's Endpoint.String says the policy rule checking it), its numbers
// in the units display format, as Endpoint.String's are.
func (r *Rule) Describe() string {
	var b strings.Builder
	switch {
	case r.RefillTokens > 0:
		fmt.Fprintf(&b, "%s, capacity %d, refill %d every %s (%s)", r.Family, r.Capacity, r.RefillTokens, units.HumanDuration(r.RefillEvery), units.HumanRate(r.Rate))
		if q := r.Endpoint.Quota(); q != r.Capacity {
			fmt.Fprintf(&b, "; checked against %d: a fill may land inside a burst", q)
		}
	case r.Family == FixedWindow:
		fmt.Fprintf(&b, "%d per %s window", r.Limit, units.HumanDuration(r.Window))
		if r.Align != "" {
			fmt.Fprintf(&b, " (%s-aligned)", r.Align)
		}
	default:
		fmt.Fprintf(&b, "%s %s, capacity %d", r.Family, units.HumanRate(r.Rate), r.Capacity)
		if r.Family == LeakyBucketQueue {
			fmt.Fprintf(&b, ", %d served at once, the rest queued", r.Undelayed)
		}
	}
	fmt.Fprintf(&b, ", key %s", r.Key)
	return b.String()
}

// Import is what a configuration declares: its rules and what a static
// reading can already tell (Findings, from Lint).
type Import struct {
	Format Format `json:"format"`
	File   string `json:"file"`
	Rules  []Rule `json:"rules"`
	// Findings are the static findings (Lint), in source order.
	Findings []Finding `json:"findings"`
}

// Finding is a verify.Finding about a configuration, with the file and
// line it concerns. Static findings have no evidence of requests.
type Finding struct {
	verify.Finding
	Source Source
	// server is the nginx server block the finding is about (0: none);
	// zones are the nginx zones it is about.
	server int
	zones  []string
}

// Lint-only finding ids (the others are verify's IDConfigNotEnforced and
// IDConfigMismatch). placeholder-unset, and not-interpreted on a
// directive that holds a limit, are errors: a limit was not read. The
// others are warnings or notes about what a config cannot do as written.
const (
	IDPlaceholderUnset = "placeholder-unset" // a template's $NAME left where a number goes
	IDIncludeMissing   = "include-missing"   // an nginx include that cannot be read
	IDZoneUnused       = "zone-unused"       // an nginx zone no limit_req uses
	IDQueueingLatency  = "queueing-latency"  // burst without nodelay: excess is held, not rejected
	IDKeyBehindProxy   = "key-behind-proxy"  // the client address is the proxy's
	IDKeyUnknown       = "key-unknown"       // a key rlprobe cannot name
	IDNotInterpreted   = "not-interpreted"   // a construct the importer skipped
	IDLimitUntestable  = "limit-untestable"  // a prefix or regex location: no URL to probe
)

// LintIDs lists every id a lint finding may carry, most severe first.
var LintIDs = []string{
	verify.IDConfigNotEnforced, IDPlaceholderUnset, IDNotInterpreted, IDIncludeMissing, IDQueueingLatency,
	IDKeyBehindProxy, IDZoneUnused, IDKeyUnknown, IDLimitUntestable,
}

func finding(id string, sev verify.Severity, cert verify.Certainty, at Source, endpoint, msg, hint string) Finding {
	return Finding{Source: at, Finding: verify.Finding{
		ID: id, Severity: sev, Certainty: cert, Endpoint: endpoint,
		Message: at.String() + ": " + msg, Hint: hint,
	}}
}

// Fails reports whether the import holds a certain finding at or above
// failOn (the lint's exit 1).
func (im *Import) Fails(failOn verify.Severity) bool {
	for _, f := range im.Findings {
		if f.Certainty == verify.Certain && f.Severity.AtLeast(failOn) {
			return true
		}
	}
	return false
}

// errAt is the error of a configuration that cannot be read: a
// *problem.Error "limitconf" whose one problem names the file and line
// and says what is wrong ("limitconf: FILE:LINE: MESSAGE").
func errAt(file string, line int, format string, a ...any) error {
	return &problem.Error{What: "limitconf", Problems: []problem.Problem{{File: file, Line: line, Message: fmt.Sprintf(format, a...)}}}
}
