package probe

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	xproxy "golang.org/x/net/proxy"

	"github.com/rlprobe/rlprobe/record"
)

// This file holds everything the engine does for forward proxies: which
// target goes through which proxy (Proxy, NoProxy), the dial through it
// (an HTTP CONNECT tunnel, or SOCKS5), and the absolute-form request line
// an http target gets when it is sent to an HTTP proxy. Go's
// golang.org/x/net/http/httpproxy is not used: it never proxies loopback
// targets, and rlprobe proxies them when asked.

// Proxy chooses the forward proxy of each target. The zero value reaches
// every target directly.
//
// A proxy URL is http://[USER:PASS@]HOST[:PORT] (port 80 by default; a
// URL without a scheme is taken as http://), or socks5:// or socks5h://
// (port 1080 by default; socks5 resolves the target's host name here,
// socks5h lets the proxy resolve it). Through an HTTP proxy, https and h2c
// targets are reached through a CONNECT tunnel and plain http targets get
// absolute-form requests (GET http://host/path HTTP/1.1) sent to the proxy
// itself. USER:PASS become Proxy-Authorization: Basic (HTTP) or the
// username/password method (SOCKS5). HTTPS proxies (TLS to the proxy) are
// not supported.
type Proxy struct {
	// HTTP is the proxy of http:// targets, HTTPS the proxy of https://
	// targets; empty means direct.
	HTTP, HTTPS string
	// NoProxy lists the targets reached directly whatever the proxy, as
	// NO_PROXY does: comma- or space-separated host names (a name matches
	// itself and its subdomains; a leading "." or "*." changes nothing),
	// IP addresses and CIDR prefixes, each optionally with ":PORT" (then
	// only that port matches); "*" alone matches every target.
	NoProxy string
}

// For returns the proxy URL through which the target rawURL is reached
// ("" for a direct connection), or an error for a proxy URL it cannot use.
func (p Proxy) For(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	pr, err := p.route(u)
	if err != nil || pr == nil {
		return "", err
	}
	return pr.raw, nil
}

// proxyRoute is how one target is reached through its proxy.
type proxyRoute struct {
	raw   string // the proxy URL as given
	socks bool   // SOCKS5, else HTTP
	// remoteDNS (socks5h) sends the target's host name to the proxy.
	remoteDNS bool
	addr      string        // the proxy's host:port
	user      *url.Userinfo // credentials, or nil
	auth      string        // HTTP: the Proxy-Authorization value, or ""
	// absolute: the target is plain http (not h2c) behind an HTTP proxy:
	// requests go to the proxy in absolute form, without a tunnel.
	absolute bool
}

// route returns how target u is reached: nil for directly.
func (p Proxy) route(u *url.URL) (*proxyRoute, error) {
	raw := p.HTTP
	if strings.EqualFold(u.Scheme, "https") {
		raw = p.HTTPS
	}
	raw = strings.TrimSpace(raw)
	if raw == "" || noProxyMatch(p.NoProxy, u) {
		return nil, nil
	}
	return parseProxy(raw)
}

// parseProxy parses a proxy URL (see Proxy).
func parseProxy(raw string) (*proxyRoute, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("proxy %s is not a URL with a host", record.NewRedactor(nil, nil).URL(s))
	}
	pr := &proxyRoute{raw: s, user: u.User}
	port := "80"
	switch strings.ToLower(u.Scheme) {
	case "http":
	case "socks5", "socks5h":
		pr.socks, pr.remoteDNS, port = true, strings.EqualFold(u.Scheme, "socks5h"), "1080"
	case "https":
		return nil, fmt.Errorf("proxy %s: https:// proxies are not supported; use http:// (a CONNECT tunnel still carries https targets encrypted end to end) or socks5://",
			record.NewRedactor(nil, nil).URL(s))
	default:
		return nil, fmt.Errorf("proxy %s: the scheme must be http, socks5 or socks5h, not %s", record.NewRedactor(nil, nil).URL(s), u.Scheme)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	pr.addr = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil && !pr.socks {
		pass, _ := u.User.Password()
		pr.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	return pr, nil
}

// setProxy decides how target t is reached, once its URL is parsed.
func (t *target) setProxy(p Proxy) error {
	if p == (Proxy{}) {
		return nil
	}
	pr, err := p.route(t.url)
	if err != nil || pr == nil {
		return err
	}
	pr.absolute = !pr.socks && !t.tls && !t.h2c
	t.proxy = pr
	return nil
}

// noProxyMatch reports whether the NO_PROXY list list matches u.
func noProxyMatch(list string, u *url.URL) bool {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	ip, ipErr := netip.ParseAddr(host)
	for _, e := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		e = strings.ToLower(e)
		if e == "*" {
			return true
		}
		if pfx, err := netip.ParsePrefix(e); err == nil {
			if ipErr == nil && pfx.Contains(ip.Unmap()) {
				return true
			}
			continue
		}
		name, eport := e, ""
		if h, p, err := net.SplitHostPort(e); err == nil {
			name, eport = h, p
		}
		name = strings.Trim(name, "[]")
		if eport != "" && eport != port {
			continue
		}
		if a, err := netip.ParseAddr(name); err == nil {
			if ipErr == nil && a.Unmap() == ip.Unmap() {
				return true
			}
			continue
		}
		name = strings.TrimPrefix(strings.TrimPrefix(name, "*"), ".")
		name = strings.TrimSuffix(name, ".")
		if name != "" && (host == name || strings.HasSuffix(host, "."+name)) {
			return true
		}
	}
	return false
}

