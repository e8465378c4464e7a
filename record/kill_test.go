//go:build unix

package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// helperEnv names the file TestHelperProcess writes; it is set only in the
// child process that TestKilledWriter starts.
const helperEnv = "RLPROBE_RECORD_HELPER_FILE"

// helperFlushed is what TestHelperProcess prints once its first 1000
// results are on disk.
const helperFlushed = "flushed 1000"

// TestHelperProcess is not a test: it is the child process of
// TestKilledWriter. It writes results to the file named by helperEnv as fast
// as it can, says so after the first 1000 are flushed, and goes on writing
// (up to a bound, then waits on stdin) until it is killed.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("the child process of TestKilledWriter")
	}
	f, err := Create(path, true)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, sampleHeader("killed"))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 100_000; i++ {
		if err := w.WriteResult(sampleResult(i)); err != nil {
			t.Fatal(err)
		}
		if i == 999 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			fmt.Println(helperFlushed)
		}
	}
	io.Copy(io.Discard, os.Stdin) // until killed
}

// TestKilledWriter kills a writing process with SIGKILL and checks that
// every complete line of what it left reads back.
func TestKilledWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	stdin, err := cmd.StdinPipe() // held open: the child never sees EOF
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	ready := false
	for !ready && sc.Scan() {
		ready = sc.Text() == helperFlushed
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if !ready {
		t.Fatalf("the helper process ended without flushing 1000 results: %v", err)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper process ended with %v, want killed by SIGKILL", err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Read(killed writer's file) = %v", err)
	}
	if len(run.Results) < 1000 {
		t.Fatalf("read %d results, want at least the 1000 flushed", len(run.Results))
	}
	for i, r := range run.Results {
		if r.Seq != int64(i) {
			t.Fatalf("result %d has seq %d: a complete line was lost", i, r.Seq)
		}
	}
	if complete := bytes.Count(data, []byte("\n")); complete != 1+len(run.Results) {
		t.Errorf("the file has %d complete lines but %d read back (header + results)", complete, 1+len(run.Results))
	}
	if run.End != nil {
		t.Errorf("End = %+v, want none from a killed writer", run.End)
	}
	t.Logf("killed after %d results (%d bytes); warnings %q", len(run.Results), len(data), run.Warnings)
}
