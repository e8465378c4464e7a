package testserver

import (
	"testing"
	"time"
)

// TestWallAhead: the wall clock's lead over the steady clock is the steps
// it took since the start, whatever the monotonic time elapsed.
func TestWallAhead(t *testing.T) {
	const base = int64(1_700_000_000_000_000_000)
	tests := []struct {
		name  string
		since time.Duration // monotonic time since the start
		wall  int64         // the wall clock's reading then
		want  int64
	}{
		{"no step", 3 * time.Second, base + 3e9, 0},
		{"a step forward of 1.5 s", 3 * time.Second, base + 4.5e9, 1.5e9},
		{"a step back of 20 ms", 10 * time.Second, base + 10e9 - 20e6, -20e6},
		{"at the start", 0, base, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wallAhead(base, tt.since, tt.wall); got != tt.want {
				t.Errorf("wallAhead = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestSteadyClockRunsMonotonic: a steady reading is the base plus the
// monotonic time since it, which is what a limiter is fed.
func TestSteadyClockRunsMonotonic(t *testing.T) {
	c := newSteadyClock()
	later := c.base.Add(1500 * time.Millisecond) // a reading 1.5 s on
	if got := c.at(later).UnixNano() - c.base.UnixNano(); got != 1.5e9 {
		t.Errorf("steady reading 1.5 s on is %d ns after the base", got)
	}
	if got := c.wallOffset(later); got != 0 {
		t.Errorf("wall offset without a step = %d", got)
	}
	if now := c.now(); now.Before(c.base) {
		t.Errorf("now %v before the base %v", now, c.base)
	}
}
