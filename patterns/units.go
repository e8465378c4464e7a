package patterns

import (
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
)

// ParseTime parses a wall-clock instant: RFC 3339 (2025-06-01T12:00:00Z,
// fractional seconds allowed), or a time of day HH:MM, HH:MM:SS or
// HH:MM:SS.fff in now's location, meaning its next occurrence at or after
// now. now is only used for times of day. Its error is a *problem.Error.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04"} {
		clock, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		y, m, d := now.Date()
		t := time.Date(y, m, d, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), now.Location())
		if t.Before(now) {
			t = time.Date(y, m, d+1, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), now.Location())
		}
		return t, nil
	}
	return time.Time{}, problem.New("patterns", "", "invalid time %q: use RFC 3339 (2025-06-01T12:00:00Z) or a time of day (12:00:05)", s)
}

// NextEdge returns the first instant at or after t at which a window of
// length period begins, windows starting at phase past every multiple of
// period since the Unix epoch (phase 0: windows aligned to the epoch, as
// fixed windows of most servers are). period must be positive.
func NextEdge(t time.Time, period, phase time.Duration) time.Time {
	if period <= 0 {
		return t
	}
	ns := t.UnixNano() - int64(phase)
	rem := ns % int64(period)
	if rem < 0 {
		rem += int64(period)
	}
	if rem == 0 {
		return t
	}
	return t.Add(period - time.Duration(rem))
}

// Rate is a rate in requests per second in the contract's grammar (5/s,
// 1r/m), read and written by units; the zero value means "not set".
type Rate = units.Rate

// Duration is a duration in Go syntax (1.5s), read and written by units,
// refusing bare numbers; the zero value means "not set".
type Duration = units.Duration
