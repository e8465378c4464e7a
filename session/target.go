package session

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/record"
)

// Safety caps (contract.md): run sends at most 10,000 requests over 5
// minutes; check and infer 5,000 over 10 minutes; every command at most
// 1,000 requests per second.
const (
	RunMaxRequests   = 10_000
	RunMaxDuration   = 5 * time.Minute
	SuiteMaxRequests = 5_000
	SuiteMaxDuration = 10 * time.Minute
	// SuiteMaxRequestsCeiling bounds what Check raises its default cap
	// to for a large declared quota (the suite of 1,000 per 60 s plans
	// about 8,300 requests).
	SuiteMaxRequestsCeiling = 20_000
)

const (
	maxSourceIPs        = 4096
	maxClientValuesSize = 16 << 20
	// DefaultAgent is the agent name of a session whose Config is built
	// by hand without one (canned runs such as the demo); a Target
	// resolves to its Agent, else record.DefaultAgent() (host and pid).
	DefaultAgent = "a1"
)

// Target is a probing target as a user describes it: the target flags of
// contract.md, one field each, with files still to read. Resolve turns it
// into a Config. DefaultTarget gives the defaults of a command.
type Target struct {
	// Command is run, check or infer: it chooses the default caps and the
	// default record file name.
	Command string
	// URLs are replicas of one service.
	URLs []string

	Method            string   // -X
	AllowUnsafeMethod bool     // --allow-unsafe-method
	Headers           []string // -H values as given: "Name: value" or @FILE; $VAR expands
	Body              string   // --body: @FILE or a literal
	Timeout           time.Duration
	// TimeoutSet says Timeout was chosen (--timeout given): check keeps
	// it even for a bucket that may queue requests longer.
	TimeoutSet bool
	CACert     string
	ClientCert string
	ClientKey  string
	Insecure   bool
	H2C        bool
	// Clients is the number of client identities; ClientsSet says the user
	// chose it (else --client-values or --source-ips may imply it).
	Clients       int
	ClientsSet    bool
	ClientHeader  string
	ClientValues  string // a file, one value a line
	SourceIPs     string // a comma-separated list or CIDR
	SecretHeaders []string
	SecretQuery   []string
	// NoDefaultSecrets leaves the default secret query parameters
	// (record.DefaultSecretQuery) unredacted: only SecretQuery names are
	// (--no-default-secrets). Secret headers and URL passwords stay
	// redacted.
	NoDefaultSecrets bool
	// Seed is used when SeedSet; else a random one is drawn (and recorded).
	Seed    uint64
	SeedSet bool
	// Out is the record file; empty means ./rlprobe-<command>-<UTC time>.jsonl.
	Out         string
	Force       bool
	MaxRequests int
	// MaxRequestsSet says MaxRequests was chosen (--max-requests given):
	// check keeps it even below what its suite plans. Unset, a
	// MaxRequests equal to the command's default may be raised.
	MaxRequestsSet   bool
	MaxDuration      time.Duration
	MaxRate          float64
	AbortAfterErrors int // 0: never
	// Connections bounds the connections each client keeps to each URL
	// (probe.Options.Connections; --connections).
	Connections int
	// MaxHeaderBytes and MaxBodyBytes bound what is read of an answer
	// (probe.Options); 0 means the engine's default.
	MaxHeaderBytes int
	MaxBodyBytes   int64
	StartAt        string
	TimeRef        string
	// DryRun sends nothing: an existing Out is not refused.
	DryRun bool
	// Proxy is the forward proxy of every target (--proxy URL: http://,
	// socks5:// or socks5h://, with optional USER:PASS@). Empty means the
	// environment's HTTPS_PROXY (https targets) and HTTP_PROXY (http
	// targets), or their lower-case spellings. NO_PROXY (or no_proxy)
	// names the targets reached directly either way (probe.Proxy).
	Proxy string
	// Agent names this agent in the record (--agent); empty means
	// record.DefaultAgent() (host and pid). record.CheckAgent rules it.
	Agent string
}

