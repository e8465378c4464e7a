// Command rlprobe tests what an HTTP rate limiter really does, and whether it
// keeps its promise. See the README or `rlprobe --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/rlprobe/rlprobe/internal/cli"
)

// cpuProfileEnv names the environment variable that, set to a file name,
// makes rlprobe write a CPU profile of the whole command there (for `go
// tool pprof`; scripts/bench-engine.sh uses it). The file is created, or
// truncated, only when the variable is set.
const cpuProfileEnv = "RLPROBE_CPUPROFILE"

func main() {
	stopProfile := startProfile()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx)
	stop()
	stopProfile()
	os.Exit(code)
}

// startProfile starts the CPU profile cpuProfileEnv asks for and returns
// what stops it; a profile that cannot start is a warning, never a failure
// of the command.
func startProfile() func() {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rlprobe: warning: %s=%s: no CPU profile: %v\n", cpuProfileEnv, path, err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
