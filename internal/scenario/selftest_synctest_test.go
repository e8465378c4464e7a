package scenario

import (
	"testing"
	"testing/synctest"

	"github.com/rlprobe/rlprobe/probe"
)

// TestSelftestGridSynctest runs the whole truth table in a synctest bubble
// over in-memory connections: fake time, so every case is exact and the
// grid takes only the CPU time of the fitting.
func TestSelftestGridSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep, err := Selftest(t.Context(), SelftestOptions{
			Parallel:     4,
			Long:         true,
			ProbeOptions: func(o *probe.Options) { o.TimerPacing = true },
		})
		if err != nil {
			t.Fatal(err)
		}
		logReport(t, rep)
		t.Log(rep.CoverageText())
		for _, c := range rep.Coverage() {
			if c.Share() < 0.95 {
				t.Errorf("%s: the bounds contained the truth in %d of %d cases, want at least 95 %%", c.Name, c.Covered, c.Cases)
			}
		}
		if !rep.Pass() {
			t.Error("selftest grid under synctest: not every case is right")
		}
	})
}
