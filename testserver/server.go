package testserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// BackendKind selects where limiter states live.
type BackendKind string

// The backends (serve --backend).
const (
	// BackendMemory keeps states in process memory (MemoryBackend).
	BackendMemory BackendKind = "memory"
	// BackendRedis keeps states in Redis (RedisBackend), shared by every
	// server on the same Redis and prefix.
	BackendRedis BackendKind = "redis"
)

// Defaults of Config (and of the serve flags).
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
	DefaultRedisPrefix = "rlprobe:"
)

// redisPingTimeout bounds the reachability check of Start.
const redisPingTimeout = 3 * time.Second

// Errors of Start, wrapped with the details, so callers can tell which
// resource failed.
var (
	// ErrListen wraps a failure to listen (a taken port, a bad address).
	ErrListen = errors.New("cannot listen")
	// ErrRedisUnreachable wraps a failed PING of the Redis backend.
	ErrRedisUnreachable = errors.New("redis unreachable")
)

// RedisConfig locates the Redis backend and says how it behaves.
type RedisConfig struct {
	// URL locates Redis: a redis://, rediss:// or unix:// URL, or host:port
	// as redis-cli takes it (see ParseRedisAddress); "" means
	// DefaultRedisURL.
	URL string
	// Prefix starts every key; "" means DefaultRedisPrefix. Servers with
	// the same URL, prefix and route paths share their quotas.
	Prefix string
	// NonAtomic and RaceGap are RedisOptions.NonAtomic and RaceGap.
	NonAtomic bool
	RaceGap   time.Duration
}

// MemoryConfig says how BackendMemory behaves.
type MemoryConfig struct {
	// NonAtomic decides with NonAtomicMemoryBackend (the check-then-act
	// race, in memory) instead of MemoryBackend.
	NonAtomic bool
	// RaceGap is NonAtomicOptions.RaceGap.
	RaceGap time.Duration
}

// Config is a Server's configuration. Routes are required; every other
// zero value is a default: memory backend, listen on DefaultListen,
// loopback only, plain HTTP/1.1.
type Config struct {
	// Routes are served as Handler does; their Backend must be nil (the
	// server builds one per route from Backend).
	Routes []Route
	// Handler holds the clock, echo, backend-error mode and log.
	Handler HandlerOptions
	// Backend is where limiter states live; "" means BackendMemory.
	Backend BackendKind
	// Redis configures BackendRedis.
	Redis RedisConfig
	// Memory configures BackendMemory.
	Memory MemoryConfig
	// Listen is the TCP address to listen on ("host:port", port 0 picks a
	// free one); "" means DefaultListen.
	Listen string
	// Public allows a Listen address that is not loopback.
	Public bool
	// TLS serves HTTPS (HTTP/1.1 and HTTP/2) with an ephemeral
	// self-signed certificate for localhost, 127.0.0.1 and ::1, unless
	// TLSCertFile and TLSKeyFile (PEM) name one, which implies TLS.
	TLS                     bool
	TLSCertFile, TLSKeyFile string
	// H2C serves HTTP/2 over cleartext with prior knowledge, beside
	// HTTP/1.1. It cannot be combined with TLS.
	H2C bool
}

// Server is the reference rate-limited HTTP server: a Handler behind an
// http.Server on a TCP port or an in-memory listener. Create it with New,
// start it with Start or StartListener, stop it with Shutdown. Its methods
// are safe for concurrent use.
type Server struct {
	cfg     Config
	handler *Handler
	redis   *redis.Client
	cert    *tls.Certificate
	srv     *http.Server
	// start is when New ran: the start of the timers of policies with
	// TimerAtStart, kept across reloads.
	start time.Time
	// conns numbers accepted connections (a deployment's balancer).
	conns connCounter

	mu       sync.Mutex
	listener net.Listener
	started  bool
	serveErr chan error
	closed   atomic.Bool
}

// New validates cfg and builds the server; it does not touch the network.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Backend == "" {
		cfg.Backend = BackendMemory
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Redis.URL == "" {
		cfg.Redis.URL = DefaultRedisURL
	}
	if cfg.Redis.Prefix == "" {
		cfg.Redis.Prefix = DefaultRedisPrefix
	}
	if err := checkListen(cfg.Listen, cfg.Public); err != nil {
		errs = append(errs, err)
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		errs = append(errs, errors.New("testserver: a TLS certificate needs both its certificate and key files"))
	}
	useTLS := cfg.TLS || cfg.TLSCertFile != ""
	if useTLS && cfg.H2C {
		errs = append(errs, errors.New("testserver: h2c is HTTP/2 without TLS: it cannot be combined with TLS"))
	}
	s := &Server{cfg: cfg, start: time.Now()}
	if cfg.Handler.Now != nil {
		s.start = cfg.Handler.Now()
	}
	switch cfg.Backend {
	case BackendMemory:
		if cfg.Memory.RaceGap < 0 {
			errs = append(errs, fmt.Errorf("testserver: race gap %v is negative", cfg.Memory.RaceGap))
		}
	case BackendRedis:
		opt, err := ParseRedisAddress(cfg.Redis.URL)
		if err != nil {
			errs = append(errs, err)
		} else {
			s.redis = redis.NewClient(opt)
		}
	default:
		errs = append(errs, fmt.Errorf("testserver: backend %q (valid: memory, redis)", cfg.Backend))
	}
	if err := errors.Join(errs...); err != nil {
		if s.redis != nil {
			s.redis.Close()
		}
		return nil, err
	}
	routes, err := s.buildRoutes(cfg.Routes)
	if err != nil {
		s.closeRedis()
		return nil, err
	}
	h, err := NewHandler(routes, cfg.Handler)
	if err != nil {
		s.closeRedis()
		return nil, err
	}
	s.handler = h
	if useTLS {
		var cert tls.Certificate
		var err error
		if cfg.TLSCertFile != "" {
			cert, err = tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		} else {
			cert, err = selfSigned(time.Now())
		}
		if err != nil {
			s.closeRedis()
			return nil, fmt.Errorf("testserver: TLS certificate: %w", err)
		}
		s.cert = &cert
	}
	return s, nil
}

