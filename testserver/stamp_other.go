//go:build !linux

package testserver

import (
	"net"
	"syscall"
)

// stampSocket returns nil: kernel receive stamps are Linux's; reads are
// stamped in user space.
func stampSocket(net.Conn) syscall.RawConn { return nil }

func stampListener(net.Listener) bool { return false }

func readStamped(syscall.RawConn, []byte, []byte) (int, int64, error) {
	panic("unreachable")
}
