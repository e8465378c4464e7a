//go:build unix

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepBuilt: building removes the build directories of test
// processes that are gone, and nothing else: not this process's, not a
// live process's, not another name's, not a file.
func TestSweepBuilt(t *testing.T) {
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	pid := func(p int) string { return strconv.Itoa(p) }

	dir := t.TempDir()
	tests := []struct {
		name     string
		file     bool
		wantGone bool
	}{
		{builtPrefix + pid(ended.Process.Pid) + "-123", false, true},
		{builtPrefix + pid(os.Getpid()) + "-456", false, false},
		{builtPrefix + pid(live.Process.Pid) + "-789", false, false},
		{builtPrefix + "x1-1", false, false},
		{builtPrefix + pid(ended.Process.Pid), false, false}, // no suffix: not a name it makes
		{builtPrefix + pid(ended.Process.Pid) + "-file", true, false},
		{"rlprobe-cli-test-" + pid(ended.Process.Pid) + "-1", false, false},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		var err error
		if tt.file {
			err = os.WriteFile(p, nil, 0o644)
		} else if err = os.Mkdir(p, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(p, "rlprobe"), []byte("binary"), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := sweepBuilt(dir); n != 1 {
		t.Errorf("sweepBuilt removed %d, want 1", n)
	}
	for _, tt := range tests {
		_, err := os.Stat(filepath.Join(dir, tt.name))
		if gone := os.IsNotExist(err); gone != tt.wantGone {
			t.Errorf("%s: gone %v, want %v", tt.name, gone, tt.wantGone)
		}
	}
}
