package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/http/httpguts"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Safety caps (contract.md): run sends at most 10,000 requests over 5
// minutes; check and infer 5,000 over 10 minutes; every command at most
// 1,000 requests per second.
const (
	runMaxRequests      = 10_000
	runMaxDuration      = 5 * time.Minute
	suiteMaxRequests    = 5_000
	suiteMaxDuration    = 10 * time.Minute
	defaultMaxRate      = probe.DefaultMaxRate
	defaultAbortErrors  = probe.DefaultAbortAfterErrors
	maxSourceIPs        = 4096
	maxClientValuesSize = 16 << 20
	// startLead is how long after "now" the first send of a run is due when
	// no --start-at is given: time to pre-dial connections.
	startLead = 200 * time.Millisecond
	// otherShare is the share of "other" answers (neither accepted nor
	// rejected) above which a run aborts: one in twenty.
	otherShareDen = 20
	// otherMin is how many other answers it takes before the share can
	// abort a run in progress, so one early 502 does not.
	otherMin = 5
)

// targetOptions are the target flags shared by run, check and infer
// (contract.md "Target flags"). Fill it with newTargetOptions and
// addTargetFlags, then resolve it into a target.
type targetOptions struct {
	command string // run, check or infer: default caps and --out name

	method        string
	allowUnsafe   bool
	headers       []string // -H values as given
	body          string   // --body: @FILE or a literal
	timeout       time.Duration
	cacert        string
	clientCert    string
	clientKey     string
	insecure      bool
	h2c           bool
	clients       int
	clientHeader  string
	clientValues  string // file
	sourceIPs     string
	secretHeaders []string
	secretQuery   []string
	seed          uint64
	out           string
	force         bool
	maxRequests   int
	maxDuration   time.Duration
	maxRate       float64
	abortAfter    int
	maxHeader     int
	maxBody       int64
	startAt       string
	timeRef       string
	dryRun        bool
	yes           bool

	// changed records which flags the user set (filled by resolve).
	changed func(name string) bool
}

// newTargetOptions returns the defaults of command ("run", "check" or
// "infer").
func newTargetOptions(command string) *targetOptions {
	o := &targetOptions{
		command:     command,
		method:      probe.DefaultMethod,
		timeout:     probe.DefaultTimeout,
		clients:     1,
		maxRequests: suiteMaxRequests,
		maxDuration: suiteMaxDuration,
		maxRate:     defaultMaxRate,
		abortAfter:  defaultAbortErrors,
		maxHeader:   probe.DefaultMaxHeaderBytes,
		maxBody:     probe.MaxBodyDrain,
	}
	if command == "run" {
		o.maxRequests, o.maxDuration = runMaxRequests, runMaxDuration
	}
	return o
}

