//go:build linux

package probe

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rlprobe/rlprobe/record"
)

// TestHeaderBombKeepsTheProberSmall runs `rlprobe run` (built without
// -race, in a child process) against a server that answers each request
// of a burst of 20 with a 100 MB header line: every result is
// header-too-large, the exit is 0 or 3, and the prober's peak resident
// memory stays under 100 MB (it grew to 3.9 GB when the head was read
// without a bound).
func TestHeaderBombKeepsTheProberSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rlprobe")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rlprobe")
	build := exec.Command("go", "build", "-o", bin, "../cmd/rlprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	srv := startAnswerServer(t, func(c net.Conn, _ int64) error { return writeHugeHead(c, 100<<20) })
	out := filepath.Join(dir, "bomb.jsonl")
	cmd := exec.Command(bin, "run", srv.url(), "--pattern", "burst", "--count", "20", "--out", out, "--yes")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	combined, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code != 3 {
		t.Fatalf("rlprobe run: %v (exit %d), want exit 0 or 3\n%s", err, code, combined)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	peak := ru.Maxrss << 10 // kilobytes on Linux
	t.Logf("exit %d, peak RSS %.1f MB", code, float64(peak)/(1<<20))
	if peak > 100<<20 {
		t.Errorf("peak RSS %.1f MB, want ≤ 100 MB", float64(peak)/(1<<20))
	}

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	classes := make(map[string]int)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record.Result
		if !strings.Contains(sc.Text(), `"type":"result"`) {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		classes[string(r.Outcome)+" "+r.Err]++
	}
	if want := map[string]int{"error " + record.ErrHeaderTooLarge: 20}; len(classes) != 1 || classes["error "+record.ErrHeaderTooLarge] != 20 {
		t.Errorf("results %v, want %v\n%s", classes, want, combined)
	}
}
