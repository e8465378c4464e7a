package testserver

import (
	"fmt"
	"io"
	"os"
	"time"
)

// ServeSpec is the reference server as `rlprobe serve` describes it, one
// field per flag: a single route (Route) or routes from a file
// (ConfigFile), the limiter state's backend, listening, TLS and logging.
// Config turns it into a Config; its errors name the flags.
type ServeSpec struct {
	Route RouteSpec
	// RouteFlags are the route options given (flag names), refused beside
	// ConfigFile; RedisFlags the Redis options given (redis, redis-prefix,
	// atomic, race-gap), the first two refused with the memory backend.
	RouteFlags []string
	RedisFlags []string

	Backend        string // memory or redis
	RedisURL       string
	RedisPrefix    string
	Atomic         bool
	RaceGap        time.Duration
	OnBackendError string // deny or allow
	Listen         string
	Public         bool
	TLS            bool
	TLSCert        string
	TLSKey         string
	H2C            bool
	EchoArrival    bool
	// ClockSkew is HandlerOptions.ClockSkew: the server's clock this far
	// ahead of the machine's.
	ClockSkew  time.Duration
	ConfigFile string
	// Instances, Store and Balance are the Deployment (Instances 0: one).
	Instances int
	Store     string
	Balance   string
	// Log, when set, receives one line per request.
	Log io.Writer
}

// Config turns the spec into a server configuration, reading ConfigFile.
func (o ServeSpec) Config() (Config, error) {
	cfg := Config{
		Backend: BackendKind(o.Backend),
		Redis: RedisConfig{URL: o.RedisURL, Prefix: o.RedisPrefix, NonAtomic: !o.Atomic,
			RaceGap: o.RaceGap},
		Listen:      o.Listen,
		Public:      o.Public,
		TLS:         o.TLS,
		TLSCertFile: o.TLSCert,
		TLSKeyFile:  o.TLSKey,
		H2C:         o.H2C,
		Handler: HandlerOptions{EchoArrival: o.EchoArrival, ClockSkew: o.ClockSkew,
			OnBackendError: BackendErrorMode(o.OnBackendError),
			Deployment:     Deployment{Instances: o.Instances, Store: Store(o.Store), Balance: Balance(o.Balance)}},
	}
	if o.Instances < 0 {
		return cfg, fmt.Errorf("--instances %d: want at least 1", o.Instances)
	}
	if err := cfg.Handler.Deployment.Validate(); err != nil {
		return cfg, err
	}
	cfg.Handler.Log = o.Log
	switch o.Backend {
	case "memory":
		for _, name := range o.RedisFlags {
			if name == "redis" || name == "redis-prefix" {
				return cfg, fmt.Errorf("--%s means nothing with --backend memory (add --backend redis)", name)
			}
		}
		cfg.Memory = MemoryConfig{NonAtomic: !o.Atomic, RaceGap: o.RaceGap}
	case "redis":
		for _, name := range o.RouteFlags {
			if name == "penalty" || name == "forget-idle" || name == "refill" {
				return cfg, fmt.Errorf("--%s cannot be used with --backend redis: penalties, idle eviction and refills are %v", name, ErrRedisBehaviour)
			}
		}
	default:
		return cfg, fmt.Errorf("--backend %q: use memory or redis", o.Backend)
	}
	if o.RaceGap != 0 && o.Atomic {
		return cfg, fmt.Errorf("--race-gap means nothing with --atomic=true: the gap is between the read and the write-back of --atomic=false")
	}
	if o.RaceGap < 0 {
		return cfg, fmt.Errorf("--race-gap %v is negative", o.RaceGap)
	}
	switch o.OnBackendError {
	case "allow", "deny":
	default:
		return cfg, fmt.Errorf("--on-backend-error %q: use allow or deny", o.OnBackendError)
	}
	if o.ConfigFile != "" {
		if len(o.RouteFlags) > 0 {
			return cfg, fmt.Errorf("--%s cannot be combined with --config: give it in the file's routes instead", o.RouteFlags[0])
		}
		file, err := os.Open(o.ConfigFile)
		if err != nil {
			return cfg, fmt.Errorf("serve: %w", err)
		}
		defer file.Close()
		routes, err := LoadConfig(o.ConfigFile, file)
		if err != nil {
			return cfg, err
		}
		cfg.Routes = routes
		return cfg, nil
	}
	if o.Route.Algorithm == "" {
		return cfg, fmt.Errorf("choose --algorithm (fixed-window, sliding-log, sliding-window-counter, token-bucket, gcra, leaky-bucket) or --config FILE")
	}
	rt, err := o.Route.Route()
	if err != nil {
		return cfg, fmt.Errorf("serve: %w", err)
	}
	cfg.Routes = []Route{rt}
	return cfg, nil
}
