package probe

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/record"
)

func TestNoProxyMatch(t *testing.T) {
	tests := []struct {
		list, target string
		want         bool
	}{
		{"", "http://127.0.0.1:8080/", false},
		{"*", "http://127.0.0.1:8080/", true},
		{"127.0.0.1", "http://127.0.0.1:8080/", true},
		{"127.0.0.2", "http://127.0.0.1:8080/", false},
		{"127.0.0.0/8", "http://127.0.0.9/", true},
		{"10.0.0.0/8, ::1", "http://[::1]:9/", true},
		{"127.0.0.1:8080", "http://127.0.0.1:8080/", true},
		{"127.0.0.1:9090", "http://127.0.0.1:8080/", false},
		{"localhost:443", "https://localhost/", true},
		{"example.com", "https://api.example.com/", true},
		{".example.com", "https://example.com/", true},
		{"*.example.com", "https://a.b.example.com/", true},
		{"example.com", "https://notexample.com/", false},
		{"EXAMPLE.com", "http://Example.COM./x", true},
		{"foo bar,localhost", "http://localhost:1/", true},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.target)
		if got := noProxyMatch(tt.list, u); got != tt.want {
			t.Errorf("noProxyMatch(%q, %s) = %v, want %v", tt.list, tt.target, got, tt.want)
		}
	}
}

func TestProxyFor(t *testing.T) {
	p := Proxy{HTTP: "127.0.0.1:3128", HTTPS: "socks5://u:p@127.0.0.1:1080", NoProxy: "direct.test"}
	for _, tt := range []struct{ target, want string }{
		{"http://127.0.0.1/", "http://127.0.0.1:3128"}, // loopback is proxied when asked
		{"https://a.test/", "socks5://u:p@127.0.0.1:1080"},
		{"https://direct.test/", ""},
	} {
		if got, err := p.For(tt.target); err != nil || got != tt.want {
			t.Errorf("For(%s) = %q, %v; want %q", tt.target, got, err, tt.want)
		}
	}
	for _, bad := range []string{"https://proxy.test", "ftp://proxy.test", "http://"} {
		_, err := New(Options{URLs: []string{"http://a.test/"}, Proxy: Proxy{HTTP: bad}})
		if !errors.Is(err, ErrUsage) {
			t.Errorf("proxy %q: New error = %v, want ErrUsage", bad, err)
		}
	}
}

// TestAbsoluteFormThroughHTTPProxy: an http target behind an HTTP proxy
// gets absolute-form requests, sent to the proxy with its credentials; the
// target itself is never dialled.
func TestAbsoluteFormThroughHTTPProxy(t *testing.T) {
	var mu sync.Mutex
	var lines, auths []string
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lines = append(lines, r.RequestURI)
		auths = append(auths, r.Header.Get("Proxy-Authorization"))
		mu.Unlock()
	})
	n := &pipeNet{handlers: map[string]http.Handler{"proxy.test:3128": proxy}}
	e := newEngine(t, Options{URLs: []string{"http://a.test/x?y=1"}, Dial: n.Dial,
		Proxy: Proxy{HTTP: "http://user:secret@proxy.test:3128"}})
	results := mustRun(t, e, steady(2, 0, 10*ms))
	for i, r := range results {
		if r.Status != 200 {
			t.Errorf("results[%d] = %s %d %s", i, r.Outcome, r.Status, r.ErrMsg)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"http://a.test/x?y=1", "http://a.test/x?y=1"}; !slices.Equal(lines, want) {
		t.Errorf("the proxy saw request targets %q, want %q", lines, want)
	}
	if len(auths) == 0 || auths[0] != "Basic dXNlcjpzZWNyZXQ=" {
		t.Errorf("Proxy-Authorization = %q", auths)
	}
}

// waitLog waits until the proxy's log holds every string in want.
func waitLog(t *testing.T, path string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		missing := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.Contains(string(b), s) })
		if len(missing) == 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's log lacks %q:\n%s", missing, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func port(t *testing.T, rawURL string) int {
	t.Helper()
	u, _ := url.Parse(rawURL)
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestThroughTinyproxy sends http targets (absolute form) and https
// targets (a CONNECT tunnel, HTTP/2 and HTTP/1.1 inside) through a real
// tinyproxy on loopback: its log shows every request; a target NO_PROXY
// names is reached directly.
func TestThroughTinyproxy(t *testing.T) {
	plain := startServer(t, nil, nil)
	secure := startServer(t, nil, func(s *httptest.Server) {
		s.EnableHTTP2 = true
		s.StartTLS()
	})
	h2c := startServer(t, nil, func(s *httptest.Server) {
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Start()
	})
	bypassed := startServer(t, nil, nil)
	proxyURL, logPath := testenv.StartTinyproxy(t, port(t, secure.URL), port(t, h2c.URL))
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	px := Proxy{HTTP: proxyURL, HTTPS: proxyURL, NoProxy: "localhost"}
	bypassURL := strings.Replace(bypassed.URL, "127.0.0.1", "localhost", 1)

	for _, tt := range []struct {
		name, url, mode string
		srv             *seenServer
		proto           string
		h2c             bool
	}{
		{"http", plain.URL + "/plain", "", plain, "HTTP/1.1", false},
		{"https-h2", secure.URL + "/tunnel-h2", "", secure, "HTTP/2.0", false},
		{"https-last-byte", secure.URL + "/tunnel-h1", RaceLastByte, secure, "HTTP/1.1", false},
		{"h2c", h2c.URL + "/h2c", "", h2c, "HTTP/2.0", true}, // a tunnel: prior knowledge cannot be forwarded
		{"no-proxy", bypassURL + "/direct", "", bypassed, "HTTP/1.1", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := tt.srv.seen()
			e := newEngine(t, Options{URLs: []string{tt.url}, Proxy: px, RaceMode: tt.mode, H2C: tt.h2c, TLSConfig: &tls.Config{RootCAs: roots}})
			sends := steady(3, 0, 10*ms)
			if tt.mode != "" {
				sends = batch(3, 1)
			}
			for i, r := range mustRun(t, e, sends) {
				if r.Status != 200 {
					t.Errorf("results[%d] = %s %d %s %s", i, r.Outcome, r.Status, r.Err, r.ErrMsg)
				}
			}
			if n := e.loopRuns.Load(); n != 0 && tt.name != "no-proxy" {
				t.Errorf("the event loop ran %d times through a proxy, want never", n)
			}
			_, protos := tt.srv.seen()
			if got := protos[len(before):]; !slices.Equal(got, slices.Repeat([]string{tt.proto}, 3)) {
				t.Errorf("target saw %v, want 3 × %s", got, tt.proto)
			}
		})
	}
	log := waitLog(t, logPath, "GET "+plain.URL+"/plain", "CONNECT 127.0.0.1:"+strconv.Itoa(port(t, secure.URL)),
		"CONNECT 127.0.0.1:"+strconv.Itoa(port(t, h2c.URL)))
	if strings.Contains(log, "/direct") || strings.Contains(log, "localhost:"+strconv.Itoa(port(t, bypassed.URL))) {
		t.Errorf("the proxy saw the target NO_PROXY names:\n%s", log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "Request (file descriptor") {
			t.Logf("tinyproxy: %s", l)
		}
	}
}

