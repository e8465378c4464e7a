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
		retryRaces(t, rep)
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

// retryRaces runs once more each case that missed whose outcome depends
// on the order of requests that meet at one instant: foreign traffic and
// the non-atomic counter's race. Fake time fixes every instant, but not
// that order (the goroutines'), and it changes from run to run: a bucket
// with foreign traffic is sometimes read as a sliding-window counter
// (about one run in six under -race), and the non-atomic window's race
// once over-admitted so that infer read a per-client key with limit 3
// (seen once in eight grid runs under -race). The row is replaced only by a
// second, independent inference that is right; both are logged. A case
// that misses twice fails.
func retryRaces(t *testing.T, rep *SelftestReport) {
	for i, row := range rep.Rows {
		if row.OK() || (row.Case.Wild.Foreign == 0 && !row.Case.Wild.Memory.NonAtomic) {
			continue
		}
		again := RunSelftestCase(t.Context(), row.Case, SelftestOptions{ProbeOptions: func(o *probe.Options) { o.TimerPacing = true }})
		t.Logf("%s missed (%v); run again: right %v %v", row.Case.Name, row.Problems, again.OK(), again.Problems)
		if again.OK() {
			rep.Rows[i] = again
		}
	}
}
