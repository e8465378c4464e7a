package record

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the start of the sample runs.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// sampleHeader is a header as probe would write it.
func sampleHeader(agent string) Header {
	return Header{
		Tool:     "rlprobe v0.0.0-test",
		Go:       "go1.26",
		Start:    t0,
		Agent:    agent,
		Host:     "host1",
		Targets:  []string{"http://127.0.0.1:8080/api?q=1&x=<y>"},
		Plan:     json.RawMessage(`{"pattern":"burst","count":8}`),
		Seed:     42,
		Captured: []string{"Retry-After", "Ratelimit"},
	}
}

// sampleResult is a plausible result i: every third is a 429 with headers,
// every seventh an error, every eleventh not sent.
func sampleResult(i int64) Result {
	base := 1_000_000 * i
	r := Result{
		Seq: i, Client: "k1", Src: "127.0.0.1:40000", Method: "GET",
		URL: "http://127.0.0.1:8080/api?q=1", Phase: "burst",
		Sched: base, Sent: base + 10, Wrote: base + 20, TTFB: base + 500_000, Done: base + 600_000,
		Outcome: OutcomeResponse, Status: 200,
	}
	switch {
	case i%11 == 10:
		r.Sent, r.Wrote, r.TTFB, r.Done = 0, 0, 0, 0
		r.Outcome, r.Status, r.Err = OutcomeNotSent, 0, "cap"
	case i%7 == 6:
		r.TTFB = 0
		r.Outcome, r.Status, r.Err, r.ErrMsg = OutcomeError, 0, ErrRefused, "dial tcp: connection refused"
	case i%3 == 2:
		r.Status = 429
		r.Headers = http.Header{"Retry-After": {"1"}, "Ratelimit": {`"default";r=0;t=1`}}
		a := base + 300_000
		r.Arrival = &a
		n := i + 1
		r.Decision = &n
	}
	return r
}

// writeRun writes a run of n sample results and returns the file.
func writeRun(t testing.TB, n int64, end *End) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sampleHeader("a"))
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i := range n {
		if err := w.WriteResult(sampleResult(i)); err != nil {
			t.Fatalf("WriteResult(%d): %v", i, err)
		}
	}
	if end == nil {
		// Leave the file without an end line, as a killed writer does.
		if err := w.closeWith(); err != nil {
			t.Fatalf("closeWith: %v", err)
		}
	} else if err := w.Close(*end); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.Bytes()
}

// lines splits a file into its lines, without newlines.
func lines(b []byte) []string {
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
