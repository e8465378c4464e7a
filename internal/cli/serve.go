package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/testserver"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newServeCmd(f, g, nil) })
}

// shutdownGrace bounds the graceful stop of `serve` after a signal.
const shutdownGrace = 10 * time.Second

// ServeOptions are the flags of `rlprobe serve`.
type ServeOptions struct {
	Route testserver.RouteSpec
	// routeFlags are the route flags the user set, for refusing them
	// beside --config.
	routeFlags []string

	Backend        string
	RedisURL       string
	RedisPrefix    string
	Atomic         bool
	RaceGap        time.Duration
	OnBackendError string
	Listen         string
	Public         bool
	TLS            bool
	TLSCert        string
	TLSKey         string
	H2C            bool
	EchoArrival    bool
	ConfigFile     string
	LogRequests    bool

	// redisFlags are the Redis flags the user set.
	redisFlags []string
	// ready, when not nil, receives the server once it listens (tests).
	ready func(*testserver.Server)
}

// serveRouteFlags are the flags that describe the single route; --config
// replaces them all.
var serveRouteFlags = []string{"algorithm", "limit", "window", "rate", "capacity", "burst", "nodelay", "delay",
	"align", "count-rejected", "key", "status", "headers", "retry-after", "retry-after-format", "fault"}