// requestTarget is the request line's target: absolute form for a
// request sent to an HTTP proxy, else the origin form (path?query).
func (t *target) requestTarget() string {
	if t.proxy != nil && t.proxy.absolute {
		return t.url.Scheme + "://" + t.url.Host + t.requestURI
	}
	return t.requestURI
}

// appendProxyHeaders appends the header lines a request sent to an HTTP
// proxy in absolute form carries (its credentials).
func (t *target) appendProxyHeaders(b []byte) []byte {
	if pr := t.proxy; pr != nil && pr.absolute && pr.auth != "" {
		b = append(b, "Proxy-Authorization: "...)
		b = append(b, pr.auth...)
		b = append(b, "\r\n"...)
	}
	return b
}

// proxied reports whether some target goes through a proxy: then the
// event loop, which dials and speaks to targets directly, is not used.
func (e *Engine) proxied() bool {
	for _, t := range e.targets {
		if t.proxy != nil {
			return true
		}
	}
	return false
}

// dialTarget opens a connection to t from src: directly, to its HTTP
// proxy (absolute-form requests), or a tunnel through its proxy (CONNECT
// or SOCKS5). Failures of the proxy itself have the error class
// record.ErrProxy.
func (e *Engine) dialTarget(ctx context.Context, t *target, src netip.Addr) (net.Conn, error) {
	pr := t.proxy
	if pr == nil {
		return e.dial(ctx, "tcp", t.addr, src)
	}
	if pr.socks {
		return e.dialSOCKS(ctx, t, src)
	}
	c, err := e.dial(ctx, "tcp", pr.addr, src)
	if err != nil {
		return nil, withClass(record.ErrProxy, fmt.Errorf("proxy %s: %w", pr.addr, err))
	}
	if pr.absolute {
		return c, nil
	}
	tc, err := connectTunnel(ctx, c, t.addr, pr.auth)
	if err != nil {
		_ = c.Close()
		return nil, withClass(record.ErrProxy, fmt.Errorf("proxy %s: %w", pr.addr, err))
	}
	return tc, nil
}

// maxConnectHead bounds the proxy's answer to CONNECT.
const maxConnectHead = 64 << 10

// connectTunnel asks the HTTP proxy on c for a tunnel to addr and returns
// the tunnel once the proxy accepted (any 2xx).
func connectTunnel(ctx context.Context, c net.Conn, addr, auth string) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	defer stop()
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: " + DefaultUserAgent + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	req += "\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, fmt.Errorf("CONNECT %s: %w", addr, ctxErr(ctx, err))
	}
	br := bufio.NewReaderSize(&limitedConn{Conn: c, left: maxConnectHead}, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, fmt.Errorf("CONNECT %s: reading the answer: %w", addr, ctxErr(ctx, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("CONNECT %s: the proxy answered %s", addr, resp.Status)
	}
	if !stop() { // ctx ended meanwhile: the deadline is in the past
		return nil, fmt.Errorf("CONNECT %s: %w", addr, context.Cause(ctx))
	}
	_ = c.SetDeadline(time.Time{})
	if n := br.Buffered(); n > 0 { // the target spoke first: keep its bytes
		b, _ := br.Peek(n)
		return &tunnelConn{Conn: c, pre: append([]byte(nil), b...)}, nil
	}
	return c, nil
}

// ctxErr prefers ctx's error to err once ctx has ended (a deadline set in
// the past reads as a timeout).
func ctxErr(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return cerr
	}
	return err
}

// limitedConn reads at most left bytes from its connection.
type limitedConn struct {
	net.Conn
	left int
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("answer longer than %d bytes", maxConnectHead)
	}
	p = p[:min(len(p), c.left)]
	n, err := c.Conn.Read(p)
	c.left -= n
	return n, err
}

// tunnelConn is a tunnel whose first bytes the CONNECT answer's reader
// took: it returns pre before reading from its connection.
type tunnelConn struct {
	net.Conn
	pre []byte
}

func (c *tunnelConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// dialSOCKS opens a tunnel to t through its SOCKS5 proxy, whose TCP
// connection is dialled with the engine's DialFunc from src.
func (e *Engine) dialSOCKS(ctx context.Context, t *target, src netip.Addr) (net.Conn, error) {
	pr := t.proxy
	var auth *xproxy.Auth
	if pr.user != nil {
		pass, _ := pr.user.Password()
		auth = &xproxy.Auth{User: pr.user.Username(), Password: pass}
	}
	d, err := xproxy.SOCKS5("tcp", pr.addr, auth, srcDialer{dial: e.dial, src: src})
	if err != nil {
		return nil, withClass(record.ErrProxy, fmt.Errorf("proxy %s: %w", pr.addr, err))
	}
	addr := t.addr
	if !pr.remoteDNS {
		host, port, _ := net.SplitHostPort(addr)
		if _, perr := netip.ParseAddr(host); perr != nil {
			ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err // a dns error
			}
			if len(ips) == 0 {
				return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
			}
			addr = net.JoinHostPort(ips[0].Unmap().String(), port)
		}
	}
	c, err := d.(xproxy.ContextDialer).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, withClass(record.ErrProxy, fmt.Errorf("proxy %s: %w", pr.addr, err))
	}
	return c, nil
}

// srcDialer adapts a DialFunc bound to a source address to the dialer
// interfaces of golang.org/x/net/proxy.
type srcDialer struct {
	dial DialFunc
	src  netip.Addr
}

func (d srcDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d srcDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.dial(ctx, network, addr, d.src)
}
