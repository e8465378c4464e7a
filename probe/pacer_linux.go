package probe

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// precisePacer is the default pacer on Linux (engine-limits.md §1, strategy
// "nanospin20"): the waiting goroutine is locked to its OS thread with the
// thread's timer slack at 1 ns, sleeps with the nanosleep system call
// (which, unlike a runtime timer, is not rounded up to the millisecond) until
// spin before the deadline, then busy-waits. Long waits use a runtime timer
// first, so a cancelled context is noticed promptly and no thread is held.
type precisePacer struct {
	spin  time.Duration // busy-wait this close to the deadline
	chunk time.Duration // longest single nanosleep, bounds cancel latency
}

var _ pacer = precisePacer{}

func defaultPacer() pacer {
	return precisePacer{spin: 20 * time.Microsecond, chunk: 2 * time.Millisecond}
}

func (precisePacer) start() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: a failure only costs precision
}

func (precisePacer) stop() {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) // 0 restores the thread's default slack
	runtime.UnlockOSThread()
}

func (p precisePacer) wait(ctx context.Context, deadline time.Time) {
	if d := time.Until(deadline); d > 2*coarseLead {
		sleepCtx(ctx, d-coarseLead)
	}
	for {
		d := time.Until(deadline)
		if d <= 0 || ctx.Err() != nil {
			return
		}
		if d <= p.spin {
			for time.Now().Before(deadline) {
			}
			return
		}
		ts := unix.NsecToTimespec(int64(min(d-p.spin, p.chunk)))
		_ = unix.Nanosleep(&ts, nil) // EINTR just means another round
	}
}
