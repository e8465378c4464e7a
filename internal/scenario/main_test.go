package scenario

import (
	"os"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// TestMain collects garbage less often under the race detector
// (testenv.RaceGC): the inferences allocate gigabytes.
func TestMain(m *testing.M) { os.Exit(testenv.RunRaceGC(m)) }
