package cli

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// TestServeReplicasShareRedis runs two `rlprobe serve` commands (in
// process, through the CLI exactly as two processes would run it) on one
// real redis-server, a fixed window of 10 per 60 s (no edge can interfere),
// and releases 50 requests at once, alternating between the replicas.
// Deciding in separate round trips with a 20 ms gap between read and write
// (--atomic=false --race-gap 20ms), the replicas over-admit; atomic, exactly
// 10 pass.
func TestServeReplicasShareRedis(t *testing.T) {
	addr := testenv.StartRedis(t)
	for _, tt := range []struct {
		atomic string
		check  func(admitted int64) bool
		want   string
	}{
		{"false", func(n int64) bool { return n > 10 }, "more than 10 (the race)"},
		{"true", func(n int64) bool { return n == 10 }, "exactly 10"},
	} {
		t.Run("atomic="+tt.atomic, func(t *testing.T) {
			args := []string{"--algorithm", "fixed-window", "--limit", "10", "--window", "60s", "--listen", "127.0.0.1:0",
				"--backend", "redis", "--redis", "redis://" + addr, "--redis-prefix", "replicas-" + tt.atomic + ":",
				"--atomic=" + tt.atomic}
			if tt.atomic == "false" {
				args = append(args, "--race-gap", "20ms")
			}
			urls := make([]string, 2)
			for i := range urls {
				urls[i], _ = startServe(t, args...)
			}
			var admitted atomic.Int64
			var ready, done sync.WaitGroup
			gate := make(chan struct{})
			for i := range 50 {
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
					req, _ := http.NewRequest(http.MethodGet, urls[i%2]+"/", nil)
					ready.Done()
					<-gate
					resp, err := c.Do(req)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						admitted.Add(1)
					}
				}()
			}
			ready.Wait()
			close(gate)
			done.Wait()
			if n := admitted.Load(); !tt.check(n) {
				t.Errorf("two replicas on one Redis, --atomic=%s: %d of 50 admitted, want %s", tt.atomic, n, tt.want)
			} else {
				t.Logf("--atomic=%s: %d of 50 admitted", tt.atomic, n)
			}
		})
	}
}
