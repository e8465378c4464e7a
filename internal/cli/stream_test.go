package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// countRecord reads a record file line by line (it may hold millions of
// results) and checks that it holds n results with Seqs 0…n−1 each once,
// and an end line that counts them all as scheduled. It returns how many
// were sent.
func countRecord(t *testing.T, path string, n int) (sent int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]bool, n)
	var results int
	var end *record.End
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var line struct {
			Type    string `json:"type"`
			Seq     int64  `json:"seq"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch line.Type {
		case record.TypeResult:
			results++
			if line.Seq < 0 || line.Seq >= int64(n) || seen[line.Seq] {
				t.Fatalf("seq %d out of range or recorded twice", line.Seq)
			}
			seen[line.Seq] = true
			if line.Outcome != string(record.OutcomeNotSent) {
				sent++
			}
		case record.TypeEnd:
			end = new(record.End)
			if err := json.Unmarshal(sc.Bytes(), end); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if results != n || end == nil || end.Scheduled != int64(n) || end.Sent != sent {
		t.Fatalf("%s: %d results, end %+v; want %d results, each counted", path, results, end, n)
	}
	return sent
}

// TestRunStreamedBeyondAMillion runs the example against the
// reference server on loopback: 400000/s for 3 s, 1.2 M requests, over
// what one schedule could hold before schedules were streamed. It is
// accepted, exits 0 and records one result per scheduled request. It
// takes about a minute on two cores (the requests go out late: the engine
// and the server share them), so -short skips it. Under the race detector
// it takes nearly three, and the README's test command runs it there:
// unless RLPROBE_SOAK=1, the same command runs for 0.5 s (200,000
// requests) instead.
func TestRunStreamedBeyondAMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("about a minute: skipped with -short")
	}
	dur, n := "3s", 1_200_000
	if raceDetector && os.Getenv("RLPROBE_SOAK") == "" {
		dur, n = "500ms", 200_000
	}
	url, _ := startServe(t, "--algorithm", "token-bucket", "--rate", "1000000/s", "--capacity", "1000000", "--listen", "127.0.0.1:0")
	out := filepath.Join(t.TempDir(), "run.jsonl")
	start := time.Now()
	code, stdout, stderr := runCLI(t, nil, "run", url+"/", "--pattern", "steady", "--rate", "400000/s", "--duration", dur,
		"--max-rate", "1000000/s", "--max-requests", "2000000", "--out", out, "--seed", "1")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d after %v; stderr:\n%s", code, took, stderr)
	}
	sent := countRecord(t, out, n)
	t.Logf("exit 0 after %v; %d of %d sent", took.Round(time.Millisecond), sent, n)
	if want := fmt.Sprintf("%d of %d requests sent", n, n); sent != int64(n) || !strings.Contains(stdout, want) {
		t.Errorf("%d sent; summary:\n%s", sent, stdout)
	}
}

// TestRunStreamedCapsAndDryRun: a streamed plan over --max-requests is
// refused naming the cap, counted in closed form; the dry run counts it
// without building it.
func TestRunStreamedCapsAndDryRun(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"over the cap", []string{"--max-requests", "1000000"}, ExitUsage, "the plan sends 1200000 requests, over the cap --max-requests 1000000"},
		{"dry run", []string{"--max-requests", "2000000", "--dry-run", "--json"}, 0, `"requests": 1200000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "http://127.0.0.1:1/", "--pattern", "steady", "--rate", "400000/s", "--duration", "3s",
				"--max-rate", "1000000/s", "--out", filepath.Join(t.TempDir(), "x.jsonl")}, tc.args...)
			code, stdout, stderr := runCLI(t, nil, args...)
			if code != tc.wantCode || !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s%s", code, tc.wantCode, tc.want, stdout, stderr)
			}
		})
	}
}
