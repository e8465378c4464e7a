//go:build linux

package testserver

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampListener turns on SO_TIMESTAMPNS on a TCP listener: the sockets it
// accepts inherit it, and the kernel, which turns receive timestamping on
// a little after the first socket asks for it, stamps from the start of
// the first connection. It reports whether it did.
func stampListener(l net.Listener) bool {
	tl, ok := l.(*net.TCPListener)
	if !ok {
		return false
	}
	raw, err := tl.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return false
	}
	return true
}

// stampSocket turns on SO_TIMESTAMPNS on c, so that every read carries the
// kernel's receive time of the data it returns, and returns the
// connection's raw form to read it with; nil when that fails (the caller
// then stamps reads in user space).
func stampSocket(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return nil
	}
	return raw
}

// readStamped reads into p with recvmsg and returns the kernel's receive
// time (Unix ns) of the last segment it read, or 0 when none came with it.
// On loopback the stamp is taken as the sender's write enters the
// receiving stack, so it measures how the client spaced its writes.
func readStamped(raw syscall.RawConn, p, oob []byte) (n int, ns int64, err error) {
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		var oobn int
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, oob, 0)
		if rerr == unix.EAGAIN || rerr == unix.EINTR {
			return false
		}
		if rerr == nil && oobn > 0 {
			ns = parseStamp(oob[:oobn])
		}
		return true
	})
	switch {
	case err != nil:
		return 0, 0, &net.OpError{Op: "read", Net: "tcp", Err: err}
	case rerr != nil:
		return 0, 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("recvmsg", rerr)}
	case n == 0 && len(p) > 0:
		return 0, 0, io.EOF
	}
	return n, ns, nil
}

// parseStamp returns the SCM_TIMESTAMPNS time in oob (Unix ns), or 0.
func parseStamp(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano()
		}
	}
	return 0
}
