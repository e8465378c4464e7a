package probe

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// precisePacer is the default pacer on Linux (engine-limits.md §1, strategy
// "nanospin20"): it sleeps with the nanosleep system call on a thread whose
// timer slack is 1 ns, which, unlike a runtime timer, is not rounded up to
// the millisecond, until spin before the deadline, and then spins.
//
//   - Waits longer than 2·coarseLead start on a runtime timer, so a
//     cancelled context is noticed promptly and no thread is held.
//   - Each nanosleep locks the goroutine to its thread for its duration
//     only: the runtime may lend the processor to other goroutines (the
//     response readers) while it sleeps.
//   - The last spin before the deadline is a busy wait, since nanosleep
//     overshoots by about 20 µs.
//   - A wait that begins less than sparse before its deadline (schedules
//     above about 10k/s) is all busy: in a VM a sleep and its wake-up (two
//     context switches) cost more processor time than such a wait.
//   - The goroutine is not locked to its thread between sleeps, so the
//     runtime's preemption of a long busy stretch is a plain reschedule
//     rather than a hand-off between threads.
type precisePacer struct {
	spin   time.Duration // busy-wait this close to the deadline
	sparse time.Duration // shorter waits do not sleep
	chunk  time.Duration // longest single nanosleep, bounds cancel latency
}

var _ pacer = precisePacer{}

func defaultPacer() pacer {
	return precisePacer{spin: 20 * time.Microsecond, sparse: 100 * time.Microsecond, chunk: 2 * time.Millisecond}
}

func (precisePacer) start() {}
func (precisePacer) stop()  {}

func (p precisePacer) wait(ctx context.Context, deadline time.Time) {
	d := time.Until(deadline)
	if d > 2*coarseLead {
		sleepCtx(ctx, d-coarseLead)
		d = time.Until(deadline)
	}
	if d < p.sparse {
		for time.Now().Before(deadline) {
		}
		return
	}
	for {
		if d <= 0 || ctx.Err() != nil {
			return
		}
		if d <= p.spin {
			for time.Now().Before(deadline) {
			}
			return
		}
		fineSleep(min(d-p.spin, p.chunk))
		d = time.Until(deadline)
	}
}

// fineSleep sleeps for d with nanosleep on a thread whose timer slack is
// 1 ns for the duration of the sleep.
func fineSleep(d time.Duration) {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: a failure only costs precision
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)                       // EINTR just means another round
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) // 0 restores the thread's default slack
	runtime.UnlockOSThread()
}