// addTargetFlags adds every target flag of contract.md to cmd, with o's
// current values as defaults.
func addTargetFlags(cmd *cobra.Command, o *targetOptions) {
	fl := cmd.Flags()
	fl.StringVarP(&o.method, "request", "X", o.method, "request `METHOD`; other than GET, HEAD and OPTIONS needs --allow-unsafe-method")
	fl.BoolVar(&o.allowUnsafe, "allow-unsafe-method", false, "allow a method that may change state on the target (POST, PUT, DELETE…)")
	fl.StringArrayVarP(&o.headers, "header", "H", nil, "request header \"Name: value\" (repeatable); @FILE reads one header a line; $VAR expands from the environment")
	fl.StringVar(&o.body, "body", "", "request body: @FILE reads it from a file")
	fl.Var(DurationValue(&o.timeout), "timeout", "per-request timeout")
	fl.StringVar(&o.cacert, "cacert", "", "PEM `FILE` of CA certificates to trust for https targets")
	fl.StringVar(&o.clientCert, "client-cert", "", "PEM `FILE` of the client certificate (with --client-key)")
	fl.StringVar(&o.clientKey, "client-key", "", "PEM `FILE` of the client key (with --client-cert)")
	fl.BoolVar(&o.insecure, "insecure", false, "do not verify the target's TLS certificate")
	fl.BoolVar(&o.h2c, "h2c", false, "speak HTTP/2 over cleartext (prior knowledge) to http targets")
	fl.IntVar(&o.clients, "clients", o.clients, "number of client identities; each plays the whole pattern")
	fl.StringVar(&o.clientHeader, "client-header", "", "request header `NAME` carrying the client identity (values k1…kN, or --client-values)")
	fl.StringVar(&o.clientValues, "client-values", "", "`FILE` of client identity values, one a line (for --client-header)")
	fl.StringVar(&o.sourceIPs, "source-ips", "", "source addresses of the clients: a comma-separated `LIST` or a CIDR (127.0.0.2,127.0.0.3 or 127.0.0.0/29)")
	fl.StringArrayVar(&o.secretHeaders, "secret-header", nil, "header `NAME` whose values are never written (repeatable; Authorization, cookies and API keys always are)")
	fl.StringArrayVar(&o.secretQuery, "secret-query", nil, "query parameter `NAME` whose values are never written (repeatable)")
	fl.Uint64Var(&o.seed, "seed", 0, "seed of every randomised choice (default: random, recorded in the file)")
	fl.StringVar(&o.out, "out", "", "record `FILE` (default ./rlprobe-"+o.command+"-<UTC time>.jsonl); never overwritten without --force")
	fl.BoolVar(&o.force, "force", false, "overwrite the --out file if it exists")
	fl.IntVar(&o.maxRequests, "max-requests", o.maxRequests, "safety cap: refuse a plan of more requests")
	fl.Var(DurationValue(&o.maxDuration), "max-duration", "safety cap: refuse a plan that lasts longer")
	fl.Var(rateDefault(&o.maxRate), "max-rate", "safety cap: never send faster than this rate")
	fl.IntVar(&o.abortAfter, "abort-after-errors", o.abortAfter, "abort after this many consecutive transport errors (0: never)")
	fl.IntVar(&o.maxHeader, "max-header-bytes", o.maxHeader, "largest response head read; a larger one is an error (header-too-large) and its connection is closed")
	fl.Int64Var(&o.maxBody, "max-body-bytes", o.maxBody, "response body bytes read; beyond them the answer still counts and its connection is closed")
	fl.StringVar(&o.startAt, "start-at", "", "send the first request at `TIME` (RFC 3339 or a time of day such as 12:00:05)")
	fl.StringVar(&o.timeRef, "time-ref", "", "measure this agent's clock offset against `URL` (its Date header, or the X-Rlprobe-Arrival echo of rlprobe serve --echo-arrival) and record it in the record header; name an endpoint outside the limit, since the measurement sends about a dozen requests")
	fl.BoolVar(&o.dryRun, "dry-run", false, "print the plan and its duration, send nothing")
	fl.BoolVar(&o.yes, "yes", false, "do not ask for confirmation before probing a target that is not on this machine")
	o.changed = fl.Changed
}

// startAtSuiteUsage is the --start-at help of check and infer, whose first
// request is the preflight.
const startAtSuiteUsage = "send the first request, the preflight, at `TIME` (RFC 3339 or a time of day such as 12:00:05), the probes right after it: agents given the same TIME start together"

// rateDefault is a RateValue whose String shows the default in rate syntax.
func rateDefault(r *float64) *rateValue {
	v := RateValue(r)
	v.raw = units.FormatRate(*r)
	return v
}

// target is what a command needs to send to the targets, resolved from
// targetOptions: engine options, caps, the redactor, the record file path.
type target struct {
	o        *targetOptions
	urls     []string // as given
	probe    probe.Options
	redactor *record.Redactor
	seed     uint64
	startAt  time.Time // zero: start when ready
	outPath  string
	clients  int // number of client identities (explicit or implied)
	// clientsSet says whether the user chose the number of clients
	// (--clients, or implied by --client-values / --source-ips).
	clientsSet bool
}

// safeMethods need no --allow-unsafe-method.
var safeMethods = []string{http.MethodGet, http.MethodHead, http.MethodOptions}

