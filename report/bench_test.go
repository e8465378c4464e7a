package report

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// writeLargeRun streams a record file of n results to path: 1000 clients
// at about 1000 requests per second, a third of them rejected with
// Retry-After, the accepted carrying a draft-7 RateLimit header.
func writeLargeRun(tb testing.TB, path string, n int) {
	tb.Helper()
	file, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(file, 1<<20)
	w, err := record.NewWriter(bw, header("bench", fixedPolicy, "http://127.0.0.1:8080/api"))
	if err != nil {
		tb.Fatal(err)
	}
	ra := http.Header{"Retry-After": {"1"}}
	ok := http.Header{"Ratelimit": {"limit=10, remaining=3, reset=1"}}
	for i := 0; i < n; i++ {
		sent := int64(i+1) * 997_000
		status, hdr := 200, ok
		if (i/7)%3 == 2 {
			status, hdr = 429, ra
		}
		r := response(int64(i), fmt.Sprintf("client-%d", i%1000), sent, int64(1+i%13)*100_000, status, hdr)
		if err := w.WriteResult(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: int64(n), Sent: int64(n)}); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := file.Close(); err != nil {
		tb.Fatal(err)
	}
}

// peakHeap samples the live heap every 10 ms until stop is closed and
// returns the largest sample, in bytes.
func peakHeap(stop <-chan struct{}) func() uint64 {
	var mu sync.Mutex
	var peak uint64
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			mu.Lock()
			peak = max(peak, sample[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// BenchmarkHTMLMillion reads a 1,000,000-record file and renders it to
// HTML, reporting the peak live heap. The budget: under 10 s and
// 1 GiB. RLPROBE_BENCH_FILE names an existing record file to use instead
// of generating one (for /usr/bin/time -v measurements of the rendering
// alone).
func BenchmarkHTMLMillion(b *testing.B) {
	path := os.Getenv("RLPROBE_BENCH_FILE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "million.jsonl")
		writeLargeRun(b, path, 1_000_000)
	}
	runtime.GC()
	debug.FreeOSMemory()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	var peak uint64
	for range b.N {
		stop := make(chan struct{})
		result := peakHeap(stop)
		in, err := ReadFiles(path)
		if err != nil {
			b.Fatal(err)
		}
		cw := &countingWriter{}
		if err := HTML(cw, in); err != nil {
			b.Fatal(err)
		}
		close(stop)
		peak = max(peak, result())
		size = cw.n
		if in.Requests() < 1_000_000 && os.Getenv("RLPROBE_BENCH_FILE") == "" {
			b.Fatalf("read %d requests", in.Requests())
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(size)/(1<<10), "html-KiB")
}

// BenchmarkHTMLMemory renders an in-memory run of 100,000 requests (no
// file reading), to follow the renderer's own cost.
func BenchmarkHTMLMemory(b *testing.B) {
	in := bigInput(100_000, 1000, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		in.prep = nil
		if err := HTML(io.Discard, in); err != nil {
			b.Fatal(err)
		}
	}
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// TestWriteLargeRun keeps the generator honest at a small size.
func TestWriteLargeRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	writeLargeRun(t, path, 3000)
	in, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	s := in.Summary()
	if s.Scheduled != 3000 || s.Rejected != 998 || len(s.Clients) != 1000 {
		t.Errorf("generated run: %d requests, %d rejected, %d clients", s.Scheduled, s.Rejected, len(s.Clients))
	}
}
