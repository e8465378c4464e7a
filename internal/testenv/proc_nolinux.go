//go:build !linux

package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithTest does nothing outside Linux, which has no parent-death
// signal: a process the tests started outlives a test binary that panics.
func DieWithTest(*exec.Cmd) {}

// dieWithTestBy does nothing outside Linux.
func dieWithTestBy(*exec.Cmd, syscall.Signal) {}