// resolve validates o against the target URLs and reads the files it
// names. Every problem is reported at once as a usage error (exit 2).
func (o *targetOptions) resolve(f *Factory, urls []string, now time.Time) (*target, error) {
	changed := o.changed
	if changed == nil {
		changed = func(string) bool { return false }
	}
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	t := &target{o: o, urls: urls}
	p := &t.probe

	// Secrets first: messages about the targets must not show them.
	for _, n := range splitAll(o.secretHeaders) {
		if !httpguts.ValidHeaderFieldName(n) {
			bad("--secret-header %q is not a valid header name", n)
		}
	}
	t.redactor = record.NewRedactor(splitAll(o.secretHeaders), splitAll(o.secretQuery))

	// Targets.
	if len(urls) == 0 {
		bad("give at least one target URL")
	}
	for _, u := range urls {
		if err := checkURL(u, t.redactor.URL(u)); err != nil {
			bad("%v", err)
		} else if o.h2c && strings.HasPrefix(strings.ToLower(u), "https:") {
			bad("--h2c is for http:// targets; https negotiates HTTP/2 by itself (%s)", t.redactor.URL(u))
		}
	}
	p.URLs = slices.Clone(urls)

	// Method and body.
	method := o.method
	if !httpguts.ValidHeaderFieldName(method) { // a method is a token
		bad("-X %q is not a valid method", method)
	} else if !slices.Contains(safeMethods, method) && !o.allowUnsafe {
		bad("-X %s may change state on the target: add --allow-unsafe-method if you mean it", method)
	}
	p.Method = method
	if o.body != "" {
		if name, ok := strings.CutPrefix(o.body, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				bad("--body: %v", err)
			}
			p.Body = b
		} else {
			p.Body = []byte(o.body)
		}
	}

	// Headers.
	h, hprobs := parseHeaders(o.headers, f.Env)
	probs = append(probs, hprobs...)
	p.Header = h

	// Transport.
	if o.timeout <= 0 {
		bad("--timeout must be positive")
	}
	p.Timeout = o.timeout
	p.H2C = o.h2c
	tlsConf, tprobs := o.tlsConfig()
	probs = append(probs, tprobs...)
	p.TLSConfig = tlsConf

	// Clients.
	t.clients, t.clientsSet = o.clients, changed("clients")
	if o.clients < 1 {
		bad("--clients must be at least 1, not %d", o.clients)
	}
	if o.clientHeader != "" && !httpguts.ValidHeaderFieldName(o.clientHeader) {
		bad("--client-header %q is not a valid header name", o.clientHeader)
	}
	p.ClientHeader = o.clientHeader
	if o.clientValues != "" {
		if o.clientHeader == "" {
			bad("--client-values needs --client-header NAME (the header that carries them)")
		}
		vals, err := readClientValues(o.clientValues)
		if err != nil {
			bad("--client-values: %v", err)
		}
		p.ClientValues = vals
		if !t.clientsSet && len(vals) > 0 {
			t.clients = len(vals)
		} else if len(vals) > 0 && o.clients > len(vals) {
			bad("--clients %d needs as many --client-values, but %s has %d", o.clients, o.clientValues, len(vals))
		}
	}
	if o.sourceIPs != "" {
		ips, err := parseSourceIPs(o.sourceIPs)
		if err != nil {
			bad("--source-ips: %v", err)
		}
		p.SourceIPs = ips
		if !t.clientsSet && o.clientValues == "" && len(ips) > 0 {
			t.clients = len(ips)
		}
	}
	t.clientsSet = t.clientsSet || o.clientValues != "" || o.sourceIPs != ""

	p.Redactor = t.redactor
	p.Captured = headers.Captured
	p.Agent = defaultAgent

	// Caps and guards.
	if o.maxRequests < 1 {
		bad("--max-requests must be at least 1")
	}
	if o.maxDuration <= 0 {
		bad("--max-duration must be positive")
	}
	if !(o.maxRate > 0) {
		bad("--max-rate must be positive")
	}
	p.MaxRate = o.maxRate
	p.MaxHeaderBytes, p.MaxBodyBytes = o.maxHeader, o.maxBody
	switch {
	case o.abortAfter < 0:
		bad("--abort-after-errors must be 0 (never) or more")
	case o.abortAfter == 0:
		p.AbortAfterErrors = -1
	default:
		p.AbortAfterErrors = o.abortAfter
	}

	// Seed, start, output.
	t.seed = o.seed
	if !changed("seed") {
		t.seed = rand.Uint64()
	}
	if o.startAt != "" {
		at, err := patterns.ParseTime(o.startAt, now)
		switch {
		case err != nil:
			bad("--start-at: %s", strings.TrimPrefix(err.Error(), "patterns: "))
		case !at.After(now):
			bad("--start-at %s is in the past", at.Format(time.RFC3339))
		default:
			t.startAt = at
		}
	}
	if o.timeRef != "" {
		if err := checkURL(o.timeRef, o.timeRef); err != nil {
			bad("--time-ref: %v", err)
		}
	}
	t.outPath = o.out
	if t.outPath == "" {
		t.outPath = "rlprobe-" + o.command + "-" + now.UTC().Format("20060102T150405.000Z") + ".jsonl"
	}
	if !o.force && !o.dryRun {
		if _, err := os.Stat(t.outPath); err == nil {
			bad("--out %s exists: choose another file or add --force to overwrite it", t.outPath)
		}
	}

	if len(probs) > 0 {
		return nil, usageProblems(probs)
	}
	return t, nil
}

