//go:build linux

package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithTest makes cmd, when started, get SIGKILL as soon as the test
// process ends, however it ends: a test binary that panics (a -timeout
// reached) runs no t.Cleanup, and the servers and built rlprobe processes
// its tests started would outlive it. It keeps what cmd.SysProcAttr
// already asks for (a process group of its own). Linux only, by the
// parent-death signal; elsewhere it does nothing.
func DieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