// TestProxyRefusalIsClassified: tinyproxy refuses a CONNECT to a port it
// was not told of; the error class is proxy.
func TestProxyRefusalIsClassified(t *testing.T) {
	secure := startServer(t, nil, func(s *httptest.Server) { s.StartTLS() })
	proxyURL, _ := testenv.StartTinyproxy(t, 1) // CONNECT to port 1 only
	e := newEngine(t, Options{URLs: []string{secure.URL}, Proxy: Proxy{HTTPS: proxyURL}, TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	now := time.Now()
	results, err := e.Run(t.Context(), now, now, steady(1, 0, 0), nil)
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("Run error = %v, want ErrAborted", err)
	}
	if r := results[0]; r.Err != record.ErrProxy || !strings.Contains(r.ErrMsg, "403") {
		t.Errorf("result = %s %s (%s), want error proxy with the proxy's 403", r.Outcome, r.Err, r.ErrMsg)
	}
}

// TestThroughSOCKS5: a SOCKS5 proxy (with username/password) carries http
// and https targets.
func TestThroughSOCKS5(t *testing.T) {
	plain := startServer(t, nil, nil)
	secure := startServer(t, nil, func(s *httptest.Server) { s.StartTLS() })
	socks, seen := startSOCKS5(t, "u", "pw")
	for _, target := range []string{plain.URL + "/s", secure.URL + "/s"} {
		e := newEngine(t, Options{URLs: []string{target}, TLSConfig: &tls.Config{InsecureSkipVerify: true},
			Proxy: Proxy{HTTP: "socks5://u:pw@" + socks, HTTPS: "socks5h://u:pw@" + socks}})
		for i, r := range mustRun(t, e, steady(2, 0, 10*ms)) {
			if r.Status != 200 {
				t.Errorf("%s: results[%d] = %s %d %s %s", target, i, r.Outcome, r.Status, r.Err, r.ErrMsg)
			}
		}
	}
	want := []string{strings.TrimPrefix(plain.URL, "http://"), strings.TrimPrefix(secure.URL, "https://")}
	if got := seen(); len(got) < 2 || !slices.Contains(got, want[0]) || !slices.Contains(got, want[1]) {
		t.Errorf("the SOCKS5 proxy tunnelled to %v, want both of %v", got, want)
	}
}

// startSOCKS5 starts a minimal SOCKS5 proxy (RFC 1928, CONNECT only,
// username/password of RFC 1929) on loopback and returns its address and
// the destinations it connected to.
func startSOCKS5(t *testing.T, user, pass string) (string, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var dests []string
	serve := func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 512)
		if _, err := io.ReadFull(c, b[:2]); err != nil {
			return
		}
		if _, err := io.ReadFull(c, b[:b[1]]); err != nil || !slices.Contains(b[:b[1]], 2) {
			return
		}
		c.Write([]byte{5, 2})
		// RFC 1929: ver, ulen, user, plen, pass
		if _, err := io.ReadFull(c, b[:2]); err != nil {
			return
		}
		u := make([]byte, b[1])
		io.ReadFull(c, u)
		io.ReadFull(c, b[:1])
		p := make([]byte, b[0])
		io.ReadFull(c, p)
		if string(u) != user || string(p) != pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
		if _, err := io.ReadFull(c, b[:4]); err != nil || b[1] != 1 {
			return
		}
		var host string
		switch b[3] {
		case 1:
			io.ReadFull(c, b[:4])
			host = net.IP(b[:4]).String()
		case 3:
			io.ReadFull(c, b[:1])
			n := int(b[0])
			io.ReadFull(c, b[:n])
			host = string(b[:n])
		default:
			return
		}
		io.ReadFull(c, b[:2])
		dest := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(b[:2]))))
		mu.Lock()
		dests = append(dests, dest)
		mu.Unlock()
		up, err := net.Dial("tcp", dest)
		if err != nil {
			c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
			return
		}
		defer up.Close()
		c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
		_ = c.SetDeadline(time.Time{})
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(dests)
	}
}
