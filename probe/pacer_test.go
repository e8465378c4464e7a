package probe

import (
	"context"
	"testing"
	"time"
)

func TestPacerNeverReturnsEarly(t *testing.T) {
	for name, p := range map[string]pacer{"default": defaultPacer(), "timer": timerPacer{}} {
		p.start()
		start := time.Now()
		for i := range 50 {
			d := start.Add(time.Duration(i) * 137 * time.Microsecond)
			p.wait(context.Background(), d)
			if now := time.Now(); now.Before(d) {
				t.Errorf("%s pacer returned %v before its deadline", name, d.Sub(now))
			}
		}
		p.stop()
	}
}

func TestPacerStopsOnCancel(t *testing.T) {
	for name, p := range map[string]pacer{"default": defaultPacer(), "timer": timerPacer{}} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		p.start()
		p.wait(ctx, time.Now().Add(time.Hour)) // returns only because of the cancel
		p.stop()
		if ctx.Err() == nil {
			t.Errorf("%s pacer returned before its deadline without a cancel", name)
		}
	}
}