// defaultAgent is the agent name of a single-agent run.
const defaultAgent = "a1"

// usageProblems is a usage error listing every problem.
func usageProblems(probs []string) error {
	if len(probs) == 1 {
		return Usagef("%s", probs[0])
	}
	return Usagef("%d problems:\n  %s", len(probs), strings.Join(probs, "\n  "))
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

// parseHeaders reads -H values: "Name: value", or @FILE with one such line
// a line (blank lines and lines starting with # skipped). $VAR and ${VAR}
// expand from getenv ($$ is a dollar); an unset variable is a problem.
func parseHeaders(args []string, getenv func(string) string) (http.Header, []string) {
	h := http.Header{}
	var probs []string
	add := func(where, line string) {
		line, missing := expandEnv(line, getenv)
		for _, v := range missing {
			probs = append(probs, fmt.Sprintf("%s: $%s is not set in the environment", where, v))
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		value = strings.TrimSpace(value)
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s: write a header as \"Name: value\"", where))
		case !httpguts.ValidHeaderFieldName(name):
			probs = append(probs, fmt.Sprintf("%s: %q is not a valid header name", where, name))
		case !httpguts.ValidHeaderFieldValue(value):
			probs = append(probs, fmt.Sprintf("%s: the value of %s has characters a header cannot carry", where, name))
		default:
			h.Add(name, value)
		}
	}
	for _, a := range args {
		file, isFile := strings.CutPrefix(a, "@")
		if !isFile {
			add("-H", a)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			probs = append(probs, fmt.Sprintf("-H @%s: %v", file, err))
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimRight(line, "\r")
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			add(fmt.Sprintf("-H @%s:%d", file, i+1), line)
		}
	}
	return h, probs
}

// expandEnv expands $VAR and ${VAR} with getenv, $$ to $, and returns the
// names that were unset (or empty).
func expandEnv(s string, getenv func(string) string) (string, []string) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		if name == "$" {
			return "$"
		}
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	})
	return out, missing
}