func newServeCmd(f *Factory, g *GlobalOptions, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	o := &ServeOptions{}
	var headersFlag string
	var faults []string
	var rate float64
	var window time.Duration
	var burst, delay int64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the reference rate-limited HTTP server",
		Long: `Run rlprobe's reference server: every algorithm, header dialect and classic
mistake of a rate limiter, to watch one behave or to test rlprobe itself.

With flags, one policy limits every path. With --config FILE (YAML or JSON),
each route (exact path; 404 otherwise) has its own policy, with keys named
like the flags:

  routes:
    - {path: /fixed, algorithm: fixed-window, limit: 5, window: 2s}
    - {path: /nginx, algorithm: leaky-bucket, rate: 1r/s, burst: 3, nodelay: true}

Window algorithms (fixed-window, sliding-log, sliding-window-counter) take
--limit and --window; buckets (token-bucket, gcra, leaky-bucket) take --rate
and --capacity or --burst (capacity = burst + 1; default capacity 1).
Buckets advertise q=capacity; w=max(1, ceil(capacity/rate)).

The first line on stdout is "listening on http://ADDR". The server stops
gracefully and exits 0 on SIGINT or SIGTERM.`,
		Example: `  rlprobe serve --algorithm fixed-window --limit 5 --window 2s
  rlprobe serve --algorithm leaky-bucket --rate 1r/s --burst 3 --nodelay --status 503
  rlprobe serve --algorithm gcra --rate 10/s --capacity 20 --headers draft-8,x-ratelimit --fault policy-lie
  rlprobe serve --backend redis --atomic=false --race-gap 20ms --algorithm fixed-window --limit 10 --window 60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			o.Route.Rate = testserver.Rate(rate)
			o.Route.Window = testserver.Duration(window)
			if fl.Changed("burst") {
				o.Route.Burst = &burst
			}
			if fl.Changed("delay") {
				o.Route.Delay = &delay
			}
			if fl.Changed("headers") || o.ConfigFile == "" {
				o.Route.Headers = testserver.SplitList(headersFlag)
			}
			for _, s := range faults {
				o.Route.Fault = append(o.Route.Fault, testserver.SplitList(s)...)
			}
			for _, name := range serveRouteFlags {
				if fl.Changed(name) {
					o.routeFlags = append(o.routeFlags, name)
				}
			}
			for _, name := range []string{"redis", "redis-prefix", "atomic", "race-gap"} {
				if fl.Changed(name) {
					o.redisFlags = append(o.redisFlags, name)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return serveRun(cmd.Context(), f, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Route.Algorithm, "algorithm", "", "fixed-window, sliding-log, sliding-window-counter, token-bucket, gcra or leaky-bucket")
	fl.Int64Var(&o.Route.Limit, "limit", 0, "requests admitted per window (window algorithms)")
	fl.Var(DurationValue(&window), "window", "window length, such as 60s (window algorithms)")
	fl.Var(RateValue(&rate), "rate", "refill rate, such as 10/s, 1r/s, 30/m (bucket algorithms)")
	fl.Int64Var(&o.Route.Capacity, "capacity", 0, "requests a full bucket admits at once (default 1; excludes --burst)")
	fl.Int64Var(&burst, "burst", 0, "nginx burst: requests beyond the first admitted at once (capacity - 1)")
	fl.BoolVar(&o.Route.NoDelay, "nodelay", false, "leaky-bucket: reject or pass at once, never delay (nginx nodelay)")
	fl.Int64Var(&delay, "delay", 0, "leaky-bucket: excess requests served without delay (nginx delay=N)")
	fl.StringVar(&o.Route.Align, "align", "", "where fixed windows start: epoch or first-request (fixed-window default: first-request)")
	fl.BoolVar(&o.Route.CountRejected, "count-rejected", false, "rejected requests count against the quota (window algorithms)")
	fl.StringVar(&o.Route.Key, "key", "global", "what shares a quota: global, ip or header:NAME")
	fl.IntVar(&o.Route.Status, "status", 429, "status of a rejection")
	fl.StringVar(&headersFlag, "headers", "draft-8", "header dialects: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8 (comma-separated)")
	fl.StringVar(&o.Route.RetryAfter, "retry-after", "accurate", "Retry-After on rejections: accurate, missing, early (half the wait) or late (wait + a window)")
	fl.StringVar(&o.Route.RetryAfterFormat, "retry-after-format", "seconds", "Retry-After format: seconds or http-date")
	fl.StringSliceVar(&faults, "fault", nil, "header defects: malformed-ratelimit, malformed-retry-after, remaining-stuck, policy-lie, cacheable-reject")
	fl.StringVar(&o.Backend, "backend", "memory", "where limiter state lives: memory or redis")
	fl.StringVar(&o.RedisURL, "redis", testserver.DefaultRedisURL, "Redis URL (--backend redis)")
	fl.StringVar(&o.RedisPrefix, "redis-prefix", testserver.DefaultRedisPrefix, "prefix of every Redis key (--backend redis)")
	fl.BoolVar(&o.Atomic, "atomic", true, "decide atomically; false reads, decides and writes back in separate steps (the classic race), in Redis or in memory")
	fl.Var(DurationValue(&o.RaceGap), "race-gap", "with --atomic=false: sleep between read and write-back, to make the race reproducible")
	fl.StringVar(&o.OnBackendError, "on-backend-error", "deny", "when Redis fails: deny (503 with Retry-After: 1) or allow")
	fl.StringVar(&o.Listen, "listen", testserver.DefaultListen, "address to listen on (port 0 picks a free port)")
	fl.BoolVar(&o.Public, "public", false, "allow a --listen address that is not loopback")
	fl.BoolVar(&o.TLS, "tls", false, "serve HTTPS (HTTP/1.1 and HTTP/2) with an ephemeral self-signed certificate")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.BoolVar(&o.H2C, "h2c", false, "also serve HTTP/2 over cleartext (prior knowledge)")
	fl.BoolVar(&o.EchoArrival, "echo-arrival", false, "add X-Rlprobe-Arrival: the request's receive time in Unix ns")
	fl.StringVar(&o.ConfigFile, "config", "", "routes and their policies from a YAML or JSON file (replaces the route flags)")
	fl.BoolVar(&o.LogRequests, "log-requests", false, "log one line per request on stderr")
	return cmd
}

// serveConfig turns the options into a server configuration; every error
// is a usage error.
func serveConfig(f *Factory, o *ServeOptions) (testserver.Config, error) {
	cfg := testserver.Config{
		Backend: testserver.BackendKind(o.Backend),
		Redis: testserver.RedisConfig{URL: o.RedisURL, Prefix: o.RedisPrefix, NonAtomic: !o.Atomic,
			RaceGap: o.RaceGap},
		Listen:      o.Listen,
		Public:      o.Public,
		TLS:         o.TLS,
		TLSCertFile: o.TLSCert,
		TLSKeyFile:  o.TLSKey,
		H2C:         o.H2C,
		Handler: testserver.HandlerOptions{EchoArrival: o.EchoArrival,
			OnBackendError: testserver.BackendErrorMode(o.OnBackendError)},
	}
	if o.LogRequests {
		cfg.Handler.Log = f.IO.ErrOut
	}
	switch o.Backend {
	case "memory":
		for _, name := range o.redisFlags {
			if name == "redis" || name == "redis-prefix" {
				return cfg, Usagef("--%s means nothing with --backend memory (add --backend redis)", name)
			}
		}
		cfg.Memory = testserver.MemoryConfig{NonAtomic: !o.Atomic, RaceGap: o.RaceGap}
	case "redis":
	default:
		return cfg, Usagef("--backend %q: use memory or redis", o.Backend)
	}
	if o.RaceGap != 0 && o.Atomic {
		return cfg, Usagef("--race-gap means nothing with --atomic=true: the gap is between the read and the write-back of --atomic=false")
	}
	if o.RaceGap < 0 {
		return cfg, Usagef("--race-gap %v is negative", o.RaceGap)
	}
	switch o.OnBackendError {
	case "allow", "deny":
	default:
		return cfg, Usagef("--on-backend-error %q: use allow or deny", o.OnBackendError)
	}
	if o.ConfigFile != "" {
		if len(o.routeFlags) > 0 {
			return cfg, Usagef("--%s cannot be combined with --config: give it in the file's routes instead", o.routeFlags[0])
		}
		file, err := os.Open(o.ConfigFile)
		if err != nil {
			return cfg, UsageErr(fmt.Errorf("serve: %w", err))
		}
		defer file.Close()
		routes, err := testserver.LoadConfig(o.ConfigFile, file)
		if err != nil {
			return cfg, UsageErr(err)
		}
		cfg.Routes = routes
		return cfg, nil
	}
	if o.Route.Algorithm == "" {
		return cfg, Usagef("choose --algorithm (fixed-window, sliding-log, sliding-window-counter, token-bucket, gcra, leaky-bucket) or --config FILE")
	}
	rt, err := o.Route.Route()
	if err != nil {
		return cfg, UsageErr(fmt.Errorf("serve: %w", err))
	}
	cfg.Routes = []testserver.Route{rt}
	return cfg, nil
}

// quietRedis drops go-redis's own log lines (its pool's dial retries, on
// stderr): serve reports an unreachable Redis once, in its own words, and
// a backend failure while serving is answered per --on-backend-error.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func serveRun(ctx context.Context, f *Factory, o *ServeOptions) error {
	redis.SetLogger(quietRedis{})
	cfg, err := serveConfig(f, o)
	if err != nil {
		return err
	}
	srv, err := testserver.New(cfg)
	if err != nil {
		return UsageErr(err)
	}
	if err := srv.Start(); err != nil {
		_ = srv.Shutdown(context.Background())
		switch {
		case errors.Is(err, testserver.ErrListen):
			return UsageErr(fmt.Errorf("serve: port unavailable: %w", err))
		case errors.Is(err, testserver.ErrRedisUnreachable):
			return UsageErr(fmt.Errorf("serve: Redis unreachable: %w; is redis-server running there? (--redis)", err))
		}
		return UsageErr(err)
	}
	if _, err := fmt.Fprintf(f.IO.Out, "listening on %s\n", srv.URL()); err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	if o.ready != nil {
		o.ready(srv)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// A signal asked us to stop, and we did: say what was cut short.
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: serve: stopped without waiting for every request: %v\n", err)
	}
	return nil
}
