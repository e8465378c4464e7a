package testserver

import (
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// fixedConfig is a config file of one fixed window admitting limit
// requests an hour.
func fixedConfig(limit int) string {
	return "routes:\n  - path: /\n    algorithm: fixed-window\n    limit: " + strconv.Itoa(limit) + "\n    window: 1h\n"
}

// TestRunReloads: each receive on Reload re-reads the file; a good file
// swaps the policy (fresh state, new limit) and logs "reloaded FILE", a bad
// one logs why and keeps the running routes; the context's end stops the
// server cleanly.
func TestRunReloads(t *testing.T) {
	steps := []struct {
		file     string // the file's content at the reload
		wantLog  string
		accepted int // of 6 requests after the reload
	}{
		{fixedConfig(4), "reloaded ", 4},
		{"routes:\n  - path: /\n    algorithm: fixed-window\n", "failed, the previous routes stay:", 0},
		{fixedConfig(3), "reloaded ", 3},
	}
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "routes.yaml")
		if err := os.WriteFile(path, []byte(fixedConfig(2)), 0o644); err != nil {
			t.Fatal(err)
		}
		routes, err := LoadConfig(path, strings.NewReader(fixedConfig(2)))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		ml := NewMemListener()
		if err := srv.StartListener(ml); err != nil {
			t.Fatal(err)
		}
		accepted := func(n int) int { return acceptedOf(t, ml, n) }
		if got := accepted(6); got != 2 {
			t.Fatalf("before any reload %d accepted, want 2", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		hup := make(chan struct{})
		logs := make(chan string, len(steps))
		ran := make(chan error, 1)
		go func() {
			ran <- srv.Run(ctx, RunOptions{Reload: hup, ReloadFile: path, Log: func(m string) { logs <- m }})
		}()
		for i, st := range steps {
			if err := os.WriteFile(path, []byte(st.file), 0o644); err != nil {
				t.Fatal(err)
			}
			hup <- struct{}{}
			synctest.Wait()
			if msg := <-logs; !strings.Contains(msg, st.wantLog) || !strings.Contains(msg, path) {
				t.Errorf("step %d: log %q, want %q and the file", i, msg, st.wantLog)
			}
			if got := accepted(6); got != st.accepted {
				t.Errorf("step %d: %d accepted, want %d", i, got, st.accepted)
			}
		}
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run after the context ended: %v, want nil (nothing in flight)", err)
		}
		if _, err := ml.Dial(context.Background(), "tcp", "x", netip.Addr{}); err == nil {
			t.Error("the listener still accepts after Run returned")
		}
	})
}

// TestRunGrace: a request whose body is still awaited when the context ends is
// waited for Grace, no longer; Run then returns what cut it short.
func TestRunGrace(t *testing.T) {
	for _, grace := range []time.Duration{0, time.Second} {
		synctest.Test(t, func(t *testing.T) {
			pol := Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Hour}}
			srv, err := New(Config{Routes: []Route{{Policy: pol}}})
			if err != nil {
				t.Fatal(err)
			}
			ml := NewMemListener()
			if err := srv.StartListener(ml); err != nil {
				t.Fatal(err)
			}
			conn, err := ml.Dial(t.Context(), "tcp", MemListenerAddr, netip.Addr{})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go conn.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")) // the body never comes
			go io.Copy(io.Discard, conn)
			synctest.Wait()
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			start := time.Now()
			err = srv.Run(ctx, RunOptions{Grace: grace})
			want := grace
			if want == 0 {
				want = DefaultShutdownGrace
			}
			if err == nil || time.Since(start) != want {
				t.Errorf("grace %v: Run = %v after %v, want an error after %v", grace, err, time.Since(start), want)
			}
		})
	}
}
