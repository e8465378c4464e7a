package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
)

// rawServer is a minimal HTTP/1.1 keep-alive server on loopback, so that
// the benchmarks measure the engine rather than net/http's server.
func rawServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for { // the head ends with an empty line
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// BenchmarkRoundTripH1 runs b.N requests as one open-loop schedule at the
// offered rate of each sub-benchmark ("max": one every microsecond, more
// than the machine can do) and reports the achieved rate and the pacing
// error. The target is an in-process server, or the URL in the environment
// variable RLPROBE_BENCH_URL (a server in another process, such as the
// 1-worker nginx of scripts/bench-engine.sh, measures the engine alone).
func BenchmarkRoundTripH1(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{
		{"rate=1k", time.Millisecond},
		{"rate=5k", 200 * time.Microsecond},
		{"rate=20k", 50 * time.Microsecond},
		{"rate=50k", 20 * time.Microsecond},
		{"rate=100k", 10 * time.Microsecond},
		{"rate=max", time.Microsecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := os.Getenv("RLPROBE_BENCH_URL") // e.g. a 1-worker nginx
			if url == "" {
				url = rawServer(b)
			}
			e, err := New(Options{URLs: []string{url}, MaxRate: 1e6})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			sends := steady(b.N, 0, bc.interval)
			zero := time.Now()
			b.ResetTimer()
			results, err := e.Run(context.Background(), zero, zero.Add(20*time.Millisecond), sends, nil)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			s := Summarize(results)
			if s.Accepted != b.N {
				b.Fatalf("accepted %d of %d: %+v", s.Accepted, b.N, s)
			}
			b.ReportMetric(s.SentPerS, "req/s")
			b.ReportMetric(float64(s.Pacing.P50US), "pace-p50-µs")
			b.ReportMetric(float64(s.Pacing.P99US), "pace-p99-µs")
			b.ReportMetric(float64(s.Latency["200"].P50US), "lat-p50-µs")
			b.ReportMetric(100*float64(s.Late)/float64(b.N), "late-%")
		})
	}
}

// BenchmarkPacer reports how late the default pacer returns for deadlines
// 200 µs apart.
func BenchmarkPacer(b *testing.B) {
	p := defaultPacer()
	var h hist
	ctx := context.Background()
	p.start()
	defer p.stop()
	start := time.Now().Add(time.Millisecond)
	b.ResetTimer()
	for i := range b.N {
		d := start.Add(time.Duration(i) * 200 * time.Microsecond)
		p.wait(ctx, d)
		h.add(int64(time.Since(d)))
	}
	b.StopTimer()
	dist := h.dist()
	b.ReportMetric(float64(dist.P50US), "late-p50-µs")
	b.ReportMetric(float64(dist.P99US), "late-p99-µs")
	b.ReportMetric(float64(dist.P999US), "late-p999-µs")
}

// echoServer is rawServer answering with the moment it read the end of
// each request head (the arrival echo), as `rlprobe serve --echo-arrival`.
func echoServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					at := strconv.FormatInt(time.Now().UnixNano(), 10)
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"+headers.ArrivalHeader+": "+at+"\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

// BenchmarkRaceLastByte releases b.N last-byte races of n clients, from
// one loop (the default) or from one goroutine per member, and reports the
// median spread of the server's arrival times and of the client's Wrote
// stamps.
func BenchmarkRaceLastByte(b *testing.B) {
	for _, release := range []string{"loop", "goroutines"} {
		for _, n := range []int{20, 100} {
			b.Run(fmt.Sprintf("release=%s/clients=%d", release, n), func(b *testing.B) {
				url := os.Getenv("RLPROBE_BENCH_ECHO_URL") // e.g. rlprobe serve --echo-arrival
				if url == "" {
					url = echoServer(b)
				}
				e, err := New(Options{URLs: []string{url}, MaxRate: 1e6, RaceMode: RaceLastByte, RaceHold: 20 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				e.lbGoroutines = release == "goroutines"
				var sends []Send
				for k := range b.N {
					for c := range n {
						sends = append(sends, Send{At: time.Duration(k+1) * 40 * time.Millisecond, Client: c, Batch: k + 1, Phase: "race"})
					}
				}
				zero := time.Now()
				b.ResetTimer()
				results, err := e.Run(context.Background(), zero, zero.Add(20*time.Millisecond), sends, nil)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				s := Summarize(results)
				if s.Accepted != len(sends) {
					b.Fatalf("accepted %d of %d", s.Accepted, len(sends))
				}
				b.ReportMetric(float64(s.RaceArrivalSpread.P50US), "arrival-p50-µs")
				b.ReportMetric(float64(s.RaceWroteSpread.P50US), "wrote-p50-µs")
			})
		}
	}
}
