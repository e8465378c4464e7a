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
// 300` (with DieWithTest when the value is "die", without it when
// "plain"), or nginx through StartNginx ("nginx"; "nginx-kill" gives its
// master SIGKILL instead of nginxDeathSignal), prints the started
// process's pid, and waits to be killed.
const dieHelperEnv = "TESTENV_DIE_HELPER"

// helperNginxConf is the smallest nginx the helper serves.
const helperNginxConf = `events {}
http {
    access_log off;
    server { listen 127.0.0.1:{{PORT}}; location / { return 200 "ok"; } }
}
`

func TestDieWithTestHelper(t *testing.T) {
	mode := os.Getenv(dieHelperEnv)
	if mode == "" {
		t.Skip("a helper process of TestDieWithTest")
	}
	var pid int
	switch mode {
	case "nginx", "nginx-kill":
		if mode == "nginx-kill" {
			nginxDeathSignal = syscall.SIGKILL
		}
		_, master := startNginx(t, helperNginxConf)
		pid = master.cmd.Process.Pid
	default:
		cmd := exec.Command("sleep", "300")
		if mode == "die" {
			DieWithTest(cmd)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid = cmd.Process.Pid
	}
	os.Stdout.WriteString(strconv.Itoa(pid) + "\n")
	os.Stdin.Read(make([]byte, 1)) // until killed: stdin is held open
}

// children returns the pids whose parent is pid, waiting up to 5 s for
// the first (nginx forks its workers after it listens).
func children(t *testing.T, pid int) []int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var kids []int
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			p, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			// After the command's ")": " state ppid ...".
			if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
				kids = append(kids, p)
			}
		}
		if len(kids) > 0 || time.Now().After(deadline) {
			return kids
		}
	}
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
// stopped here by its pid). An nginx started by StartNginx goes with its
// workers; given SIGKILL instead (the control), its workers live on.
func TestDieWithTest(t *testing.T) {
	if os.Getenv(dieHelperEnv) != "" {
		t.Skip("in the helper")
	}
	for _, tt := range []struct {
		mode      string
		wantAlive bool // of the watched processes: sleep, or nginx's workers
	}{
		{"die", false},
		{"plain", true},
		{"nginx", false},
		{"nginx-kill", true},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			nginx := strings.HasPrefix(tt.mode, "nginx")
			if nginx {
				lookBinary(t, "nginx", NginxPath)
			}
			helper := exec.Command(os.Args[0], "-test.run=^TestDieWithTestHelper$")
			// What the helper's nginx leaves in its temp dir goes with ours.
			helper.Env = append(os.Environ(), dieHelperEnv+"="+tt.mode, "TMPDIR="+t.TempDir())
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
			watch := []int{pid}
			if nginx {
				if watch = children(t, pid); len(watch) == 0 {
					t.Errorf("nginx master %d forked no worker within 5 s", pid)
				}
				watch = append(watch, pid)
			}
			t.Cleanup(func() {
				for _, p := range watch {
					if alive(p) {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
			})
			helper.Process.Kill()
			helper.Wait()
			// The signal is sent as the helper dies; the control's
			// processes are looked at a while after.
			wait := 5 * time.Second
			if tt.wantAlive {
				wait = 300 * time.Millisecond
			}
			deadline := time.Now().Add(wait)
			for anyAlive(watch, nginx && tt.wantAlive) != tt.wantAlive && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if tt.wantAlive {
				time.Sleep(time.Until(deadline))
			}
			if got := anyAlive(watch, nginx && tt.wantAlive); got != tt.wantAlive {
				t.Errorf("processes %v started by a killed test process: alive %v, want %v", watch, got, tt.wantAlive)
			}
		})
	}
}

// anyAlive reports whether any of pids is alive; with workersOnly, the
// last (nginx's master, which a SIGKILL ends in either case) is left out.
func anyAlive(pids []int, workersOnly bool) bool {
	if workersOnly {
		pids = pids[:len(pids)-1]
	}
	for _, p := range pids {
		if alive(p) {
			return true
		}
	}
	return false
}
