package testserver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// MemListener is an in-memory net.Listener: its Dial hands the server one
// end of a net.Pipe and returns the other. No socket, no port, no kernel:
// a server on a MemListener runs inside a testing/synctest bubble (create
// the listener inside the bubble). Safe for concurrent use.
type MemListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	port      atomic.Uint32
}

var _ net.Listener = (*MemListener)(nil)

// memAddr is the address of a MemListener and of its connections.
type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// MemListenerAddr is the address a MemListener reports; URLs built on it
// ("http://rlprobe.mem:80") are only reachable through its Dial.
const MemListenerAddr = "rlprobe.mem:80"

// ErrListenerClosed is returned by Dial and Accept after Close.
var ErrListenerClosed = errors.New("testserver: in-memory listener closed")

// NewMemListener returns an open in-memory listener.
func NewMemListener() *MemListener {
	return &MemListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial.
func (l *MemListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, ErrListenerClosed
	}
}

// Close stops Accept and Dial; connections already made stay open.
func (l *MemListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr returns MemListenerAddr.
func (l *MemListener) Addr() net.Addr { return memAddr(MemListenerAddr) }

// Dial connects to the listener's server, whatever network and addr say.
// The server sees the connection coming from src (127.0.0.1 when src is
// the zero Addr) with a port unique to the listener, so a KeyIP route keys
// requests by src. It waits until the server accepts, ctx ends or the
// listener closes. Its signature is that of the probe engine's DialFunc.
func (l *MemListener) Dial(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error) {
	if !src.IsValid() {
		src = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	port := uint16(1024 + l.port.Add(1)%64000)
	client, server := net.Pipe()
	srcAddr := net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, port))
	sc := &addrConn{Conn: server, local: memAddr(MemListenerAddr), remote: srcAddr}
	cc := &addrConn{Conn: client, local: srcAddr, remote: memAddr(MemListenerAddr)}
	select {
	case l.conns <- sc:
		return cc, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, ErrListenerClosed
}

// addrConn is a net.Conn with chosen addresses.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *addrConn) LocalAddr() net.Addr  { return c.local }
func (c *addrConn) RemoteAddr() net.Addr { return c.remote }
