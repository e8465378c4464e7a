package probe

import (
	"context"
	"time"
)

// A pacer waits for absolute deadlines. start prepares the calling
// goroutine for a series of waits and stop undoes it; wait returns at the
// deadline (never before it) or as soon as it notices that ctx is done.
type pacer interface {
	start()
	stop()
	wait(ctx context.Context, deadline time.Time)
}

// timerPacer waits on a runtime timer. It is exact under testing/synctest,
// which the engine's tests rely on; on Linux the runtime rounds such waits
// up to about 1 ms (engine-limits.md §0), so it is not the default there.
type timerPacer struct{}

var _ pacer = timerPacer{}

func (timerPacer) start() {}
func (timerPacer) stop()  {}

func (timerPacer) wait(ctx context.Context, deadline time.Time) {
	sleepCtx(ctx, time.Until(deadline))
}

// sleepCtx sleeps for d on a runtime timer, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// coarseLead is how far before a deadline a precise pacer stops waiting on
// a runtime timer (which may overshoot by a few ms) and switches to its
// fine-grained wait.
const coarseLead = 5 * time.Millisecond
