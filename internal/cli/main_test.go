package cli

import (
	"os"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// TestMain runs four parallel tests at a time, not two: the long ones
// (TestNginxExample, TestSelftestQuick, TestCheckFromConfig*,
// TestInferNamesServeBehaviours) infer through the built binary
// (runBuilt) and mostly wait out real-time windows. It collects garbage
// less often under the race detector (testenv.RaceGC: the in-process
// inferences allocate gigabytes) and removes the binary the tests built
// (buildRlprobe) after them.
func TestMain(m *testing.M) {
	testenv.WaitingParallel(4)
	testenv.RaceGC()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
