// Command rlprobe tests what an HTTP rate limiter really does, and whether it
// keeps its promise. See the README or `rlprobe --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rlprobe/rlprobe/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx)
	stop()
	os.Exit(code)
}
