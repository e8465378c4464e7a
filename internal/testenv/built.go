package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// builtPrefix names the directories BuildRlprobe builds into:
// builtPrefix + the test process's pid + "-" + a random suffix, in the
// system temporary directory.
const builtPrefix = "rlprobe-test-bin-"

// built is the rlprobe binary of this test process, built once.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// BuildRlprobe returns the path of the rlprobe binary, built once per test
// process (without -race: the real-time tests that run it need their
// cores for waiting, not for the race detector) into a directory of its
// own. TestMain removes it after the tests (RemoveBuilt); a test process
// killed outright cannot, so building also removes the directories of
// earlier test processes that are gone (by the pid in their names; only
// directories of this name, which only BuildRlprobe makes).
func BuildRlprobe(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		sweepBuilt(os.TempDir())
		built.dir, built.err = os.MkdirTemp("", builtPrefix+strconv.Itoa(os.Getpid())+"-")
		if built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "rlprobe")
		cmd := exec.Command("go", "build", "-o", built.bin, "github.com/rlprobe/rlprobe/cmd/rlprobe")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("testenv: go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// RemoveBuilt removes the binary BuildRlprobe built, if it did; TestMain
// calls it after m.Run.
func RemoveBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// sweepBuilt removes the build directories in dir whose test process is
// gone, and reports how many it removed.
func sweepBuilt(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), builtPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || !processGone(pid) {
			continue
		}
		if os.RemoveAll(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n
}
