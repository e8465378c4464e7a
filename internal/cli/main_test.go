package cli

import (
	"os"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// TestMain runs six parallel tests at a time, not two: the long ones
// (TestNginxExample, TestSelftestQuick, TestCheckFromConfig*,
// TestInferNamesServeBehaviours, TestDemo) infer through the built binary
// (runBuilt), and the real-socket checks beside them (TestCheckRealSockets,
// TestHeaderAuditsRealSockets and others marked so), all mostly waiting
// out real-time windows: measured, the parallel phase used 20–30 % of two
// cores, and these checks under 5 % of one. It collects garbage less often
// under the race detector (testenv.RaceGC: the in-process inferences
// allocate gigabytes) and removes the binary the tests built
// (testenv.BuildRlprobe) after them.
func TestMain(m *testing.M) {
	testenv.WaitingParallel(6)
	testenv.RaceGC()
	code := m.Run()
	testenv.RemoveBuilt()
	os.Exit(code)
}
