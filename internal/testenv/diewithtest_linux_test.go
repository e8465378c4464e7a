//go:build linux

package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dieHelperEnv makes the test binary a helper process: it starts `sleep
// 300` (with DieWithTest when the value is "die"), prints its pid, and
// waits to be killed.
const dieHelperEnv = "TESTENV_DIE_HELPER"

func TestDieWithTestHelper(t *testing.T) {
	mode := os.Getenv(dieHelperEnv)
	if mode == "" {
		t.Skip("a helper process of TestDieWithTest")
	}
	cmd := exec.Command("sleep", "300")
	if mode == "die" {
		DieWithTest(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
	os.Stdin.Read(make([]byte, 1)) // until killed: stdin is held open
}

// alive reports whether pid is a process that has not ended (a zombie
// waiting for its reaper has ended).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestDieWithTest: a test process killed outright (as a timeout's panic
// ends one, without cleanups) takes the process it started with
// DieWithTest with it; one started without it lives on (the control,
// stopped here by its pid).
func TestDieWithTest(t *testing.T) {
	if os.Getenv(dieHelperEnv) != "" {
		t.Skip("in the helper")
	}
	for _, tt := range []struct {
		mode      string
		wantAlive bool
	}{
		{"die", false},
		{"plain", true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			helper := exec.Command(os.Args[0], "-test.run=^TestDieWithTestHelper$")
			helper.Env = append(os.Environ(), dieHelperEnv+"="+tt.mode)
			stdin, err := helper.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			out, err := helper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			pid, perr := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || perr != nil {
				helper.Process.Kill()
				helper.Wait()
				t.Fatalf("helper's first line %q: %v %v", line, err, perr)
			}
			t.Cleanup(func() {
				if alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			helper.Process.Kill()
			helper.Wait()
			// The signal is sent as the helper dies; the control's child
			// is looked at a while after.
			wait := 5 * time.Second
			if tt.wantAlive {
				wait = 300 * time.Millisecond
			}
			deadline := time.Now().Add(wait)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := alive(pid); got != tt.wantAlive {
				t.Errorf("the child of a killed test process alive %v, want %v", got, tt.wantAlive)
			}
		})
	}
}
