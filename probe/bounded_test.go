package probe

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlprobe/rlprobe/record"
)

func TestReadHeadIsBounded(t *testing.T) {
	const limit = 64
	tests := []struct {
		name, in string
		wantHead string // "" with wantErr
		wantErr  string // a class, or "eof"
	}{
		{"fits", "HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody", "HTTP/1.1 200 OK\r\nA: b\r\n\r\n", ""},
		{"bare LF", "HTTP/1.1 200 OK\nA: b\n\nbody", "HTTP/1.1 200 OK\nA: b\n\n", ""},
		{"exactly the limit", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", limit-24) + "\r\n\r\n", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", limit-24) + "\r\n\r\n", ""},
		{"one over", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", limit-23) + "\r\n\r\n", "", record.ErrHeaderTooLarge},
		{"one endless line", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("x", 100000), "", record.ErrHeaderTooLarge},
		{"many lines", "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", 1000) + "\r\n", "", record.ErrHeaderTooLarge},
		{"cut short", "HTTP/1.1 200 OK\r\nA: b\r\n", "", "eof"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			head, err := readHead(br, limit)
			switch {
			case tt.wantErr == "eof":
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("readHead = %q, %v; want io.ErrUnexpectedEOF", head, err)
				}
			case tt.wantErr != "":
				if err == nil || classify(err) != tt.wantErr {
					t.Errorf("readHead = %q, %v; want class %s", head, err, tt.wantErr)
				}
			case err != nil || string(head) != tt.wantHead:
				t.Errorf("readHead = %q, %v; want %q", head, err, tt.wantHead)
			}
		})
	}
}

func TestInterimHead(t *testing.T) {
	for in, want := range map[string]bool{
		"HTTP/1.1 100 Continue\r\n\r\n":               true,
		"HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n": true,
		"HTTP/1.0 100\r\n\r\n":                        true,
		"HTTP/1.1 101 Switching Protocols\r\n\r\n":    false,
		"HTTP/1.1 200 OK\r\n\r\n":                     false,
		"HTTP/1.1 1000\r\n\r\n":                       false,
		"garbage\r\n\r\n":                             false,
	} {
		if got := interimHead([]byte(in)); got != want {
			t.Errorf("interimHead(%q) = %v, want %v", in, got, want)
		}
	}
}

// answerServer answers every request on a loopback listener with answer(n),
// n counting connections from 1, and counts the connections that ended.
type answerServer struct {
	ln     net.Listener
	conns  atomic.Int64
	closed atomic.Int64
	wg     sync.WaitGroup
}

