package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Set by a test handler: dropHeader makes pipeNet close the connection
// instead of answering, closeAfterHeader makes it close the connection
// after the answer (without saying so, like a server's idle timeout).
const (
	dropHeader       = "X-Test-Drop"
	closeAfterHeader = "X-Test-Close-After"
)

// pipeNet is an in-memory network: Dial returns one end of a net.Pipe and
// serves the other with the handler of the dialled address, one request at
// a time, as HTTP/1.1 keep-alive. It works inside a synctest bubble.
type pipeNet struct {
	handlers map[string]http.Handler // by "host:port"
	// fail, when set, is asked before each dial (numbered from 1).
	fail func(n int) error
	// dialDelay is how long each dial takes.
	dialDelay time.Duration

	mu    sync.Mutex
	dials int
	srcs  []netip.Addr
}

func newPipeNet(h http.Handler) *pipeNet {
	return &pipeNet{handlers: map[string]http.Handler{"a.test:80": h}}
}

func (n *pipeNet) Dial(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error) {
	n.mu.Lock()
	n.dials++
	d := n.dials
	n.srcs = append(n.srcs, src)
	n.mu.Unlock()
	time.Sleep(n.dialDelay)
	if n.fail != nil {
		if err := n.fail(d); err != nil {
			return nil, err
		}
	}
	h := n.handlers[addr]
	if h == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("no such host")}
	}
	c, s := net.Pipe()
	go servePipe(s, h, src)
	return c, nil
}

func (n *pipeNet) dialCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials
}

// servePipe answers HTTP/1.1 requests on c until it is closed.
func servePipe(c net.Conn, h http.Handler, src netip.Addr) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if src.IsValid() {
			req.RemoteAddr = netip.AddrPortFrom(src, 40000).String()
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		_, _ = io.Copy(io.Discard, req.Body)
		if rec.Header().Get(dropHeader) != "" {
			return
		}
		bw := bufio.NewWriter(c)
		fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
		rec.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
		_ = rec.Header().Write(bw)
		bw.WriteString("\r\n")
		bw.Write(rec.Body.Bytes())
		if bw.Flush() != nil || rec.Header().Get(closeAfterHeader) != "" {
			return
		}
	}
}

// newTestEngine returns an Engine over n using the timer pacer (exact under
// synctest); it is closed when the test ends.
func newTestEngine(t *testing.T, n *pipeNet, opt Options) *Engine {
	t.Helper()
	if opt.URLs == nil {
		opt.URLs = []string{"http://a.test/"}
	}
	opt.Dial = n.Dial
	e, err := New(opt)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.pacer = timerPacer{}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// okHandler answers 200 after delay (fake time under synctest).
func okHandler(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		fmt.Fprint(w, "ok")
	})
}

// steady returns n sends every interval from start, as client 0.
func steady(n int, start, interval time.Duration) []Send {
	s := make([]Send, n)
	for i := range s {
		s[i] = Send{At: start + time.Duration(i)*interval, Phase: "steady"}
	}
	return s
}

// memSink collects results; it can be told to fail.
type memSink struct {
	mu      sync.Mutex
	results []record.Result
	failAt  int // fail the failAt-th write (from 1); 0 never
}

func (s *memSink) WriteResult(r record.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAt > 0 && len(s.results)+1 == s.failAt {
		return errors.New("disk full")
	}
	s.results = append(s.results, r)
	return nil
}

func (s *memSink) seqs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, r := range s.results {
		out = append(out, r.Seq)
	}
	slices.Sort(out)
	return out
}

// checkOnePerSend fails unless results holds exactly one result per send,
// in schedule order, with Seq base..base+len-1 and a valid outcome.
func checkOnePerSend(t *testing.T, results []record.Result, sends []Send, base int64) {
	t.Helper()
	if len(results) != len(sends) {
		t.Fatalf("got %d results for %d sends", len(results), len(sends))
	}
	for i, r := range results {
		if r.Seq != base+int64(i) {
			t.Errorf("results[%d].Seq = %d, want %d", i, r.Seq, base+int64(i))
		}
		switch r.Outcome {
		case record.OutcomeResponse, record.OutcomeError, record.OutcomeNotSent:
		default:
			t.Errorf("results[%d].Outcome = %q", i, r.Outcome)
		}
		if r.Type != record.TypeResult {
			t.Errorf("results[%d].Type = %q", i, r.Type)
		}
	}
}

// outcomes counts results by outcome and error.
func outcomes(results []record.Result) map[string]int {
	m := make(map[string]int)
	for _, r := range results {
		k := string(r.Outcome)
		if r.Err != "" {
			k += ":" + r.Err
		}
		m[k]++
	}
	return m
}

// inBubble runs f in a synctest bubble.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}
