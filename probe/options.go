package probe

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// DialFunc dials addr ("host:port") over network (always "tcp") from the
// local source address src; the zero netip.Addr means "any". It must honour
// ctx's deadline and cancellation, and may be called from many goroutines
// at once. The engine layers TLS and HTTP on top of the returned conn
// itself, so a test can return one end of a net.Pipe.
type DialFunc func(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error)

// Send is one scheduled request. It mirrors patterns.Send field for field,
// so that the caller's adapter is a plain loop (probe may not import
// patterns).
type Send struct {
	// At is the offset from Run's begin at which the request is due.
	At time.Duration
	// Client is the client identity index, from 0: it selects the key value
	// (Options.ClientValues) and the source address (Options.SourceIPs).
	Client int
	// Phase names the probe or plan phase; it is copied into the result.
	Phase string
	// Batch, when non-zero, makes the send a member of a synchronised
	// release: every Send with the same Batch is prepared in advance and
	// released together at At in Options.RaceMode. All members of a batch
	// must have the same At.
	Batch int
	// Conn chooses the client's connection to the send's target (see the
	// package documentation): 0 means any connection of the client's
	// shared pool; n ≥ 1 means the client's n-th dedicated connection to
	// that target, opened for its first use, kept alive and reopened only
	// when the server closed it (or it failed). The sends of one Conn go
	// one after another: a send due while its Conn is busy waits for it,
	// and is late. Two members of one batch cannot share a Conn, and a
	// single-packet race's members take none.
	Conn int
}

// Race modes: how the members of a batch are released (contract names).
const (
	// RaceBarrier prepares a connection per member (an HTTP/2 connection
	// may carry several), then releases one goroutine per member, each
	// writing its whole request.
	RaceBarrier = "barrier"
	// RaceLastByte writes every member's request except its final byte on a
	// connection of its own (HTTP/1.1, also over TLS), then releases all
	// final bytes from one loop, in member order.
	RaceLastByte = "last-byte"
	// RaceSinglePacket opens HTTP/2 connections (TLS with ALPN h2, or H2C),
	// sends every stream's HEADERS with its final frame withheld, then
	// flushes all final frames of a connection in one write.
	RaceSinglePacket = "single-packet"
)

// Defaults of Options' zero values, exported so that flag defaults and this
// documentation agree.
const (
	DefaultMethod           = http.MethodGet
	DefaultTimeout          = 10 * time.Second
	DefaultMaxRate          = 1000.0
	DefaultAbortAfterErrors = 20
	DefaultGrace            = 2 * time.Second
	DefaultRaceHold         = 100 * time.Millisecond
	DefaultConnections      = 256
	DefaultUserAgent        = "rlprobe"
	// LateThreshold is how late (sent − sched) a send must be to count as
	// late in a Summary.
	LateThreshold = record.LateThreshold
	// MaxBodyDrain is the default of Options.MaxBodyBytes: how many
	// response body bytes the engine reads; a connection whose response
	// body is longer is closed, not reused, and the answer is still a
	// response.
	MaxBodyDrain = 1 << 20
	// DefaultMaxHeaderBytes is the default of Options.MaxHeaderBytes.
	DefaultMaxHeaderBytes = 1 << 20
	// PreflightBodyBytes is how much of the preflight response body
	// Preflight returns.
	PreflightBodyBytes = 200
)