// tlsConfig builds the client TLS configuration, nil when no TLS flag is
// set (the engine's defaults).
func (o *targetOptions) tlsConfig() (*tls.Config, []string) {
	if o.cacert == "" && o.clientCert == "" && o.clientKey == "" && !o.insecure {
		return nil, nil
	}
	var probs []string
	c := &tls.Config{InsecureSkipVerify: o.insecure} //nolint:gosec // the user asked with --insecure
	if o.cacert != "" {
		pem, err := os.ReadFile(o.cacert)
		switch {
		case err != nil:
			probs = append(probs, fmt.Sprintf("--cacert: %v", err))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				probs = append(probs, fmt.Sprintf("--cacert %s holds no PEM certificate", o.cacert))
			}
			c.RootCAs = pool
		}
	}
	switch {
	case (o.clientCert == "") != (o.clientKey == ""):
		probs = append(probs, "--client-cert and --client-key go together")
	case o.clientCert != "":
		pair, err := tls.LoadX509KeyPair(o.clientCert, o.clientKey)
		if err != nil {
			probs = append(probs, fmt.Sprintf("--client-cert/--client-key: %v", err))
		} else {
			c.Certificates = []tls.Certificate{pair}
		}
	}
	return c, probs
}

// readClientValues reads one identity value a line, skipping blank lines.
func readClientValues(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var vals []string
	sc := bufio.NewScanner(io.LimitReader(f, maxClientValuesSize))
	for n := 1; sc.Scan(); n++ {
		v := strings.TrimSpace(sc.Text())
		if v == "" {
			continue
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("%s:%d: not a valid header value", path, n)
		}
		vals = append(vals, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("%s holds no value", path)
	}
	return vals, nil
}

// parseSourceIPs reads a comma-separated list of addresses and CIDR
// prefixes. A prefix stands for its addresses, except an IPv4 prefix's
// network and broadcast addresses when it is /30 or wider.
func parseSourceIPs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			pfx, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix", item)
			}
			pfx = pfx.Masked()
			bits := pfx.Addr().BitLen() - pfx.Bits()
			if bits > 12 {
				return nil, fmt.Errorf("%s holds more than %d addresses", item, maxSourceIPs)
			}
			a, n := pfx.Addr(), 1<<bits
			skipEnds := pfx.Addr().Is4() && bits >= 2
			for i := 0; i < n; i, a = i+1, a.Next() {
				if skipEnds && (i == 0 || i == n-1) {
					continue
				}
				out = append(out, a)
			}
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", item)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		return nil, errors.New("no address given")
	}
	if len(out) > maxSourceIPs {
		return nil, fmt.Errorf("%d addresses, more than %d", len(out), maxSourceIPs)
	}
	return out, nil
}

// splitAll splits every value of a repeatable flag at commas.
func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// checkCaps refuses, before anything is sent, a schedule over a safety
// cap, naming the cap (exit 2). sustained is the schedule's highest
// sustained rate in requests per second (patterns.Plan.MaxRate).
func (t *target) checkCaps(s patterns.Schedule, sustained float64) error {
	var probs []string
	if n := len(s.Sends); n > t.o.maxRequests {
		probs = append(probs, fmt.Sprintf("the plan sends %d requests, over the cap --max-requests %d: raise it if you mean it", n, t.o.maxRequests))
	}
	if d := s.Duration; d > t.o.maxDuration {
		probs = append(probs, fmt.Sprintf("the plan lasts %v, over the cap --max-duration %v: raise it if you mean it", d.Round(time.Millisecond), t.o.maxDuration))
	}
	if n := len(t.probe.ClientValues); n > 0 && s.Clients > n {
		probs = append(probs, fmt.Sprintf("the plan uses %d clients, but --client-values has %d values", s.Clients, n))
	}
	batch := map[int]int{}
	for _, snd := range s.Sends {
		if snd.Batch != 0 {
			batch[snd.Batch]++
		}
	}
	for _, n := range batch {
		if float64(n) > t.o.maxRate {
			probs = append(probs, fmt.Sprintf("a race releases %d requests at once, over the cap --max-rate %s: raise it if you mean it",
				n, units.FormatRate(t.o.maxRate)))
			break
		}
	}
	if sustained > t.o.maxRate*(1+1e-9) {
		probs = append(probs, fmt.Sprintf("the plan sends %s, over the cap --max-rate %s: raise it if you mean it",
			units.FormatRate(sustained), units.FormatRate(t.o.maxRate)))
	}
	if len(probs) > 0 {
		return usageProblems(probs)
	}
	return nil
}

