package testserver

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultShutdownGrace is RunOptions.Grace when it is 0.
const DefaultShutdownGrace = 10 * time.Second

// RunOptions say how Run keeps a started server until its context ends.
type RunOptions struct {
	// Reload, when set, asks for a reload of ReloadFile (ReloadFile's
	// routes replace the running ones) on each receive, as serve --config
	// does on SIGHUP. A nil channel never reloads.
	Reload <-chan struct{}
	// ReloadFile is the config file (LoadConfig's format) read again on
	// each Reload.
	ReloadFile string
	// Log, when set, receives one sentence per reload, without a trailing
	// newline: "reloaded FILE", or why the previous routes stay.
	Log func(msg string)
	// Grace bounds the graceful shutdown once ctx ends (Shutdown's wait
	// for in-flight requests); 0 means DefaultShutdownGrace.
	Grace time.Duration
}

// Run keeps a started server (Start or StartListener) serving until ctx
// ends, reloading its routes on each opt.Reload, then shuts it down
// gracefully within opt.Grace. It returns Shutdown's error: nil when every
// in-flight request finished in time, else what cut them short.
func (s *Server) Run(ctx context.Context, opt RunOptions) error {
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-opt.Reload:
			s.reloadLogged(opt)
		}
	}
	grace := opt.Grace
	if grace == 0 {
		grace = DefaultShutdownGrace
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return s.Shutdown(sctx)
}

// reloadLogged reloads opt.ReloadFile and says how it went on opt.Log; a
// file that does not load leaves the running routes as they were.
func (s *Server) reloadLogged(opt RunOptions) {
	msg := "reloaded " + opt.ReloadFile
	if err := s.ReloadFile(opt.ReloadFile); err != nil {
		msg = fmt.Sprintf("reload of %s failed, the previous routes stay: %v", opt.ReloadFile, err)
	}
	if opt.Log != nil {
		opt.Log(msg)
	}
}

// SilenceRedisLog drops go-redis's own log lines (its pool's dial retries,
// written on stderr) for the whole process, since go-redis has one
// process-wide logger: a front end reports an unreachable Redis once, from
// Start's error wrapping ErrRedisUnreachable, and a backend failure while
// serving is answered per HandlerOptions.OnBackendError.
func SilenceRedisLog() { redis.SetLogger(quietRedis{}) }

// quietRedis is a go-redis logger that writes nothing.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
