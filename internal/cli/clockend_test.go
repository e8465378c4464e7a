package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestEndLineClock: run, check and infer estimate the agent's clock after
// the run from their own answers' Date headers, at no extra request, and
// write it in the end line. Client and server share this machine's clock,
// so the true offset is 0: the recorded interval must contain it, and be
// at most about the second a Date header resolves (a short burst need not
// straddle a flip of the server's second).
func TestEndLineClock(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	noEcho := func(c *testserver.Config, _ *testserver.Policy) { c.Handler.EchoArrival = false }
	tests := []struct {
		name string
		args func(t *testing.T, out string) []string
	}{
		{"run", func(t *testing.T, out string) []string {
			srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 100, Capacity: 100}, noEcho)
			return []string{"run", srv.URL() + "/", "--pattern", "burst", "--count", "3", "--out", out, "-q"}
		}},
		{"check", func(t *testing.T, out string) []string {
			url := startServer(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 4},
				Status: 429, Dialects: []headers.Dialect{headers.None}})
			return []string{"check", url, "--rate", "1/s", "--burst", "3", "--only", "burst", "--out", out, "-q"}
		}},
		{"infer", func(t *testing.T, out string) []string {
			srv := refServer(t, "", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 4, Window: time.Second}, noEcho)
			return []string{"infer", srv.URL() + "/", "--max-requests", "20", "--out", out, "-q"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.jsonl")
			args := tt.args(t, out)
			code, _, stderr := runCLI(t, nil, args...)
			run := readRecord(t, out)
			if run.End == nil {
				t.Fatalf("%s: exit %d, no end line\n%s", strings.Join(args, " "), code, stderr)
			}
			e := run.End
			if run.Header.ClockOffsetNS != 0 || run.Header.ClockUncertaintyNS != 0 {
				t.Errorf("header clock %d ± %d; want none without --time-ref", run.Header.ClockOffsetNS, run.Header.ClockUncertaintyNS)
			}
			off, unc := time.Duration(e.ClockOffsetNS), time.Duration(e.ClockUncertaintyNS)
			if e.ClockSource != record.ClockSourceDate || unc <= 0 || unc > time.Second || off-unc > 0 || off+unc < 0 {
				t.Errorf("end clock %v ± %v (source %q): want a Date estimate within a second that contains 0", off, unc, e.ClockSource)
			}
			if o, u, src := run.Clock(); o != e.ClockOffsetNS || u != e.ClockUncertaintyNS || src != record.ClockSourceDate {
				t.Errorf("Run.Clock() = %d, %d, %q; want the end line's", o, u, src)
			}
		})
	}
}

// TestEndLineClockTimeRef: with --time-ref the header holds the
// measurement, and the end line repeats it, saying where it came from.
func TestEndLineClockTimeRef(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 100, Capacity: 100}, nil)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	if code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "2",
		"--time-ref", srv.URL()+"/", "--out", out, "-q"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	h, e := run.Header, run.End
	if h.ClockUncertaintyNS == 0 || e.ClockSource != record.ClockSourceTimeRef ||
		e.ClockOffsetNS != h.ClockOffsetNS || e.ClockUncertaintyNS != h.ClockUncertaintyNS {
		t.Errorf("header %d ± %d, end %+v; want the end to repeat the header's measurement, source time-ref",
			h.ClockOffsetNS, h.ClockUncertaintyNS, *e)
	}
}