// header builds the record header of a run. plan and policy are JSON
// documents (nil when absent); their secrets, if any, are the caller's to
// redact.
func (t *target) header(f *Factory, start time.Time, plan, policy any) (record.Header, error) {
	host, _ := os.Hostname()
	h := record.Header{
		Tool:     "rlprobe " + f.Version,
		Go:       runtime.Version(),
		Start:    start,
		Agent:    defaultAgent,
		Host:     host,
		Seed:     t.seed,
		Captured: slices.Clone(headers.Captured),
	}
	for _, u := range t.urls {
		h.Targets = append(h.Targets, t.redactor.URL(u))
	}
	var err error
	if plan != nil {
		if h.Plan, err = json.Marshal(plan); err != nil {
			return h, fmt.Errorf("encode plan: %w", err)
		}
	}
	if policy != nil {
		if h.Policy, err = json.Marshal(policy); err != nil {
			return h, fmt.Errorf("encode policy: %w", err)
		}
	}
	return h, nil
}

// measureClock records in h this agent's clock offset and its uncertainty,
// measured against --time-ref; without it, it does nothing. It never
// measures against the target beforehand: the dozen requests a
// measurement takes would spend the very quota the run is about to probe,
// so --time-ref should name an endpoint outside the limit (or the
// reference server's arrival echo). Without it, the offset is estimated
// after the run from the Date headers of the run's own answers, at no cost,
// and written in the end line (see recording.clock). A failed measurement
// is a warning: the header keeps offset 0, and the end line's estimate
// applies.
func (t *target) measureClock(ctx context.Context, f *Factory, h *record.Header) {
	ref := t.o.timeRef
	if ref == "" {
		return
	}
	if !t.startAt.IsZero() { // done before the agents fire
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, t.startAt.Add(-startLead))
		defer cancel()
	}
	c := &http.Client{Timeout: t.o.timeout, Transport: &http.Transport{TLSClientConfig: t.probe.TLSConfig},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	off, unc, err := probe.MeasureClock(ctx, c, ref, 12)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: clock offset not measured against %s: %v\n", t.redactor.URL(ref), err)
		return
	}
	h.ClockOffsetNS, h.ClockUncertaintyNS = int64(off), int64(unc)
}

// waitStart waits until --start-at, when given, saying so on stderr
// (unless -q); check and infer call it right before their first request,
// the preflight, so that every agent given the same TIME starts together.
// It fails (exit 3) when ctx ends first.
func waitStart(ctx context.Context, f *Factory, g *GlobalOptions, t *target) error {
	if t.startAt.IsZero() {
		return nil
	}
	if !g.Quiet {
		fmt.Fprintf(f.IO.ErrOut, "waiting until --start-at %s\n", t.startAt.Format(time.RFC3339Nano))
	}
	timer := time.NewTimer(time.Until(t.startAt))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return Unreachablef("interrupted before --start-at")
	}
}

// recording is an open record file. Every result written through it (its
// WriteResult: hand it, not w, to sinks) also becomes a clock sample, so
// that close can record in the end line the agent's clock offset as the
// run's own Date headers show it.
type recording struct {
	path string
	file *os.File
	w    *record.Writer
	hdr  record.Header // as written
	warn io.Writer     // where a clock disagreement is reported

	mu      sync.Mutex
	samples []probe.ClockSample // of the results written so far

	// end is the end line close wrote (Type set), for in-process merges
	// that must see the file as analyze will.
	end record.End
}

// capsDoc is the safety caps as the dry-run documents give them.
func (t *target) capsDoc() map[string]any {
	return map[string]any{"max_requests": t.o.maxRequests, "max_duration_s": t.o.maxDuration.Seconds(), "max_rate_per_s": t.o.maxRate}
}

