package testenv

import (
	"os"
	"runtime/debug"
	"testing"
)

// raceGCPercent is the GOGC that RaceGC sets under the race detector.
const raceGCPercent = 400

// RaceGC makes a race-detector test binary collect garbage less often:
// GOGC 400 instead of 100, unless the environment sets GOGC. Under the
// detector a collection costs several times what it costs without (what
// is freed and swept has its shadow reset), and a package whose tests
// replay hypotheses in the simulator allocates gigabytes: two simulated
// inferences of a blocking fixed window took 66 s at GOGC 100 and 49 s
// at 400, alone on two cores, at 0.6–1.5 GB of resident memory. Without the race detector it does
// nothing. Call it from TestMain before m.Run.
func RaceGC() {
	if raceDetector {
		setGC()
	}
}

// setGC sets raceGCPercent unless GOGC is set.
func setGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(raceGCPercent)
}

// RunRaceGC calls RaceGC and runs the tests, returning their exit code:
// the whole TestMain of a package that needs nothing else before or after
// its tests is os.Exit(testenv.RunRaceGC(m)).
func RunRaceGC(m *testing.M) int {
	RaceGC()
	return m.Run()
}
