package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/units"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdServe(f, g, nil) })
}

// ServeOptions are the flags of `rlprobe serve`.
type ServeOptions struct {
	testserver.ServeSpec
	LogRequests bool
	f           *Factory
}

// serveRouteFlags are the flags that describe the single route; --config
// replaces them all.
var serveRouteFlags = []string{"algorithm", "limit", "window", "rate", "capacity", "burst", "nodelay", "delay",
	"align", "count-rejected", "penalty", "forget-idle", "refill", "key", "status", "headers", "retry-after", "retry-after-format", "fault", "key-fault"}

// NewCmdServe builds `rlprobe serve`; runF (nil: the real one) runs it.
func NewCmdServe(f *Factory, g *GlobalOptions, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	o := &ServeOptions{f: f}
	var headersFlag string
	var faults []string
	var burst, delay int64
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Run the reference rate-limited HTTP server",
		Long:    helpLong("serve"),
		Example: helpExample("serve"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
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
			if o.Instances < 1 {
				return UsageErr(fmt.Errorf("--instances %d: want at least 1", o.Instances))
			}
			o.RouteFlags = changedFlags(cmd, serveRouteFlags, "")
			o.RedisFlags = changedFlags(cmd, []string{"redis", "redis-prefix", "atomic", "race-gap"}, "")
			return runOr(runF, serveRun)(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Route.Algorithm, "algorithm", "", "fixed-window, sliding-log, sliding-window-counter, token-bucket, gcra or leaky-bucket")
	fl.Int64Var(&o.Route.Limit, "limit", 0, "requests admitted per window (window algorithms)")
	fl.Var(&o.Route.Window, "window", "window length, such as 60s (window algorithms)")
	fl.Var(&o.Route.Rate, "rate", "refill rate, such as 10/s, 1r/s, 30/m (bucket algorithms)")
	fl.Int64Var(&o.Route.Capacity, "capacity", 0, "requests a full bucket admits at once (default 1; excludes --burst)")
	fl.Int64Var(&burst, "burst", 0, "nginx burst: requests beyond the first admitted at once (capacity - 1)")
	fl.BoolVar(&o.Route.NoDelay, "nodelay", false, "leaky-bucket: reject or pass at once, never delay (nginx nodelay)")
	fl.Int64Var(&delay, "delay", 0, "leaky-bucket: excess requests served without delay (nginx delay=N)")
	fl.StringVar(&o.Route.Align, "align", "", "where fixed windows start: epoch or first-request (fixed-window default: first-request)")
	fl.BoolVar(&o.Route.CountRejected, "count-rejected", false, "rejected requests count against the quota (window algorithms)")
	fl.StringVar(&o.Route.Penalty, "penalty", "", "after a refusal: block:DURATION (refuse everything for DURATION; not leaky-bucket), extend or restart (window algorithms)")
	fl.Var(&o.Route.ForgetIdle, "forget-idle", "forget a key idle this long (a returning client gets a full quota)")
	fl.StringVar(&o.Route.Refill, "refill", "", "token-bucket, gcra: whole (a token per tick of the key's grid) or interval (the whole capacity every capacity/rate, on a timer started with the server)")
	fl.StringVar(&o.Route.Key, "key", "global", "what shares a quota: global, ip or header:NAME")
	fl.IntVar(&o.Route.Status, "status", 429, "status of a rejection")
	fl.StringVar(&headersFlag, "headers", "draft-8", "header dialects: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8, draft-11, draft-12 (comma-separated)")
	fl.StringVar(&o.Route.RetryAfter, "retry-after", "accurate", "Retry-After on rejections: accurate, missing, early (half the wait) or late (wait + a window)")
	fl.StringVar(&o.Route.RetryAfterFormat, "retry-after-format", "seconds", "Retry-After format: seconds or http-date")
	fl.StringSliceVar(&faults, "fault", nil, "header defects: malformed-ratelimit, malformed-retry-after, remaining-stuck, policy-lie, cacheable-reject, advertise-rate, constant-reset, retry-after-ms, retry-after-unix, retry-after-zero, retry-after-window, retry-after-on-success, remaining-off-by-one, remaining-random, reset-epoch, reset-delta")
	fl.StringVar(&o.Route.KeyFault, "key-fault", "", "key derivation defect: collapse (every request keyed as global whatever --key says, as a limiter that sees the proxy's address)")
	fl.IntVar(&o.Instances, "instances", 1, "limiter instances behind the one listener (a deployment behind a load balancer)")
	fl.StringVar(&o.Store, "store", "local", "with --instances: local (each instance keeps its own state: K times the limit) or shared (one state)")
	fl.StringVar(&o.Balance, "balance", "connection", "with --instances: connection (each new connection to the next instance, kept there) or request (each request to the next)")
	fl.StringVar(&o.Backend, "backend", "memory", "where limiter state lives: memory or redis")
	fl.StringVar(&o.RedisURL, "redis", testserver.DefaultRedisURL, "Redis URL (--backend redis)")
	fl.StringVar(&o.RedisPrefix, "redis-prefix", testserver.DefaultRedisPrefix, "prefix of every Redis key (--backend redis)")
	fl.BoolVar(&o.Atomic, "atomic", true, "decide atomically; false reads, decides and writes back in separate steps (the classic race), in Redis or in memory")
	fl.Var((*units.Duration)(&o.RaceGap), "race-gap", "with --atomic=false: sleep between read and write-back, to make the race reproducible")
	fl.StringVar(&o.OnBackendError, "on-backend-error", "deny", "when Redis fails: deny (503 with Retry-After: 1) or allow")
	fl.StringVar(&o.Listen, "listen", testserver.DefaultListen, "address to listen on (port 0 picks a free port)")
	fl.BoolVar(&o.Public, "public", false, "allow a --listen address that is not loopback")
	fl.BoolVar(&o.TLS, "tls", false, "serve HTTPS (HTTP/1.1 and HTTP/2) with an ephemeral self-signed certificate")
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	fl.StringVar(&o.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.BoolVar(&o.H2C, "h2c", false, "also serve HTTP/2 over cleartext (prior knowledge)")
	fl.BoolVar(&o.EchoArrival, "echo-arrival", false, "add X-Rlprobe-Arrival (the request's receive time in Unix ns) and X-Rlprobe-Decision (its limiter decision's number; memory backends)")
	fl.Var((*units.Duration)(&o.ClockSkew), "clock-skew", "run the server's clock this far ahead of this machine's (--clock-skew=-700ms: behind), as a server elsewhere whose clock is off: decisions, epoch-aligned windows, Date and the arrival echo read it")
	fl.StringVar(&o.ConfigFile, "config", "", "routes and their policies from a YAML or JSON file (replaces the route flags)")
	fl.BoolVar(&o.LogRequests, "log-requests", false, "log one line per request on stderr")
	return cmd
}

func serveRun(ctx context.Context, o *ServeOptions) error {
	f := o.f
	testserver.SilenceRedisLog()
	if o.LogRequests {
		o.Log = f.IO.ErrOut
	}
	cfg, err := o.Config()
	if err != nil {
		return UsageErr(err)
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
	if f.ServeReady != nil {
		f.ServeReady(srv)
	}
	run := testserver.RunOptions{Log: func(msg string) { fmt.Fprintf(f.IO.ErrOut, "rlprobe: serve: %s\n", msg) }}
	if o.ConfigFile != "" {
		hup, stop := f.hangups()
		defer stop()
		run.Reload, run.ReloadFile = hup, o.ConfigFile
	}
	if err := srv.Run(ctx, run); err != nil {
		// A signal asked us to stop, and we did: say what was cut short.
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: serve: stopped without waiting for every request: %v\n", err)
	}
	return nil
}
