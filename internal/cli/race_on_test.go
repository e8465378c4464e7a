//go:build race

package cli

// raceDetector reports whether the tests run under the race detector,
// which makes the largest real-socket runs several times slower.
const raceDetector = true
