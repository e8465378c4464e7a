//go:build !linux

package probe

import (
	"context"
	"runtime"
	"time"
)

// spinPacer is the default pacer outside Linux: a runtime timer until
// margin before the deadline, then a spin that yields the processor.
type spinPacer struct{ margin time.Duration }

var _ pacer = spinPacer{}

func defaultPacer() pacer { return spinPacer{margin: 1200 * time.Microsecond} }

func (spinPacer) start() {}
func (spinPacer) stop()  {}

func (p spinPacer) wait(ctx context.Context, deadline time.Time) {
	sleepCtx(ctx, time.Until(deadline)-p.margin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		runtime.Gosched()
	}
}
