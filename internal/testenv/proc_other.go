//go:build !unix

package testenv

import "os/exec"

// setProcessGroup does nothing outside Unix.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the process itself outside Unix, where there is no
// SIGTERM and no process group to signal.
func signalGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }

// processGone reports false outside Unix: nothing is swept there.
func processGone(int) bool { return false }
