//go:build unix

package testenv

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in a process group of its own, so stopping it
// also stops the workers it forks (nginx).
func setProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends SIGTERM (or SIGKILL when kill) to cmd's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// processGone reports whether no process has the given pid (a zombie
// counts as present until reaped; a pid reused by another process counts
// as present, which keeps what may still be in use).
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
