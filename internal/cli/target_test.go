package cli

import (
	"path/filepath"
	"testing"
	"time"
)

func TestRunStartAt(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), with503)
	out := filepath.Join(t.TempDir(), "at.jsonl")
	start := time.Now().Add(400 * time.Millisecond).UTC().Truncate(time.Millisecond)
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "2", "--start-at", start.Format(time.RFC3339Nano), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	for _, r := range run.Results {
		if at := run.Header.Start.Add(time.Duration(r.Sched)).Round(time.Microsecond); !at.Equal(start) {
			t.Errorf("seq %d scheduled at %v, want --start-at %v", r.Seq, at, start)
		}
	}
}
