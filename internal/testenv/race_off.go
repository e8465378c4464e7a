//go:build !race

package testenv

// raceDetector reports whether the binary is built with -race.
const raceDetector = false