// DefaultTarget returns the defaults of command ("run", "check" or
// "infer").
func DefaultTarget(command string) Target {
	t := Target{
		Command:          command,
		Method:           probe.DefaultMethod,
		Timeout:          probe.DefaultTimeout,
		Clients:          1,
		MaxRequests:      SuiteMaxRequests,
		MaxDuration:      SuiteMaxDuration,
		MaxRate:          probe.DefaultMaxRate,
		AbortAfterErrors: probe.DefaultAbortAfterErrors,
		Connections:      probe.DefaultConnections,
		MaxHeaderBytes:   probe.DefaultMaxHeaderBytes,
		MaxBodyBytes:     probe.MaxBodyDrain,
	}
	if command == "run" {
		t.MaxRequests, t.MaxDuration = RunMaxRequests, RunMaxDuration
	}
	return t
}

// safeMethods need no --allow-unsafe-method.
var safeMethods = []string{http.MethodGet, http.MethodHead, http.MethodOptions}

// resolver collects the problems of a Target.
type resolver struct {
	t     Target
	cfg   *Config
	probs []problem.Problem
	// fixed is the last problem that suggests fixes, and its fixes: the
	// error carries them when it is the only problem.
	fixed string
	fixes []Fix
}

func (r *resolver) bad(format string, a ...any) { r.probs = append(r.probs, msgf(format, a...)) }

// suggest adds the problem msg, which fixes (each alone) would solve.
func (r *resolver) suggest(msg string, fixes ...Fix) {
	r.probs = append(r.probs, problem.Problem{Message: msg + "; " + Suggestion(fixes...)})
	r.fixed, r.fixes = msg, fixes
}

// Resolve validates t, reads the files it names and returns the Config of
// a session at now (getenv expands $VAR in headers). Every problem is
// reported at once, as a Usage error.
func (t Target) Resolve(now time.Time, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	r := &resolver{t: t, cfg: &Config{Command: t.Command}}
	r.secretsAndURLs()
	r.request(getenv)
	r.transport()
	r.clients()
	r.proxy(getenv)
	r.caps()
	r.startAndOutput(now)
	if len(r.probs) == 1 && r.fixes != nil {
		return nil, Suggest(Usage, r.fixed, r.fixes...)
	}
	if len(r.probs) > 0 {
		return nil, problems(r.probs)
	}
	return r.cfg, nil
}

// secretsAndURLs comes first: messages about the targets must not show
// their secrets.
func (r *resolver) secretsAndURLs() {
	t, p := r.t, &r.cfg.Probe
	for _, n := range splitAll(t.SecretHeaders) {
		if !httpguts.ValidHeaderFieldName(n) {
			r.bad("--secret-header %q is not a valid header name", n)
		}
	}
	p.Redactor = t.redactor()
	if len(t.URLs) == 0 {
		r.bad("give at least one target URL")
	}
	for _, u := range t.URLs {
		if err := checkURL(u, p.Redactor.URL(u)); err != nil {
			r.bad("%v", err)
		} else if t.H2C && strings.HasPrefix(strings.ToLower(u), "https:") {
			r.bad("--h2c is for http:// targets; https negotiates HTTP/2 by itself (%s)", p.Redactor.URL(u))
		}
	}
	p.URLs = slices.Clone(t.URLs)
	p.Captured = headers.Captured
	p.Agent = t.Agent
	if p.Agent == "" {
		p.Agent = record.DefaultAgent()
	} else if err := record.CheckAgent(t.Agent); err != nil {
		r.probs = append(r.probs, problem.Under("--agent", err)...)
	}
}

// request resolves the method, body and headers.
func (r *resolver) request(getenv func(string) string) {
	t, p := r.t, &r.cfg.Probe
	if !httpguts.ValidHeaderFieldName(t.Method) { // a method is a token
		r.bad("-X %q is not a valid method", t.Method)
	} else if !slices.Contains(safeMethods, t.Method) && !t.AllowUnsafeMethod {
		r.suggest(fmt.Sprintf("-X %s may change state on the target (if you mean it to)", t.Method), Fix{Flag: "--allow-unsafe-method"})
	}
	p.Method = t.Method
	if t.Body != "" {
		if name, ok := strings.CutPrefix(t.Body, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				r.bad("--body: %v", err)
			}
			p.Body = b
		} else {
			p.Body = []byte(t.Body)
		}
	}
	h, hprobs := ParseHeaders(t.Headers, getenv)
	r.probs = append(r.probs, hprobs...)
	p.Header = h
}

