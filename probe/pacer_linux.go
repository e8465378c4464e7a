package probe

import (
	"context"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// precisePacer is the default pacer on Linux (engine-limits.md §1, strategy
// "nanospin20", refined): the waiting goroutine is locked to its OS thread
// with the thread's timer slack at 1 ns and sleeps with the nanosleep system
// call, which, unlike a runtime timer, is not rounded up to the millisecond.
//
//   - Waits longer than 2·coarseLead start on a runtime timer, so a
//     cancelled context is noticed promptly and no thread is held.
//   - Sleeps longer than rawMax go through the runtime's system call
//     entry, which lets the scheduler use the processor meanwhile; the last
//     rawMax bypass it, so that the goroutine does not have to win its
//     processor back (50–200 µs at p99 on a busy 2-core VM) at the
//     deadline. A raw sleep delays a stop-the-world by at most rawMax.
//   - The last spin before the deadline is a busy wait, since nanosleep
//     overshoots by about 20 µs; a wait shorter than 2·spin is all busy,
//     since a sleep and its wake-up cost about as much processor time in
//     this VM (two context switches).
type precisePacer struct {
	spin   time.Duration // busy-wait this close to the deadline
	rawMax time.Duration // longest sleep that keeps the processor
	chunk  time.Duration // longest single nanosleep, bounds cancel latency
}

var _ pacer = precisePacer{}

func defaultPacer() pacer {
	return precisePacer{
		spin:   20 * time.Microsecond,
		rawMax: 250 * time.Microsecond,
		chunk:  2 * time.Millisecond,
	}
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
	d := time.Until(deadline)
	if d > 2*coarseLead {
		sleepCtx(ctx, d-coarseLead)
		d = time.Until(deadline)
	}
	for {
		if d <= 0 || ctx.Err() != nil {
			return
		}
		if d <= 2*p.spin {
			for time.Now().Before(deadline) {
			}
			return
		}
		s := d - p.spin
		if s > p.rawMax {
			ts := unix.NsecToTimespec(int64(min(s-p.rawMax, p.chunk)))
			_ = unix.Nanosleep(&ts, nil) // EINTR just means another round
		} else {
			rawNanosleep(s)
		}
		d = time.Until(deadline)
	}
}

// rawNanosleep sleeps for d without telling the runtime (so the goroutine
// keeps its processor); d must be short.
func rawNanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0) // EINTR: another round
}