func startAnswerServer(t *testing.T, answer func(c net.Conn, n int64) error) *answerServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &answerServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := s.conns.Add(1)
			s.wg.Go(func() {
				defer s.closed.Add(1)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if answer(c, n) != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *answerServer) url() string { return "http://" + s.ln.Addr().String() + "/" }

// writeHugeHead writes a status line and one header line of n bytes, then
// the end of the head and an empty body.
func writeHugeHead(c net.Conn, n int) error {
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Bomb: "); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := c.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	_, err := io.WriteString(c, "\r\n\r\n")
	return err
}

func TestHeadOverTheCapIsAnErrorAndClosesTheConnection(t *testing.T) {
	for _, size := range []int{5000, 3 << 20} { // larger than the buffer, larger than the default cap
		srv := startAnswerServer(t, func(c net.Conn, _ int64) error { return writeHugeHead(c, size) })
		opt := Options{URLs: []string{srv.url()}, AbortAfterErrors: -1}
		if size < DefaultMaxHeaderBytes {
			opt.MaxHeaderBytes = 4096
		}
		e := newEngine(t, opt)
		results := mustRun(t, e, steady(2, 0, 50*ms))
		for i, r := range results {
			if r.Outcome != record.OutcomeError || r.Err != record.ErrHeaderTooLarge {
				t.Errorf("size %d: results[%d] = %s %s %q, want error header-too-large", size, i, r.Outcome, r.Err, r.ErrMsg)
			}
		}
		if got := srv.conns.Load(); got != 2 {
			t.Errorf("size %d: server accepted %d connections, want 2 (each closed after its head)", size, got)
		}
	}
}

func TestHeadWithinTheCapIsRead(t *testing.T) {
	// 5000 bytes: more than the lean parser's buffer, so net/http's reader
	// reads it, within the cap.
	srv := startAnswerServer(t, func(c net.Conn, _ int64) error { return writeHugeHead(c, 5000) })
	e := newEngine(t, Options{URLs: []string{srv.url()}})
	results := mustRun(t, e, steady(3, 0, 50*ms))
	for i, r := range results {
		if r.Outcome != record.OutcomeResponse || r.Status != 200 {
			t.Errorf("results[%d] = %s %d %s %q, want a 200 response", i, r.Outcome, r.Status, r.Err, r.ErrMsg)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1 (kept alive)", got)
	}
}

func TestBodyOverTheCapIsAResponse(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		body := strings.Repeat("b", 10000)
		srv := startAnswerServer(t, func(c net.Conn, _ int64) error {
			var err error
			if chunked {
				_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2710\r\n"+body+"\r\n0\r\n\r\n")
			} else {
				_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n"+body)
			}
			return err
		})
		e := newEngine(t, Options{URLs: []string{srv.url()}, MaxBodyBytes: 1000})
		results := mustRun(t, e, steady(2, 0, 50*ms))
		for i, r := range results {
			if r.Outcome != record.OutcomeResponse || r.Status != 200 {
				t.Errorf("chunked=%v: results[%d] = %s %d %s %q, want a 200 response", chunked, i, r.Outcome, r.Status, r.Err, r.ErrMsg)
			}
		}
		if got := srv.conns.Load(); got != 2 {
			t.Errorf("chunked=%v: server accepted %d connections, want 2 (not reused past the cap)", chunked, got)
		}
	}
}

func TestInterimResponsesAreSkipped(t *testing.T) {
	srv := startAnswerServer(t, func(c net.Conn, _ int64) error {
		_, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return err
	})
	e := newEngine(t, Options{URLs: []string{srv.url()}})
	results := mustRun(t, e, steady(2, 0, 50*ms))
	for i, r := range results {
		if r.Outcome != record.OutcomeResponse || r.Status != 200 {
			t.Errorf("results[%d] = %s %d %s %q, want a 200 response", i, r.Outcome, r.Status, r.Err, r.ErrMsg)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1 (kept alive)", got)
	}
}

func TestHTTP2HeadOverTheCap(t *testing.T) {
	big := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Has("many") { // many small fields: over the list size
			for i := range 200 {
				w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("a", 40))
			}
			return
		}
		w.Header().Set("X-Big", strings.Repeat("a", 10000)) // one field over the cap
	}
	for _, tc := range []struct{ mode, query string }{{"", ""}, {"", "?many"}, {RaceSinglePacket, ""}, {RaceSinglePacket, "?many"}} {
		mode := tc.mode
		t.Run("mode="+mode+tc.query, func(t *testing.T) {
			srv := startServer(t, big, func(s *httptest.Server) {
				s.EnableHTTP2 = true
				s.StartTLS()
			})
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			e := newEngine(t, Options{URLs: []string{srv.URL + "/" + tc.query}, TLSConfig: &tls.Config{RootCAs: roots},
				RaceMode: mode, MaxHeaderBytes: 4096, AbortAfterErrors: -1})
			sends := steady(2, 0, 50*ms)
			if mode != "" {
				sends = batch(2, 1)
			}
			results := mustRun(t, e, sends)
			for i, r := range results {
				if r.Outcome != record.OutcomeError || r.Err != record.ErrHeaderTooLarge {
					t.Errorf("results[%d] = %s %s %q, want error header-too-large", i, r.Outcome, r.Err, r.ErrMsg)
				}
			}
			if _, protos := srv.seen(); len(protos) != 2 || protos[0] != "HTTP/2.0" {
				t.Errorf("server saw %v, want HTTP/2.0 twice", protos)
			}
		})
	}
}
