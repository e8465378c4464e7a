package testserver

import "time"

// steadyClock is the reference server's clock when no HandlerOptions.Now is
// given: readings whose wall time starts at the wall clock of the moment it
// was made and then runs with the monotonic clock. A limiter fed the wall
// clock over-admits when that clock steps forward (an NTP step, a virtual
// machine resumed and resynchronized): every logged request leaves its
// window early, and a check rightly reports it. (Two servers on one loaded
// machine once admitted 6 and 8 requests certainly within 2 s under a
// sliding log of 5 in 2 s, at the same moment; a wall-clock step is the
// suspected cause, not shown.) nginx decides on the monotonic clock too
// (ngx_current_msec).
//
// Decisions, rate-limit headers and epoch-aligned windows use its
// readings; the arrival echo, which clients map onto their own clocks
// through the wall clock, is given in wall time (wallOffset).
type steadyClock struct{ base time.Time }

// newSteadyClock returns a steady clock anchored at the wall clock now.
func newSteadyClock() steadyClock { return steadyClock{base: time.Now()} }

// at returns the steady reading for t, a reading of time.Now: the base
// plus the monotonic time elapsed since it.
func (c steadyClock) at(t time.Time) time.Time { return c.base.Add(t.Sub(c.base)) }

// now returns the steady reading of the moment.
func (c steadyClock) now() time.Time { return c.at(time.Now()) }

// wallOffset returns how far the wall clock is ahead of the steady one at
// t, a reading of time.Now, in ns: 0 until the wall clock steps or slews.
func (c steadyClock) wallOffset(t time.Time) int64 {
	return wallAhead(c.base.UnixNano(), t.Sub(c.base), t.UnixNano())
}

// wallAhead returns how far a wall clock reading wall is ahead of a steady
// clock that read baseWall at its start, since ago on the monotonic
// clock: wall − (baseWall + since), in ns.
func wallAhead(baseWall int64, since time.Duration, wall int64) int64 {
	return wall - (baseWall + since.Nanoseconds())
}
