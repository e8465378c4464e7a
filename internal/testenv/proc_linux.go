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
func DieWithTest(cmd *exec.Cmd) { dieWithTestBy(cmd, syscall.SIGKILL) }

// dieWithTestBy is DieWithTest with another signal. A server that forks
// workers needs one it can act on: nginx's master stops its workers on
// SIGTERM, while after a SIGKILL of the master its workers live on and
// keep serving the port (nginx 1.22; TestDieWithTest/nginx shows both).
func dieWithTestBy(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
}