// begin starts what run and infer send: it shows summary on a terminal
// (unless -q), asks for confirmation where target.confirm does, builds the
// engine for raceMode and opens the record of a run starting now (zero),
// with plan in its header. The caller closes the engine; on an error
// nothing is left open.
func (t *target) begin(ctx context.Context, f *Factory, g *GlobalOptions, summary string,
	raceMode patterns.RaceMode, plan any) (eng *probe.Engine, rec *recording, zero time.Time, err error) {
	if f.IO.ErrTTY && !g.Quiet {
		fmt.Fprintln(f.IO.ErrOut, summary)
	}
	if err := t.confirm(f, summary); err != nil {
		return nil, nil, time.Time{}, err
	}
	if eng, err = t.newEngine(raceMode); err != nil {
		return nil, nil, time.Time{}, err
	}
	zero = time.Now()
	if rec, _, err = t.startRecord(ctx, f, zero, plan, nil); err != nil {
		eng.Close()
		return nil, nil, time.Time{}, err
	}
	return eng, rec, zero, nil
}

// startRecord builds the record header for a run starting at zero (plan
// and policy go into it as given), measures the clock against --time-ref,
// and opens the record file with the header written: the one way run,
// check and infer begin their record.
func (t *target) startRecord(ctx context.Context, f *Factory, zero time.Time, plan, policy any) (*recording, record.Header, error) {
	hdr, err := t.header(f, zero, plan, policy)
	if err != nil {
		return nil, hdr, err
	}
	t.measureClock(ctx, f, &hdr)
	rec, err := t.openRecord(f, hdr)
	return rec, hdr, err
}

// openRecord creates the record file (never replacing one without --force:
// exit 2) and writes its header.
func (t *target) openRecord(f *Factory, h record.Header) (*recording, error) {
	file, err := record.Create(t.outPath, t.o.force)
	if err != nil {
		return nil, UsageErr(err)
	}
	w, err := record.NewWriter(file, h)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("write %s: %w", t.outPath, err)
	}
	return &recording{path: t.outPath, file: file, w: w, hdr: h, warn: f.IO.ErrOut}, nil
}

// WriteResult writes res to the file and keeps its clock sample, if it has
// one (probe.ResultClockSample). It is safe for concurrent use.
func (r *recording) WriteResult(res record.Result) error {
	if s, ok := probe.ResultClockSample(res, r.hdr.Start); ok {
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
	}
	return r.w.WriteResult(res)
}

var _ probe.Sink = (*recording)(nil)

// clock returns the end line with its clock estimate: the header's
// --time-ref measurement when it has one (source time-ref), else the
// estimate from the Date headers (and arrival echoes) of the results
// written (source date), else none. Samples that disagree give none and a
// warning: replicas with different clocks, or a cache, answered.
func (r *recording) clock(e record.End) record.End {
	if r.hdr.ClockOffsetNS != 0 || r.hdr.ClockUncertaintyNS != 0 {
		e.ClockOffsetNS, e.ClockUncertaintyNS, e.ClockSource = r.hdr.ClockOffsetNS, r.hdr.ClockUncertaintyNS, record.ClockSourceTimeRef
		return e
	}
	r.mu.Lock()
	off, unc, err := probe.EstimateClock(r.samples)
	r.mu.Unlock()
	switch {
	case err == nil:
		e.ClockOffsetNS, e.ClockUncertaintyNS, e.ClockSource = int64(off), int64(unc), record.ClockSourceDate
	case errors.Is(err, probe.ErrClockDisagree):
		fmt.Fprintf(r.warn, "rlprobe: warning: clock offset not estimated from the Date headers: %v\n", err)
	}
	return e
}

// close writes the end line, with the clock estimate (see clock), and
// closes the file.
func (r *recording) close(reason string, scheduled, sent int64) error {
	r.end = r.clock(record.End{Reason: reason, Scheduled: scheduled, Sent: sent})
	err := r.w.Close(r.end)
	r.end.Type = record.TypeEnd
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	return nil
}

// newEngine builds the probe engine (its option errors are usage errors).
func (t *target) newEngine(raceMode patterns.RaceMode) (*probe.Engine, error) {
	opt := t.probe
	opt.RaceMode = string(raceMode)
	e, err := probe.New(opt)
	if err != nil {
		return nil, UsageErr(err)
	}
	return e, nil
}

