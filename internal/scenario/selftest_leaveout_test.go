package scenario

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/probe"
)

// TestLeaveOutTimerAtEveryPhase: the leave-one-out row of interval
// refill (a fixed window on the server's timer, inferred with the timer's
// model left out) is never exact, whenever in the timer's period of
// 1.25 s the run starts. Started 125, 375 or 500 ms later than the grid
// starts it, the run came out an exact window on a timer — the model left
// out, brought back by the check for a timer off the epoch
// (fit.offEpochTimer) — three starts in ten.
func TestLeaveOutTimerAtEveryPhase(t *testing.T) {
	var cs []SelftestCase
	for _, c := range SelftestCases() {
		if c.Name == "leave-out-timer-token-bucket" {
			cs = append(cs, c)
		}
	}
	if len(cs) != 1 {
		t.Fatalf("%d cases named leave-out-timer-token-bucket, want 1", len(cs))
	}
	for i := range 10 {
		synctest.Test(t, func(t *testing.T) {
			time.Sleep(time.Duration(i) * 125 * time.Millisecond)
			rep, err := Selftest(t.Context(), SelftestOptions{Cases: cs, Long: true,
				ProbeOptions: func(o *probe.Options) { o.TimerPacing = true }})
			if err != nil {
				t.Fatal(err)
			}
			if r := rep.Rows[0]; !r.OK() {
				t.Errorf("started %v into the period: %s %v", time.Duration(i)*125*time.Millisecond, r.String(), r.Problems)
			}
		})
	}
}