func (r *resolver) transport() {
	t, p := r.t, &r.cfg.Probe
	if t.Timeout <= 0 {
		r.bad("--timeout must be positive")
	}
	p.Timeout = t.Timeout
	r.cfg.TimeoutDefault = !t.TimeoutSet && t.Timeout == probe.DefaultTimeout
	p.H2C = t.H2C
	tlsConf, tprobs := t.tlsConfig()
	r.probs = append(r.probs, tprobs...)
	p.TLSConfig = tlsConf
}

// clients resolves the client identities: their number, header and values,
// and source addresses.
func (r *resolver) clients() {
	t, c, p := r.t, r.cfg, &r.cfg.Probe
	c.Clients, c.ClientsSet = t.Clients, t.ClientsSet
	if t.Clients < 1 {
		r.bad("--clients must be at least 1, not %d", t.Clients)
	}
	if t.ClientHeader != "" && !httpguts.ValidHeaderFieldName(t.ClientHeader) {
		r.bad("--client-header %q is not a valid header name", t.ClientHeader)
	}
	p.ClientHeader = t.ClientHeader
	if t.ClientValues != "" {
		if t.ClientHeader == "" {
			r.bad("--client-values needs --client-header NAME (the header that carries them)")
		}
		vals, err := readClientValues(t.ClientValues)
		if err != nil {
			r.bad("--client-values: %v", err)
		}
		p.ClientValues = vals
		if !t.ClientsSet && len(vals) > 0 {
			c.Clients = len(vals)
		} else if len(vals) > 0 && t.Clients > len(vals) {
			r.bad("--clients %d needs as many --client-values, but %s has %d", t.Clients, t.ClientValues, len(vals))
		}
	}
	if t.SourceIPs != "" {
		ips, err := ParseSourceIPs(t.SourceIPs)
		if err != nil {
			r.bad("--source-ips: %v", err)
		}
		p.SourceIPs = ips
		if !t.ClientsSet && t.ClientValues == "" && len(ips) > 0 {
			c.Clients = len(ips)
		}
	}
	c.ClientsImplied = !t.ClientsSet && (t.ClientValues != "" || t.SourceIPs != "")
}

// proxy resolves the forward proxy: --proxy, else the environment; a
// proxy URL that cannot be used, or --source-ips through a proxy, is a
// problem.
func (r *resolver) proxy(getenv func(string) string) {
	t, p := r.t, &r.cfg.Probe
	env := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return getenv(strings.ToLower(name))
	}
	px := probe.Proxy{HTTP: t.Proxy, HTTPS: t.Proxy, NoProxy: env("NO_PROXY")}
	from := "--proxy"
	if t.Proxy == "" {
		px.HTTP, px.HTTPS = env("HTTP_PROXY"), env("HTTPS_PROXY")
		from = "HTTP_PROXY/HTTPS_PROXY"
	}
	p.Proxy = px
	var proxied []string
	for _, u := range t.URLs {
		via, err := px.For(u)
		if err != nil {
			r.bad("%s: %s", from, err)
			return
		}
		if via != "" {
			proxied = append(proxied, p.Redactor.URL(u))
		}
	}
	if len(proxied) > 0 && len(p.SourceIPs) > 0 {
		r.bad("--source-ips cannot be kept through a proxy: the target sees the proxy's address, not the clients' (%s goes through %s); "+
			"name the target in NO_PROXY, or give identities with --client-header instead", strings.Join(proxied, ", "), from)
	}
}

// ProxyWarning is the warning New gives when some target of c goes
// through a proxy ("" when none does): what a proxy hides from a probe.
func (c *Config) ProxyWarning() string {
	px := c.Proxies()
	if len(px) == 0 {
		return ""
	}
	return "probing through the proxy " + strings.Join(px, ", ") + ": race releases lose their timing (the proxy forwards each request on its own), " +
		"and the target sees the proxy's address, so per-address keys (--key ip) cannot be told apart"
}