// buildRoutes gives each route its backend: the server's Redis when it
// has one, the non-atomic memory backend when asked, else (nil) the
// handler's memory backend — one per instance of a deployment with a
// local store (Redis: instance i's keys start with PREFIX i<i>:).
func (s *Server) buildRoutes(in []Route) ([]Route, error) {
	routes := make([]Route, len(in))
	var errs []error
	n := s.cfg.Handler.Deployment.perInstance()
	for i, r := range in {
		if r.Backend != nil {
			errs = append(errs, fmt.Errorf("testserver: route %q: Config routes get their backend from Config.Backend", r.Path))
			continue
		}
		r.Policy = r.Policy.withStart(s.start)
		if s.redis == nil && !s.cfg.Memory.NonAtomic {
			routes[i] = r // the handler's memory backends
			continue
		}
		is := make(instances, n)
		for k := range is {
			b, err := s.backend(r, k, n)
			if err != nil {
				errs = append(errs, fmt.Errorf("route %q: %w", r.Path, err))
				break
			}
			is[k] = b
		}
		r.Backend = is[0]
		if n > 1 {
			r.Backend = is
		}
		routes[i] = r
	}
	return routes, errors.Join(errs...)
}

// backend returns instance k (of n) of route r's backend: Redis when the
// server has it, else the non-atomic memory backend.
func (s *Server) backend(r Route, k, n int) (Backend, error) {
	if s.redis != nil {
		prefix := s.cfg.Redis.Prefix
		if n > 1 {
			prefix += fmt.Sprintf("i%d:", k)
		}
		return NewRedisBackend(s.redis, r.Policy.Limiter, RedisOptions{
			Prefix: prefix + routeID(r.Path) + ":", NonAtomic: s.cfg.Redis.NonAtomic, RaceGap: s.cfg.Redis.RaceGap})
	}
	return NewNonAtomicMemoryBackend(r.Policy.Limiter, NonAtomicOptions{RaceGap: s.cfg.Memory.RaceGap})
}

// Reload replaces the server's routes with those of cfg, as nginx -s
// reload does: later requests are decided under the new policies. Only
// Routes are read from cfg: the listener, TLS, backend and handler options
// stay as the server started. On an error nothing changes.
func (s *Server) Reload(cfg Config) error {
	routes, err := s.buildRoutes(cfg.Routes)
	if err != nil {
		return err
	}
	return s.handler.Reload(routes)
}

// ReloadFile reloads the routes of a config file (LoadConfig's format),
// as serve --config does on SIGHUP.
func (s *Server) ReloadFile(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	routes, err := LoadConfig(path, file)
	if err != nil {
		return err
	}
	return s.Reload(Config{Routes: routes})
}

// routeID names a route in Redis keys.
func routeID(path string) string {
	if path == "" {
		return "*"
	}
	return path
}

// checkListen refuses an address that is not loopback unless public.
func checkListen(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("testserver: listen address %q: %w", addr, err)
	}
	if public {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("testserver: listen address %q is not loopback: the reference server is for tests; allow it explicitly (serve --public)", addr)
}

// Handler returns the server's handler, for serving it by other means.
func (s *Server) Handler() *Handler { return s.handler }

// Start checks that the backend answers, listens on Config.Listen and
// serves in the background. A taken port is an error wrapping ErrListen,
// an unreachable Redis one wrapping ErrRedisUnreachable.
func (s *Server) Start() error {
	if err := s.pingBackend(); err != nil {
		return err
	}
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("testserver: %w on %s: %w", ErrListen, s.cfg.Listen, unwrapOpError(err))
	}
	return s.serve(l)
}

// unwrapOpError drops net.OpError's repetition of the address.
func unwrapOpError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// StartListener serves on l (a MemListener in tests, or any listener the
// caller made) in the background. The backend must answer, as for Start.
func (s *Server) StartListener(l net.Listener) error {
	if err := s.pingBackend(); err != nil {
		return err
	}
	return s.serve(l)
}

