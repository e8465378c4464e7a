package testserver

import (
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestParseRedisAddress accepts what redis-cli users type, host:port
// first, and still every URL go-redis reads.
func TestParseRedisAddress(t *testing.T) {
	tests := []struct {
		in, network, addr string
		db                int
	}{
		{"127.0.0.1:6379", "tcp", "127.0.0.1:6379", 0},
		{"localhost:6380", "tcp", "localhost:6380", 0},
		{"redis:6379", "tcp", "redis:6379", 0},
		{"[::1]:6379", "tcp", "[::1]:6379", 0},
		{"::1", "tcp", "[::1]:6379", 0},
		{"127.0.0.1", "tcp", "127.0.0.1:6379", 0},
		{"localhost", "tcp", "localhost:6379", 0},
		{":7000", "tcp", "127.0.0.1:7000", 0},
		{" 127.0.0.1:6379 ", "tcp", "127.0.0.1:6379", 0},
		{"/run/redis/redis.sock", "unix", "/run/redis/redis.sock", 0},
		{"redis://127.0.0.1:6379/0", "tcp", "127.0.0.1:6379", 0},
		{"redis://localhost/3", "tcp", "localhost:6379", 3},
		{"redis://:secret@127.0.0.1:6390/2", "tcp", "127.0.0.1:6390", 2},
		{"unix:///tmp/redis.sock?db=1", "unix", "/tmp/redis.sock", 1},
	}
	for _, tt := range tests {
		opt, err := ParseRedisAddress(tt.in)
		if err != nil {
			t.Errorf("ParseRedisAddress(%q) = %v", tt.in, err)
			continue
		}
		if opt.Network != tt.network || opt.Addr != tt.addr || opt.DB != tt.db {
			t.Errorf("ParseRedisAddress(%q) = %s %s db %d, want %s %s db %d", tt.in, opt.Network, opt.Addr, opt.DB, tt.network, tt.addr, tt.db)
		}
	}
	for _, in := range []string{"", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:redis", "http://127.0.0.1:6379",
		"user@127.0.0.1:6379", "1:2:3:4:5:6:7:8:9", "a b:6379"} {
		opt, err := ParseRedisAddress(in)
		if err == nil {
			t.Errorf("ParseRedisAddress(%q) = %s %s, want an error", in, opt.Network, opt.Addr)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "testserver: redis ") || !strings.Contains(msg, "host:port") {
			t.Errorf("ParseRedisAddress(%q) error %q: want the testserver prefix and the forms accepted", in, msg)
		}
	}
}

// TestNewRedisHostPort: `serve --backend redis --redis 127.0.0.1:6379`
// builds its client without contacting Redis, at that address.
func TestNewRedisHostPort(t *testing.T) {
	one := []Route{{Policy: Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}}}}
	s, err := New(Config{Routes: one, Backend: BackendRedis, Redis: RedisConfig{URL: "127.0.0.1:6399"}})
	if err != nil {
		t.Fatalf("New with --redis 127.0.0.1:6399: %v", err)
	}
	defer s.closeRedis()
	if got := s.redis.Options().Addr; got != "127.0.0.1:6399" {
		t.Errorf("client address %q, want 127.0.0.1:6399", got)
	}
}