// Options configure an Engine. The zero value of every field has a
// documented default; only URLs is required.
type Options struct {
	// URLs are replicas of one service (http or https): each client's
	// requests go round-robin over them, and a race spans them all.
	URLs []string
	// Method is the request method; default GET.
	Method string
	// Header holds extra request headers sent with every request; a Host
	// entry overrides the URL's host. User-Agent defaults to "rlprobe".
	Header http.Header
	// Body is sent with every request (with a Content-Length); nil = none.
	Body []byte
	// Timeout bounds each request, from dialling (or the first byte
	// written) to the last byte of the response; default 10s.
	Timeout time.Duration
	// TLSConfig is the client TLS configuration for https URLs; nil means
	// the defaults. ServerName defaults to the URL's host and NextProtos to
	// h2 and http/1.1, so HTTP/2 is used when the server offers it.
	TLSConfig *tls.Config
	// H2C speaks HTTP/2 with prior knowledge to http URLs.
	H2C bool
	// ClientHeader, when set, carries the client identity: client i sends
	// ClientHeader: ClientValues[i]. Empty means no identity header.
	ClientHeader string
	// ClientValues are the identity values of clients 0…N-1; empty means
	// the synthetic k1…kN. A send whose Client has no value is refused.
	ClientValues []string
	// SourceIPs carry the client identity as the source address: client i
	// dials from SourceIPs[i % len(SourceIPs)]. On Linux every 127.0.0.N
	// works on loopback without setup.
	SourceIPs []netip.Addr
	// RaceMode is how batches (Sends with Batch != 0) are released:
	// RaceBarrier (the default), RaceLastByte or RaceSinglePacket.
	RaceMode string
	// RaceHold is how long before a batch's At its preparation starts (the
	// pause between the withheld writes and the release); default 100ms.
	RaceHold time.Duration
	// MaxRate is a guard against sending faster than this many requests
	// per second: a token bucket of ⌈MaxRate⌉ tokens refilled at MaxRate/s,
	// so at most MaxRate·(1+T) requests go out in any T seconds. A send held
	// back by it goes out late and counts as late. 0 means 1000; a batch
	// larger than the bucket is refused.
	MaxRate float64
	// Connections bounds the HTTP/1.1 connections each client keeps to
	// each URL, those dialled ahead of a run included: sends due while all
	// of them are busy wait for one to be freed, go out late and count as
	// late (with their actual send time), instead of piling up new
	// connections that only add work to both ends. 0 means
	// DefaultConnections (256). Batch members (races), which each take a
	// connection of their own, are not bound by it.
	Connections int
	// AbortAfterErrors is how many consecutive transport errors (in
	// completion order) abort a run; 0 means 20, negative never aborts.
	AbortAfterErrors int
	// TimerPacing makes the engine wait for deadlines on plain runtime
	// timers instead of the precise pacer (a locked thread that sleeps
	// with fine timer slack and spins the last microseconds). Timer pacing
	// is coarser (Go timers round up to about 1 ms) but is exact under
	// testing/synctest, where the precise pacer's real sleeps never end.
	// Set it whenever the engine runs inside a synctest bubble.
	TimerPacing bool
	// MaxHeaderBytes bounds a response head (status line and header
	// fields; over HTTP/2 the header list size of RFC 9113 §6.5.2): a
	// larger head is an error of class record.ErrHeaderTooLarge and its
	// connection is closed (HTTP/2: its stream is reset). It also bounds
	// the memory a hostile answer can make the engine hold. 0 means
	// DefaultMaxHeaderBytes (1 MiB).
	MaxHeaderBytes int
	// MaxBodyBytes is how many bytes of a response body the engine reads;
	// an answer with a longer body is still a response (its connection is
	// closed rather than reused). 0 means MaxBodyDrain (1 MiB).
	MaxBodyBytes int64
	// Grace is how long an interrupted or aborted run waits for requests in
	// flight before abandoning them; default 2s.
	Grace time.Duration
	// Dial opens connections; nil means a net.Dialer bound to the source
	// address.
	Dial DialFunc
	// Agent is the agent name written in results.
	Agent string
	// Captured are the response header names recorded, matched in any
	// case; nil means headers.Captured. A result names them as the server
	// spelled them over HTTP/1.1 (the first spelling when a field repeats
	// under another), in lower case over HTTP/2; read them with
	// headers.Get and headers.Values, not http.Header.Get.
	Captured []string
	// Proxy chooses the forward proxy of each target (see Proxy); the
	// zero value reaches every target directly.
	Proxy Proxy
	// Redactor replaces secrets in result URLs, captured headers and
	// identity values; nil redacts the record package's defaults.
	Redactor *record.Redactor
}

// ErrUsage marks every error caused by invalid options or an invalid
// schedule: nothing was sent.
var ErrUsage = errors.New("probe: invalid usage")

// usageErr returns an error matching ErrUsage that reads "probe: msg".
func usageErr(format string, args ...any) error {
	return &usageError{msg: "probe: " + fmt.Sprintf(format, args...)}
}

type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

// target is one parsed URL.
type target struct {
	raw        string // as given, without fragment
	redacted   string // raw with secrets replaced
	url        *url.URL
	tls        bool
	h2c        bool   // HTTP/2 with prior knowledge over cleartext
	addr       string // host:port to dial
	host       string // Host header / :authority
	requestURI string // path?query, for the request line and :path
	basicAuth  string // Authorization value from the URL's userinfo, or ""
	tlsAny     *tls.Config
	tlsH1      *tls.Config
	tlsH2      *tls.Config
	proxy      *proxyRoute // nil: reached directly (proxy.go)
}

