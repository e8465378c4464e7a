package cli

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlprobe/rlprobe/headers"
)

// TestServeMemoryNonAtomic: `serve --backend memory --atomic=false
// --race-gap 300ms` is the check-then-act race without Redis: 10
// concurrent requests against a limit of 5 are all decided on the same
// stale count and all admitted, each answer numbered in decision order
// (--echo-arrival). --race-gap without --atomic=false is a usage error.
func TestServeMemoryNonAtomic(t *testing.T) {
	url, stop := startServe(t, "--algorithm", "fixed-window", "--limit", "5", "--window", "60s", "--listen", "127.0.0.1:0",
		"--backend", "memory", "--atomic=false", "--race-gap", "300ms", "--echo-arrival")
	var admitted, numbered atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				admitted.Add(1)
			}
			if resp.Header.Get(headers.DecisionHeader) != "" {
				numbered.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() <= 5 || numbered.Load() != 10 {
		t.Errorf("10 concurrent requests, limit 5, non-atomic: %d admitted, %d numbered; want over 5, and 10", admitted.Load(), numbered.Load())
	}
	if code, errOut := stop(); code != 0 {
		t.Errorf("serve exit %d: %s", code, errOut)
	}

	code, _, errOut := runCLI(t, nil, "serve", "--algorithm", "fixed-window", "--limit", "5", "--window", "2s", "--race-gap", "20ms")
	if code != ExitUsage || !strings.Contains(errOut, "--atomic=false") {
		t.Errorf("--race-gap with the atomic memory backend: exit %d, %q; want a usage error naming --atomic=false", code, errOut)
	}
}
