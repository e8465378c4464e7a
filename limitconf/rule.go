package limitconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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

	// Endpoint is the policy rule that checks this limit.
	Endpoint verify.Endpoint `json:"policy"`
	// Notes say how the config became the policy, one sentence each.
	Notes []string `json:"notes,omitempty"`
}

// Covered reports whether the rule names one URL that a probe can use
// without help.
func (r *Rule) Covered() bool { return r.Path != "" }

// Describe is the config's limit in one line, in the product's terms
// (verify's Endpoint.String says the policy rule checking it), its numbers
// in the units display format, as Endpoint.String's are.
func (r *Rule) Describe() string {
	var b strings.Builder
	switch r.Family {
	case FixedWindow:
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
}

// Lint-only finding ids (the others are verify's IDConfigNotEnforced and
// IDConfigMismatch). They are warnings or notes about what a config
// cannot do as written; none is an error.
const (
	IDZoneUnused      = "zone-unused"      // an nginx zone no limit_req uses
	IDQueueingLatency = "queueing-latency" // burst without nodelay: excess is held, not rejected
	IDKeyBehindProxy  = "key-behind-proxy" // the client address is the proxy's
	IDKeyUnknown      = "key-unknown"      // a key rlprobe cannot name
	IDNotInterpreted  = "not-interpreted"  // a construct the importer skipped
	IDLimitUntestable = "limit-untestable" // a prefix or regex location: no URL to probe
)

// LintIDs lists every id a lint finding may carry, most severe first.
var LintIDs = []string{
	verify.IDConfigNotEnforced, IDQueueingLatency, IDKeyBehindProxy, IDZoneUnused,
	IDKeyUnknown, IDNotInterpreted, IDLimitUntestable,
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

// Error is a configuration that cannot be read: its file and line and
// what is wrong.
type Error struct {
	Source Source
	Msg    string
}

func (e *Error) Error() string { return "limitconf: " + e.Source.String() + ": " + e.Msg }

func errAt(file string, line int, format string, a ...any) error {
	return &Error{Source: Source{File: file, Line: line}, Msg: fmt.Sprintf(format, a...)}
}

// ErrNoLimits is returned (wrapped) by Parse when a config declares no
// limit at all.
var ErrNoLimits = errors.New("limitconf: the configuration declares no rate limit")

// Options select what an import keeps.
type Options struct {
	// Format is the config's format; "" detects it (DetectFormat).
	Format Format
	// Server keeps the rules of one nginx server_name (or Envoy virtual
	// host, Traefik router, Kong service or route name); "" keeps all.
	Server string
	// Location keeps the rules whose location or path is this; "" all.
	Location string
	// ReadFile reads an nginx include; nil means includes are reported as
	// not interpreted.
	ReadFile func(name string) ([]byte, error)
	// Glob expands an nginx include pattern; nil treats it as one name.
	Glob func(pattern string) ([]string, error)
}

// Parse reads a configuration (data, named name in messages) and returns
// what it declares, with the static findings. A malformed config is an
// *Error with the file and line; Parse never panics.
func Parse(data []byte, name string, o Options) (im *Import, err error) {
	defer func() {
		if p := recover(); p != nil {
			im, err = nil, errAt(name, 0, "internal error reading the configuration (please report it): %v", p)
		}
	}()
	return parse(data, name, o)
}

// ParseFile reads and parses the configuration file at path, following
// nginx includes from disk unless o says how to read them.
func ParseFile(path string, o Options) (*Import, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("limitconf: %w", err)
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.Glob == nil {
		o.Glob = filepath.Glob
	}
	return Parse(data, path, o)
}

// parse is Parse without the recovery (fuzz targets call it, so that a
// panic is found rather than hidden).
func parse(data []byte, name string, o Options) (im *Import, err error) {
	f := o.Format
	if f == "" {
		if f, err = DetectFormat(name, data); err != nil {
			return nil, err
		}
	}
	switch f {
	case Nginx:
		im, err = parseNginx(data, name, o)
	case Envoy:
		im, err = parseEnvoy(data, name)
	case Traefik:
		im, err = parseTraefik(data, name)
	case Kong:
		im, err = parseKong(data, name)
	default:
		return nil, fmt.Errorf("limitconf: unknown format %q", f)
	}
	if err != nil {
		return nil, err
	}
	im.Format, im.File = f, name
	im.filter(o)
	markBinding(im.Rules)
	seen := map[[2]string]bool{}
	for i := range im.Rules {
		r := &im.Rules[i]
		if k := [2]string{r.Server, r.Location}; !r.Covered() && !seen[k] {
			seen[k] = true
			im.add(finding(IDLimitUntestable, verify.SeverityInfo, verify.Certain, r.Source, r.Location,
				fmt.Sprintf("%s is not one URL: check needs a URL for it", r.Location),
				"give one with --location-url PATTERN=URL, e.g. "+exampleURL(r)))
		}
	}
	sortFindings(im.Findings)
	if len(im.Rules) == 0 {
		if o.Server != "" || o.Location != "" {
			return nil, fmt.Errorf("%w matching --server %q --location %q", ErrNoLimits, o.Server, o.Location)
		}
		return nil, fmt.Errorf("%w (%s)", ErrNoLimits, name)
	}
	return im, nil
}

// urlPath returns p when it is a URL path a probe can request (it starts
// with "/" and holds no space or control character), else "".
func urlPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return ""
		}
	}
	return p
}