// validate checks opt, fills defaults into a copy and parses the URLs; it
// reports every problem at once.
func (opt Options) validate() (Options, []*target, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, usageErr(format, args...)) }

	if opt.Method == "" {
		opt.Method = DefaultMethod
	}
	if !httpguts.ValidHeaderFieldName(opt.Method) { // a method is a token
		bad("invalid method %q", opt.Method)
	}
	if opt.Timeout < 0 {
		bad("negative timeout %v", opt.Timeout)
	} else if opt.Timeout == 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Grace < 0 {
		bad("negative grace period %v", opt.Grace)
	} else if opt.Grace == 0 {
		opt.Grace = DefaultGrace
	}
	if opt.RaceHold < 0 {
		bad("negative race hold %v", opt.RaceHold)
	} else if opt.RaceHold == 0 {
		opt.RaceHold = DefaultRaceHold
	}
	switch {
	case math.IsNaN(opt.MaxRate) || opt.MaxRate < 0:
		bad("max rate must be positive, got %v", opt.MaxRate)
	case opt.MaxRate == 0:
		opt.MaxRate = DefaultMaxRate
	}
	switch {
	case opt.MaxHeaderBytes < 0:
		bad("negative max header bytes %d", opt.MaxHeaderBytes)
	case opt.MaxHeaderBytes == 0:
		opt.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	switch {
	case opt.MaxBodyBytes < 0:
		bad("negative max body bytes %d", opt.MaxBodyBytes)
	case opt.MaxBodyBytes == 0:
		opt.MaxBodyBytes = MaxBodyDrain
	}
	switch {
	case opt.Connections < 0:
		bad("connections must be at least 1, got %d", opt.Connections)
	case opt.Connections == 0:
		opt.Connections = DefaultConnections
	}
	if opt.AbortAfterErrors == 0 {
		opt.AbortAfterErrors = DefaultAbortAfterErrors
	}
	switch opt.RaceMode {
	case "":
		opt.RaceMode = RaceBarrier
	case RaceBarrier, RaceLastByte, RaceSinglePacket:
	default:
		bad("unknown race mode %q (want %s, %s or %s)", opt.RaceMode, RaceBarrier, RaceLastByte, RaceSinglePacket)
	}
	opt, herrs := opt.validateHeaders()
	errs = append(errs, herrs...)

	if len(opt.URLs) == 0 {
		bad("no target URL")
	}
	var targets []*target
	for _, raw := range opt.URLs {
		t, err := parseTarget(raw, opt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if opt.RaceMode == RaceSinglePacket && !t.tls && !t.h2c {
			bad("race mode single-packet needs HTTP/2: use https or --h2c for %s", t.redacted)
		}
		targets = append(targets, t)
	}
	if len(errs) > 0 {
		return opt, nil, errors.Join(errs...)
	}
	return opt, targets, nil
}

// validateHeaders checks the request headers, the client identities and
// the captured header names (nil: headers.Captured), returning the options
// with Captured filled.
func (opt Options) validateHeaders() (Options, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, usageErr(format, args...)) }
	for k, vs := range opt.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			bad("invalid header name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				bad("invalid value for header %s", k) // the value may be a secret
			}
		}
	}
	if opt.ClientHeader != "" && !httpguts.ValidHeaderFieldName(opt.ClientHeader) {
		bad("invalid client header name %q", opt.ClientHeader)
	}
	for i, v := range opt.ClientValues {
		if !httpguts.ValidHeaderFieldValue(v) {
			bad("invalid client value on line %d", i+1)
		}
	}
	for _, ip := range opt.SourceIPs {
		if !ip.IsValid() {
			bad("invalid source address")
		}
	}
	if opt.Captured == nil {
		opt.Captured = slices.Clone(headers.Captured)
	}
	captured := make([]string, 0, len(opt.Captured))
	for _, name := range opt.Captured {
		if !httpguts.ValidHeaderFieldName(name) {
			bad("invalid captured header name %q", name)
			continue
		}
		captured = append(captured, http.CanonicalHeaderKey(name))
	}
	opt.Captured = captured
	return opt, errs
}

// parseTarget parses one target URL.
func parseTarget(raw string, opt Options) (*target, error) {
	red := opt.Redactor.URL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usageErr("invalid URL %s", red) // the parse error quotes the URL
	}
	if u.Host == "" {
		return nil, usageErr("URL %s has no host", red)
	}
	t := &target{url: u}
	switch u.Scheme {
	case "http":
		t.h2c = opt.H2C
	case "https":
		t.tls = true
	default:
		return nil, usageErr("URL %s: scheme must be http or https", red)
	}
	u.Fragment, u.RawFragment = "", ""
	if u.User != nil {
		// Credentials in the URL become Basic authentication, as curl does.
		pass, _ := u.User.Password()
		t.basicAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
		u.User = nil
	}
	t.raw = raw
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		t.raw = raw[:i]
	}
	t.redacted = opt.Redactor.URL(t.raw)
	port := u.Port()
	if port == "" {
		port = "80"
		if t.tls {
			port = "443"
		}
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	t.host = u.Host
	if h := opt.Header.Get("Host"); h != "" {
		t.host = h
	}
	t.requestURI = u.RequestURI()
	if err := t.setProxy(opt.Proxy); err != nil {
		return nil, usageErr("%v", err)
	}
	if t.tls {
		base := &tls.Config{}
		if opt.TLSConfig != nil {
			base = opt.TLSConfig.Clone()
		}
		if base.ServerName == "" {
			base.ServerName = u.Hostname()
		}
		if base.ClientSessionCache == nil { // resumed handshakes dial faster
			base.ClientSessionCache = tls.NewLRUClientSessionCache(0)
		}
		t.tlsAny = base.Clone()
		if len(t.tlsAny.NextProtos) == 0 {
			t.tlsAny.NextProtos = []string{"h2", "http/1.1"}
		}
		t.tlsH1 = base.Clone()
		t.tlsH1.NextProtos = []string{"http/1.1"}
		t.tlsH2 = base.Clone()
		t.tlsH2.NextProtos = []string{"h2"}
	}
	return t, nil
}
