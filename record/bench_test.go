package record

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"testing"
)

const benchResults = 1_000_000

// benchFile is a record file of benchResults sample results, built once.
var benchFile = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sampleHeader("bench"))
	if err != nil {
		panic(err)
	}
	for i := range int64(benchResults) {
		w.WriteResult(sampleResult(i))
	}
	w.Close(End{Reason: ReasonCompleted, Scheduled: benchResults})
	return buf.Bytes()
})

// BenchmarkWrite writes 1M results per op; MB/s is of the file written.
func BenchmarkWrite(b *testing.B) {
	b.SetBytes(int64(len(benchFile())))
	results := make([]Result, 1024)
	for i := range results {
		results[i] = sampleResult(int64(i))
	}
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewWriter(io.Discard, sampleHeader("bench"))
		if err != nil {
			b.Fatal(err)
		}
		for i := range benchResults {
			w.WriteResult(results[i%len(results)])
		}
		w.Close(End{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchResults), "ns/result")
}

// BenchmarkWriteParallel writes one result per op from many goroutines.
func BenchmarkWriteParallel(b *testing.B) {
	w, err := NewWriter(io.Discard, sampleHeader("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(End{})
	r := sampleResult(2)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.WriteResult(r)
		}
	})
}

// BenchmarkRead reads a file of 1M results per op; MB/s is of the file.
func BenchmarkRead(b *testing.B) {
	data := benchFile()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		run, err := Read(bytes.NewReader(data))
		if err != nil || len(run.Results) != benchResults {
			b.Fatalf("Read = %d results, %v", len(run.Results), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchResults), "ns/result")
}

// BenchmarkResultEncoder encodes one result line per op, cycling through
// 1024 sample results (a third with headers and pointers), three ways:
// append is appendResult into a reused buffer (the encoder alone); json
// is the path it replaced, a json.Encoder with SetEscapeHTML(false) into a
// reused buffer; writer is Writer.WriteResult to io.Discard (encoding,
// lock and buffered write). allocs/op is allocations per line.
func BenchmarkResultEncoder(b *testing.B) {
	results := make([]Result, 1024)
	for i := range results {
		results[i] = sampleResult(int64(i))
		results[i].Type = TypeResult
	}
	lines := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	}
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf = appendResult(buf[:0], &results[i%len(results)])
			i++
		}
		lines(b)
	})
	b.Run("json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(&results[i%len(results)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		lines(b)
	})
	b.Run("writer", func(b *testing.B) {
		w, err := NewWriter(io.Discard, sampleHeader("bench"))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close(End{})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := w.WriteResult(results[i%len(results)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		lines(b)
	})
}