func exampleURL(r *Rule) string {
	p := r.Prefix
	if p == "" {
		p = "/some/path"
	}
	return fmt.Sprintf("'%s=%s'", strings.TrimSpace(r.Location), p)
}

func (im *Import) filter(o Options) {
	if o.Server == "" && o.Location == "" {
		return
	}
	keep := im.Rules[:0]
	for _, r := range im.Rules {
		if o.Server != "" && !matchServer(r.Server, o.Server) {
			continue
		}
		if o.Location != "" && !matchLocation(r, o.Location) {
			continue
		}
		keep = append(keep, r)
	}
	im.Rules = keep
	locs := map[string]bool{}
	for _, r := range keep {
		locs[r.Location] = true
	}
	fs := im.Findings[:0]
	for _, f := range im.Findings {
		if f.Endpoint == "" || locs[f.Endpoint] {
			fs = append(fs, f)
		}
	}
	im.Findings = fs
}

func matchServer(have, want string) bool {
	for _, n := range strings.Fields(have) {
		if n == want {
			return true
		}
	}
	return have == want
}

func matchLocation(r Rule, want string) bool {
	loc := strings.TrimSpace(r.Location)
	if loc == want || r.Path == want {
		return true
	}
	f := strings.Fields(loc)
	return len(f) > 0 && f[len(f)-1] == want
}

// markBinding marks, among rules of one server and location, the one that
// rejects first from idle.
func markBinding(rs []Rule) {
	type group struct{ server, loc string }
	best := map[group]int{}
	count := map[group]int{}
	for i := range rs {
		g := group{rs[i].Server, rs[i].Location}
		count[g]++
		j, ok := best[g]
		if !ok || tighter(&rs[i], &rs[j]) {
			best[g] = i
		}
	}
	for g, i := range best {
		if count[g] < 2 {
			continue
		}
		rs[i].Binding = true
		rs[i].Notes = append(rs[i].Notes, fmt.Sprintf("binding: of the %d limits on %s, this one rejects first from idle", count[g], g.loc))
	}
}

func tighter(a, b *Rule) bool {
	qa, qb := a.Endpoint.Quota(), b.Endpoint.Quota()
	if qa != qb {
		return qa < qb
	}
	return sustained(a) < sustained(b)
}

// sustained is a rule's long-run rate in requests per second.
func sustained(r *Rule) float64 {
	if r.Endpoint.IsBucket() {
		return r.Endpoint.Rate
	}
	if r.Endpoint.Window <= 0 {
		return 0
	}
	return float64(r.Endpoint.Limit) / r.Endpoint.Window.Seconds()
}

// DetectFormat guesses a config's format from its name and content.
func DetectFormat(name string, data []byte) (Format, error) {
	s := string(data)
	switch ext := strings.ToLower(filepath.Ext(name)); {
	case ext == ".conf" || strings.Contains(s, "limit_req"):
		return Nginx, nil
	case ext == ".toml":
		return Traefik, nil
	case strings.Contains(s, "local_ratelimit") || strings.Contains(s, "token_bucket"):
		return Envoy, nil
	case strings.Contains(s, "_format_version") || strings.Contains(s, "rate-limiting"):
		return Kong, nil
	case strings.Contains(s, "rateLimit") || strings.Contains(s, "ratelimit"):
		return Traefik, nil
	}
	return "", fmt.Errorf("limitconf: cannot tell the format of %s: give --format nginx, envoy, traefik or kong", name)
}
