package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// These tests prove the race modes by the order of events a loopback
// server observes, not by timing. The release comes RaceHold (300 ms)
// after the heads, so the server has long read every head.

// listen returns a loopback listener closed at the end of the test.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func batch(n, id int) []Send {
	s := make([]Send, n)
	for i := range s {
		s[i] = Send{Client: i, Batch: id, Phase: "race"}
	}
	return s
}

func TestLastByteHoldsEveryFinalByte(t *testing.T) {
	const n = 8
	ln := listen(t)
	var (
		mu     sync.Mutex
		events []string // "held" or "done", in the order the server saw them
		conns  int
	)
	note := func(ev string) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			go func() {
				defer c.Close()
				var head []byte
				buf := make([]byte, 4096)
				for {
					k, err := c.Read(buf)
					if err != nil {
						return
					}
					head = append(head, buf[:k]...)
					switch {
					case bytes.HasSuffix(head, []byte("\r\n\r\n")):
						note("done")
						head = head[:0]
						if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
							return
						}
					case bytes.HasSuffix(head, []byte("\r\n\r")):
						note("held")
					}
				}
			}()
		}
	}()
	e, err := New(Options{
		URLs:         []string{"http://" + ln.Addr().String() + "/race"},
		RaceMode:     RaceLastByte,
		RaceHold:     300 * ms,
		ClientHeader: "X-Api-Key",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	now := time.Now()
	results, err := e.Run(t.Context(), now, now.Add(400*ms), batch(n, 1), nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i, r := range results {
		if r.Status != 200 || r.Sent >= r.Wrote {
			t.Errorf("results[%d]: status %d sent %d wrote %d, want 200 with the head written before the release",
				i, r.Status, r.Sent, r.Wrote)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := append(slices.Repeat([]string{"held"}, n), slices.Repeat([]string{"done"}, n)...)
	if !slices.Equal(events, want) {
		t.Errorf("server saw %v, want every connection to hold all but its last byte before any last byte arrived", events)
	}
	if conns != n {
		t.Errorf("server accepted %d connections, want %d", conns, n)
	}
}

// readLog records where each Read of the underlying connection ended.
type readLog struct {
	r    io.Reader
	ends []int64
	n    int64
}

func (l *readLog) Read(p []byte) (int, error) {
	k, err := l.r.Read(p)
	if k > 0 {
		l.n += int64(k)
		l.ends = append(l.ends, l.n)
	}
	return k, err
}

// readOf returns the index of the Read that delivered byte off.
func (l *readLog) readOf(off int64) int {
	i, _ := slices.BinarySearch(l.ends, off+1)
	return i
}

// posReader counts the bytes its reader consumed.
type posReader struct {
	r io.Reader
	n int64
}

func (p *posReader) Read(b []byte) (int, error) {
	k, err := p.r.Read(b)
	p.n += int64(k)
	return k, err
}

// h2RaceServer accepts one h2c (prior knowledge) connection, reads until
// every stream has ended, and reports in which Read of the connection each
// END_STREAM frame arrived; then it answers every stream with a 200.
func h2RaceServer(t *testing.T, ln net.Listener, streams int) <-chan h2RaceReport {
	out := make(chan h2RaceReport, 1)
	go func() {
		var rep h2RaceReport
		defer func() { out <- rep }()
		c, err := ln.Accept()
		if err != nil {
			rep.err = err
			return
		}
		defer c.Close()
		log := &readLog{r: c}
		pos := &posReader{r: bufio.NewReaderSize(log, 1<<16)}
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(pos, preface); err != nil || string(preface) != http2.ClientPreface {
			rep.err = fmt.Errorf("preface %q: %v", preface, err)
			return
		}
		fr := http2.NewFramer(c, pos)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100}); err != nil {
			rep.err = err
			return
		}
		var ended []uint32
		for len(ended) < streams {
			f, err := fr.ReadFrame()
			if err != nil {
				rep.err = err
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					rep.err = fmt.Errorf("stream %d: HEADERS with END_STREAM", f.StreamID)
					return
				}
				rep.headers++
				for _, hf := range f.RegularFields() {
					if hf.Name == "x-api-key" {
						rep.keys = append(rep.keys, hf.Value)
					}
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					if rep.headers != streams {
						rep.err = fmt.Errorf("END_STREAM on stream %d after %d of %d HEADERS", f.StreamID, rep.headers, streams)
						return
					}
					ended = append(ended, f.StreamID)
					rep.reads = append(rep.reads, log.readOf(pos.n-1))
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			}
		}
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, id := range ended {
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = enc.WriteField(hpack.HeaderField{Name: "retry-after", Value: strconv.Itoa(int(id))})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
				rep.err = err
				return
			}
		}
		// Wait for the client to close.
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	return out
}

type h2RaceReport struct {
	err     error
	headers int
	keys    []string
	reads   []int // per END_STREAM frame, the Read that delivered it
}

func TestSinglePacketFlushesEveryFinalFrameInOneWrite(t *testing.T) {
	const n = 20
	ln := listen(t)
	report := h2RaceServer(t, ln, n)
	e, err := New(Options{
		URLs:         []string{"http://" + ln.Addr().String() + "/race"},
		H2C:          true,
		RaceMode:     RaceSinglePacket,
		RaceHold:     300 * ms,
		ClientHeader: "X-Api-Key",
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	results, err := e.Run(t.Context(), now, now.Add(400*ms), batch(n, 1), nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	_ = e.Close()
	rep := <-report
	if rep.err != nil {
		t.Fatalf("server: %v", rep.err)
	}
	if len(rep.reads) != n || slices.Min(rep.reads) != slices.Max(rep.reads) {
		t.Errorf("END_STREAM frames arrived in reads %v, want all %d in one", rep.reads, n)
	}
	wantKeys := make([]string, n)
	for i := range wantKeys {
		wantKeys[i] = "k" + strconv.Itoa(i+1)
	}
	if !slices.Equal(rep.keys, wantKeys) {
		t.Errorf("server saw keys %v, want %v (one identity per stream)", rep.keys, wantKeys)
	}
	for i, r := range results {
		if r.Outcome != record.OutcomeResponse || r.Status != 200 || r.Sent >= r.Wrote || r.TTFB < r.Wrote {
			t.Errorf("results[%d] = %s %d sent %d wrote %d ttfb %d", i, r.Outcome, r.Status, r.Sent, r.Wrote, r.TTFB)
		}
		if got := headers.Get(r.Headers, "Retry-After"); got != strconv.Itoa(2*i+1) {
			t.Errorf("results[%d] captured Retry-After %q, want the stream id %d", i, got, 2*i+1)
		}
	}
}