func (s *Server) pingBackend() error {
	if s.redis == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisPingTimeout)
	defer cancel()
	if err := s.redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("testserver: %w at %s: %w", ErrRedisUnreachable, redactURL(s.cfg.Redis.URL), err)
	}
	return nil
}

// redactURL hides a password in a Redis URL.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.LastIndex(u, "@"); j > i {
			return u[:i+3] + "***@" + u[j+1:]
		}
	}
	return u
}

func (s *Server) serve(l net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		l.Close()
		return errors.New("testserver: server already started")
	}
	s.started = true
	now := s.handler.now
	s.listener = l
	al := &arrivalListener{Listener: l, now: now, kernel: s.handler.echo && s.handler.realClock}
	if al.kernel {
		stampListener(l) // best effort: accepted sockets are stamped anyway
	}
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			ctx = s.conns.withConn(ctx)
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if ac, ok := c.(*arrivalConn); ok {
				return context.WithValue(ctx, arrivalKey{}, ac)
			}
			return ctx
		},
	}
	var p http.Protocols
	p.SetHTTP1(true)
	if s.cfg.H2C {
		p.SetUnencryptedHTTP2(true)
	}
	if s.cert != nil {
		p.SetHTTP2(true)
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*s.cert}, MinVersion: tls.VersionTLS12}
	}
	s.srv.Protocols = &p
	s.serveErr = make(chan error, 1)
	go func() {
		var err error
		if s.cert != nil {
			err = s.srv.ServeTLS(al, "", "")
		} else {
			err = s.srv.Serve(al)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.serveErr <- err
	}()
	return nil
}

// Addr returns the address the server listens on (with the real port when
// Config.Listen asked for port 0), or "" before it starts.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// URL returns "http://ADDR" or, with TLS, "https://ADDR"; "" before the
// server starts.
func (s *Server) URL() string {
	addr := s.Addr()
	if addr == "" {
		return ""
	}
	if s.cert != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// Certificate returns the server's TLS leaf certificate, or nil without
// TLS. Clients of a self-signed server trust it through RootCAs.
func (s *Server) Certificate() *x509.Certificate {
	if s.cert == nil {
		return nil
	}
	return s.cert.Leaf
}

// RootCAs returns a pool holding the server's certificate, for a client's
// tls.Config; nil without TLS.
func (s *Server) RootCAs() *x509.CertPool {
	if s.cert == nil || s.cert.Leaf == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(s.cert.Leaf)
	return p
}

// Shutdown stops the server gracefully: no new connections, requests held
// by a leaky-bucket delay answer 503 at once (Handler.StopDelays), other
// in-flight requests finish, then the backend is closed. When ctx ends
// first, the remaining connections are closed and ctx's error is returned;
// otherwise the error that stopped serving, if any. Later calls return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	srv, serveErr := s.srv, s.serveErr
	s.mu.Unlock()
	s.handler.StopDelays()
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
		if err != nil {
			srv.Close()
		}
		if serr := <-serveErr; err == nil {
			err = serr
		}
	}
	s.closeRedis()
	return err
}

func (s *Server) closeRedis() {
	if s.redis != nil {
		s.redis.Close()
	}
}

// arrivalListener wraps accepted connections in arrivalConn.
type arrivalListener struct {
	net.Listener
	now func() time.Time
	// kernel stamps reads with the socket's receive time as well
	// (SO_TIMESTAMPNS, Linux), which the arrival echo reports, so that a
	// race's arrival spread is measured where it happens. Only with the
	// real clock, on whose wall time the kernel stamps. Decisions keep the time
	// the server read the request: fed the socket's times, which are not
	// in the order the requests are decided, a bucket would see time run
	// backwards.
	kernel bool
}

func (l *arrivalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ac := &arrivalConn{Conn: c, now: l.now}
	if l.kernel {
		ac.raw = stampSocket(c)
	}
	return ac, nil
}

// arrivalConn records when its last read returned data: for an HTTP/1
// request, the arrival of its final bytes; with kernel stamps, also when
// the socket received them.
type arrivalConn struct {
	net.Conn
	now    func() time.Time
	last   atomic.Int64    // Unix ns; 0 before the first read
	socket atomic.Int64    // the socket's receive time of the last read's data, Unix ns; 0: none
	raw    syscall.RawConn // reads with kernel stamps (see arrivalListener.kernel); nil: none
	oob    [64]byte
}

func (c *arrivalConn) Read(p []byte) (int, error) {
	if c.raw != nil {
		n, ns, err := readStamped(c.raw, p, c.oob[:])
		if n > 0 {
			c.last.Store(c.now().UnixNano())
			c.socket.Store(ns)
		}
		return n, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.last.Store(c.now().UnixNano())
	}
	return n, err
}

// selfSigned makes an ECDSA P-256 certificate for localhost, 127.0.0.1 and
// ::1, valid from an hour before now for a week.
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rlprobe reference server", Organization: []string{"rlprobe"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