// outcomeClass says what an HTTP status means: accepted (2xx), rejected
// (the declared status, 429 or 503) or other.
func outcomeClass(status, declared int) string {
	switch {
	case status >= 200 && status < 300:
		return "accepted"
	case declared != 0 && status == declared:
		return "rejected"
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		// A 429 or 503 is a rejection even when another status is
		// declared: the verdict reports the mismatch
		// (reject-status-mismatch) rather than the run aborting on it.
		return "rejected"
	}
	return "other"
}

// preflight sends the one request check and infer begin with. A transport
// failure, or an answer that is neither accepted nor rejected (401, 404,
// 3xx…), ends the command with exit 3, the status, the first 200 bytes of
// the body and a hint. The result is written to sink when it is not nil.
func preflight(ctx context.Context, e *probe.Engine, zero time.Time, declared int, sink probe.Sink) (record.Result, error) {
	res, body, err := e.Preflight(ctx, zero)
	if sink != nil {
		if werr := sink.WriteResult(res); werr != nil {
			return res, werr
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, Unreachablef("interrupted during the preflight request")
		}
		return res, Unreachablef("preflight: cannot reach %s: %v (%s)\nhint: check the URL and that the target is up", res.URL, err, res.Err)
	}
	if outcomeClass(res.Status, declared) != "other" {
		return res, nil
	}
	return res, Unreachablef("preflight: %s answered %d %s, neither accepted nor rejected\nbody: %q\nhint: %s",
		res.URL, res.Status, http.StatusText(res.Status), body, statusHint(res.Status))
}

// statusHint suggests what to do about an unexpected status.
func statusHint(status int) string {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "the target wants credentials: pass them with -H \"Authorization: Bearer $TOKEN\" (never written to the record)"
	case status == http.StatusNotFound:
		return "check the URL's path"
	case status == http.StatusMethodNotAllowed:
		return "the target refuses this method: see -X"
	case status >= 300 && status < 400:
		return "rlprobe never follows redirects: probe the final URL instead"
	case status >= 500:
		return "the target is failing; if it rejects with this status by design, declare it with --status"
	}
	return "probe a URL that answers 2xx when under its limit"
}

// confirm asks, on an interactive terminal and unless --yes, before
// probing targets that are not on this machine. It returns a usage error
// when the user declines.
func (t *target) confirm(f *Factory, summary string) error {
	if t.o.yes || t.o.dryRun || !f.IO.ErrTTY || !isTerminal(f.IO.In) {
		return nil
	}
	var remote []string
	for _, u := range t.urls {
		if !isLoopbackURL(u) {
			remote = append(remote, t.redactor.URL(u))
		}
	}
	if len(remote) == 0 {
		return nil
	}
	fmt.Fprintf(f.IO.ErrOut, "%s\nProbe %s? [y/N] ", summary, strings.Join(remote, ", "))
	line, _ := bufio.NewReader(f.IO.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return Usagef("not confirmed: nothing sent (add --yes to skip this question)")
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// isLoopbackURL reports whether u's host is localhost or a loopback address.
func isLoopbackURL(s string) bool {
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

// runError maps an engine error to the end reason of the record file and
// the command's error (exit 3 for interrupted, aborted and budget).
func runError(err error, rec *recording, done, total int) (reason string, cmdErr error) {
	where := ""
	if rec != nil {
		where = "; the results so far are in " + rec.path
	}
	switch {
	case err == nil:
		return record.ReasonCompleted, nil
	case errors.Is(err, probe.ErrInterrupted):
		return record.ReasonInterrupted, Unreachablef("interrupted after %d of %d requests%s", done, total, where)
	case errors.Is(err, probe.ErrBudget):
		return record.ReasonBudget, Unreachablef("budget spent after %d of %d requests%s", done, total, where)
	case errors.Is(err, probe.ErrAborted):
		return record.ReasonAborted, Unreachablef("%v (after %d of %d requests)%s", err, done, total, where)
	case errors.Is(err, probe.ErrUsage):
		return record.ReasonAborted, UsageErr(err)
	}
	return record.ReasonAborted, Unreachablef("%v%s", err, where)
}
