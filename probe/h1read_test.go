package probe

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLeanHead(t *testing.T) {
	captured := []string{"Ratelimit", "Date", "X-Rlprobe-Arrival"}
	const next = "HTTP/1.1 200 OK\r\n" // what follows the head must stay unread
	tests := []struct {
		name   string
		method string
		in     string
		want   *h1Head // nil: the full parser must take it, nothing consumed
	}{
		{"common", "GET", "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 3\r\n\r\nok\n",
			&h1Head{status: 200, length: 3}},
		{"captured fields keep the server's first spelling of their name and every value", "GET",
			"HTTP/1.1 429 Too Many Requests\r\nratelimit: a\r\nDATE: d\r\nRateLimit:  b \r\nRatelimit: c\r\nContent-Length: 0\r\n\r\n",
			&h1Head{status: 429, header: http.Header{"ratelimit": {"a", "b", "c"}, "DATE": {"d"}}}},
		{"arrival echo", "POST", "HTTP/1.1 200 OK\r\nX-Rlprobe-Arrival: 123\r\nContent-Length: 0\r\n\r\n",
			&h1Head{status: 200, header: http.Header{"X-Rlprobe-Arrival": {"123"}}, arrival: []byte("123")}},
		{"decision number", "GET", "HTTP/1.1 200 OK\r\nX-Rlprobe-Decision: 42\r\nContent-Length: 0\r\n\r\n",
			&h1Head{status: 200, decision: []byte("42")}},
		{"no reason phrase", "GET", "HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n", &h1Head{status: 503}},
		{"connection close", "GET", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
			&h1Head{status: 200, close: true}},
		{"connection keep-alive", "GET", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
			&h1Head{status: 200}},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", nil},
		{"no length: read to EOF", "GET", "HTTP/1.1 200 OK\r\n\r\nbody", nil},
		{"two lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", nil},
		{"signed length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", nil},
		{"body over MaxBodyDrain", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 1048577\r\n\r\n", nil},
		{"HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", nil},
		{"interim 1xx", "GET", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", nil},
		{"204", "GET", "HTTP/1.1 204 No Content\r\n\r\n", nil},
		{"HTTP/1.0", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", nil},
		{"bare LF", "GET", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", nil},
		{"obs-fold", "GET", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", nil},
		{"no colon", "GET", "HTTP/1.1 200 OK\r\nbroken\r\nContent-Length: 0\r\n\r\n", nil},
		{"space before colon", "GET", "HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 0\r\n\r\n", nil},
		{"control byte in a value", "GET", "HTTP/1.1 200 OK\r\nX-A: a\x01\r\nContent-Length: 0\r\n\r\n", nil},
		{"bad status", "GET", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", nil},
		{"head larger than the buffer", "GET", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", 200) + "\r\nContent-Length: 0\r\n\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte per read: the head arrives in pieces.
			br := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(tt.in+next)), 128)
			got, err := leanHead(br, captured, tt.method, DefaultMaxHeaderBytes, MaxBodyDrain)
			if tt.want == nil {
				if err != errNeedFallback {
					t.Fatalf("leanHead = %+v, %v; want errNeedFallback", got, err)
				}
				rest, _ := io.ReadAll(br)
				if string(rest) != tt.in+next {
					t.Errorf("consumed %q, want nothing", (tt.in + next)[:len(tt.in+next)-len(rest)])
				}
				return
			}
			if err != nil {
				t.Fatalf("leanHead: %v", err)
			}
			if !reflect.DeepEqual(got, *tt.want) {
				t.Errorf("leanHead = %+v, want %+v", got, *tt.want)
			}
			// It agrees with net/http.
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(tt.in)), &http.Request{Method: tt.method})
			if err != nil {
				t.Fatalf("ReadResponse: %v", err)
			}
			if resp.StatusCode != got.status || resp.ContentLength != got.length || resp.Close != got.close {
				t.Errorf("net/http reads status %d, length %d, close %v", resp.StatusCode, resp.ContentLength, resp.Close)
			}
			// It consumed the head exactly.
			body := make([]byte, got.length)
			if _, err := io.ReadFull(br, body); err != nil {
				t.Fatal(err)
			}
			if rest, _ := io.ReadAll(br); string(rest) != next {
				t.Errorf("after the body: %q, want %q", rest, next)
			}
		})
	}
}

func TestLeanHeadErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want error
	}{
		{"closed before any byte", "", io.ErrUnexpectedEOF},
		{"closed in the head", "HTTP/1.1 200 OK\r\nContent-Le", errNeedFallback}, // net/http reports it
	} {
		br := bufio.NewReader(strings.NewReader(tt.in))
		if _, err := leanHead(br, nil, "GET", DefaultMaxHeaderBytes, MaxBodyDrain); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}
