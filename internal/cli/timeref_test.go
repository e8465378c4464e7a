package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestRunTimeRef: --time-ref measures this agent's clock against the
// reference server's arrival echo. Client and server share this machine's
// clock, so the true offset is 0: the recorded interval must contain it,
// and be far narrower than the second a Date header resolves.
func TestRunTimeRef(t *testing.T) {
	srv := refServer(t, "", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 100, Capacity: 100}, nil)
	out := filepath.Join(t.TempDir(), "r.jsonl")
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "2",
		"--time-ref", srv.URL()+"/", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	h := readRecord(t, out).Header
	off, unc := time.Duration(h.ClockOffsetNS), time.Duration(h.ClockUncertaintyNS)
	if unc <= 0 || unc > 500*time.Millisecond || off-unc > 0 || off+unc < 0 {
		t.Errorf("header clock offset %v ± %v: want an interval of under 500ms that contains 0", off, unc)
	}
	if strings.Contains(stderr, "not measured") {
		t.Errorf("unexpected warning: %s", stderr)
	}
}

// TestRunTimeRefBadURL: a --time-ref that is no http(s) URL is a usage error.
func TestRunTimeRefBadURL(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "run", "http://127.0.0.1:1/", "--pattern", "burst", "--count", "1",
		"--time-ref", "ftp://example", "--dry-run")
	if code != ExitUsage || !strings.Contains(stderr, "--time-ref") {
		t.Errorf("exit %d, %s; want 2 naming --time-ref", code, stderr)
	}
}
