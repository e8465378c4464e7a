package testserver

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// BenchmarkHandler measures one request through the handler (routing,
// memory backend, draft-8 headers), over 1000 keys, without the network.
func BenchmarkHandler(b *testing.B) {
	cfg := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 1e6, Capacity: 1000}
	h, err := NewHandler([]Route{{Path: "/", Policy: Policy{Limiter: cfg, Key: "header:K", Dialects: []headers.Dialect{headers.Draft8}}}}, HandlerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("K", strconv.Itoa(i%1000))
			h.ServeHTTP(httptest.NewRecorder(), req)
			i++
		}
	})
}

// BenchmarkRedisBackend measures one atomic decision in a local Redis.
func BenchmarkRedisBackend(b *testing.B) {
	client := startRedisB(b)
	bk, err := NewRedisBackend(client, limiter.Config{Algorithm: limiter.GCRA, Rate: 1e3, Capacity: 100}, RedisOptions{Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		if _, err := bk.Decide(ctx, strconv.Itoa(i%100), now.Add(time.Duration(i)*time.Microsecond)); err != nil {
			b.Fatal(err)
		}
	}
}
