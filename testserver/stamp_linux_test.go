//go:build linux

package testserver

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestArrivalIsTheKernelStamp: on Linux with the real clock, a read is
// stamped with the socket's receive time, not when the server got to it.
func TestArrivalIsTheKernelStamp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !stampListener(ln) {
		t.Fatal("SO_TIMESTAMPNS not enabled on a TCP listener")
	}
	al := &arrivalListener{Listener: ln, now: time.Now, kernel: true}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := al.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := (<-accepted).(*arrivalConn)
	defer s.Close()
	if s.raw == nil {
		t.Fatal("SO_TIMESTAMPNS not enabled on a TCP connection")
	}
	// The kernel turns timestamping on a little after it is first asked
	// for (a deferred static key): wait until reads carry stamps.
	buf := make([]byte, 64)
	for range 100 {
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(buf); err != nil {
			t.Fatal(err)
		}
		if s.socket.Load() != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := time.Now()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	after := time.Now() // loopback delivers (and stamps) within the write
	time.Sleep(100 * time.Millisecond)
	n, err := s.Read(buf)
	if err != nil || n == 0 {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if got := s.socket.Load(); got < before.UnixNano() || got > after.UnixNano() {
		t.Errorf("socket arrival %d, want the kernel's receive time within the write [%d, %d]", got, before.UnixNano(), after.UnixNano())
	}
	if got := s.last.Load(); got <= after.UnixNano() {
		t.Errorf("read time %d, want when the server read it (after the write, %d)", got, after.UnixNano())
	}
	_ = c.Close()
	if _, err := s.Read(buf); err != io.EOF {
		t.Errorf("Read after the peer closed = %v, want io.EOF", err)
	}
}