// Proxies returns the proxy URLs (secrets redacted) through which some
// target of c goes, in target order, without repeats; empty when every
// target is reached directly.
func (c *Config) Proxies() []string {
	red := c.Probe.Redactor
	if red == nil {
		red = record.NewRedactor(nil, nil)
	}
	var out []string
	for _, u := range c.Probe.URLs {
		if via, err := c.Probe.Proxy.For(u); err == nil && via != "" && !slices.Contains(out, red.URL(via)) {
			out = append(out, red.URL(via))
		}
	}
	return out
}

func (r *resolver) caps() {
	t, c, p := r.t, r.cfg, &r.cfg.Probe
	if t.MaxRequests < 1 {
		r.bad("--max-requests must be at least 1")
	}
	if t.MaxDuration <= 0 {
		r.bad("--max-duration must be positive")
	}
	if !(t.MaxRate > 0) {
		r.bad("--max-rate must be positive")
	}
	c.Caps = Caps{MaxRequests: t.MaxRequests, MaxDuration: t.MaxDuration, MaxRate: t.MaxRate,
		MaxRequestsDefault: !t.MaxRequestsSet && t.MaxRequests == DefaultTarget(t.Command).MaxRequests}
	p.MaxRate = t.MaxRate
	p.MaxHeaderBytes, p.MaxBodyBytes = t.MaxHeaderBytes, t.MaxBodyBytes
	if t.Connections < 1 {
		r.bad("--connections must be at least 1")
	}
	p.Connections = t.Connections
	switch {
	case t.AbortAfterErrors < 0:
		r.bad("--abort-after-errors must be 0 (never) or more")
	case t.AbortAfterErrors == 0:
		p.AbortAfterErrors = -1
	default:
		p.AbortAfterErrors = t.AbortAfterErrors
	}
}

func (r *resolver) startAndOutput(now time.Time) {
	t, c := r.t, r.cfg
	c.Seed = t.Seed
	if !t.SeedSet {
		c.Seed = rand.Uint64()
	}
	if t.StartAt != "" {
		at, err := patterns.ParseTime(t.StartAt, now)
		switch {
		case err != nil:
			r.probs = append(r.probs, problem.Under("--start-at", err)...)
		case !at.After(now):
			r.bad("--start-at %s is in the past", at.Format(time.RFC3339))
		default:
			c.StartAt = at
		}
	}
	if t.TimeRef != "" {
		if err := checkURL(t.TimeRef, t.TimeRef); err != nil {
			r.bad("--time-ref: %v", err)
		}
	}
	c.TimeRef = t.TimeRef
	c.Out, c.Force = t.Out, t.Force
	if c.Out == "" {
		c.Out = "rlprobe-" + t.Command + "-" + now.UTC().Format("20060102T150405.000Z") + ".jsonl"
		c.OutDefault = true
	}
	if !t.Force && !t.DryRun && !c.OutDefault {
		if _, err := os.Stat(c.Out); err == nil {
			r.suggest(fmt.Sprintf("--out %s exists: choose another file, or overwrite it", c.Out), Fix{Flag: "--force"})
		}
	}
}

// checkURL accepts absolute http and https URLs with a host; shown is s
// with its secrets redacted, for the messages.
func checkURL(s, shown string) error {
	if !strings.Contains(s, "://") {
		return fmt.Errorf("target %q has no scheme: write http://%s or https://%s", shown, shown, shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("target %q is not a URL", shown)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("target %q: the scheme must be http or https, not %s", shown, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("target %q has no host", shown)
	}
	return nil
}

// IsLoopbackURL reports whether u's host is localhost or a loopback
// address: a target on this machine.
func IsLoopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Redact returns u with the secrets of t (and the default ones) redacted.
func (t Target) Redact(u string) string {
	return t.redactor().URL(u)
}

// RemoteURLs returns the target URLs that are not on this machine
// (IsLoopbackURL), redacted: the ones a front end asks about before
// probing.
func (t Target) RemoteURLs() []string {
	var remote []string
	for _, u := range t.URLs {
		if !IsLoopbackURL(u) {
			remote = append(remote, t.Redact(u))
		}
	}
	return remote
}

// redactor is the target's redactor: the default secrets and the
// --secret-header and --secret-query names.
func (t Target) redactor() *record.Redactor {
	r := record.NewRedactor(splitAll(t.SecretHeaders), splitAll(t.SecretQuery))
	if t.NoDefaultSecrets {
		r = r.WithoutDefaultQuery()
	}
	return r
}
