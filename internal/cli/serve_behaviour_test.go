package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The behaviours of `rlprobe serve` over real sockets, on loopback. Each
// step is at least 200 ms from the previous one and at least 100 ms from
// any edge of the limiter (the behaviour's or the plain algorithm's it
// must differ from), so a loaded machine's jitter cannot change an
// outcome; the tests assert outcomes, never durations.

// burstAt waits until base+at, sends n requests one after the other and
// returns their statuses with the last one's Retry-After ("200 200 429/2").
func burstAt(t *testing.T, url string, base time.Time, at time.Duration, n int) string {
	t.Helper()
	time.Sleep(time.Until(base.Add(at)))
	var out []string
	for range n {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s := fmt.Sprint(resp.StatusCode)
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			s += "/" + ra
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

type step struct {
	at   time.Duration
	n    int
	want string
}

func runSteps(t *testing.T, args []string, steps []step) {
	t.Helper()
	url, _ := startServe(t, append(args, "--listen", "127.0.0.1:0")...)
	base := time.Now()
	for _, s := range steps {
		if got := burstAt(t, url, base, s.at, s.n); got != s.want {
			t.Errorf("serve %v: %d request(s) at +%v: %s, want %s", args, s.n, s.at, got, s.want)
		}
	}
}

// TestServePenaltyBlock: after the first 429 every request is refused
// until the block's 1 s has passed (Retry-After: the time to its end), then
// a full quota, though the 10 s window has not ended.
func TestServePenaltyBlock(t *testing.T) {
	runSteps(t, []string{"--algorithm", "fixed-window", "--limit", "2", "--window", "10s", "--penalty", "block:1s"}, []step{
		{0, 3, "200 200 429/1"},
		{500 * time.Millisecond, 1, "429/1"},
		{1300 * time.Millisecond, 3, "200 200 429/1"},
	})
}

// TestServePenaltyExtend: a retry before a second of silence is refused
// and moves the end again, even after the plain window [0, 1 s) ended.
func TestServePenaltyExtend(t *testing.T) {
	runSteps(t, []string{"--algorithm", "fixed-window", "--limit", "2", "--window", "1s", "--penalty", "extend"}, []step{
		{0, 2, "200 200"},
		{400 * time.Millisecond, 1, "429/1"},  // the end moves to 1.4 s
		{1200 * time.Millisecond, 1, "429/1"}, // plain: a new window since 1 s; the end moves to 2.2 s
		{2600 * time.Millisecond, 2, "200 200"},
	})
}

// TestServePenaltyRestart: admitted requests leave the window alone; a
// refusal restarts it from itself.
func TestServePenaltyRestart(t *testing.T) {
	runSteps(t, []string{"--algorithm", "fixed-window", "--limit", "2", "--window", "1s", "--penalty", "restart"}, []step{
		{0, 1, "200"},
		{600 * time.Millisecond, 1, "200"},      // extend would move the end to 1.6 s
		{1200 * time.Millisecond, 2, "200 200"}, // window [1.2 s, 2.2 s)
		{1800 * time.Millisecond, 1, "429/1"},   // the end moves to 2.8 s
		{2400 * time.Millisecond, 1, "429/1"},   // plain: a new window since 2.2 s
		{3800 * time.Millisecond, 1, "200"},
	})
}

// TestServeForgetIdle: a client back after the idle time gets a full
// bucket, where the refill alone (1 a minute) would give nothing.
func TestServeForgetIdle(t *testing.T) {
	runSteps(t, []string{"--algorithm", "token-bucket", "--rate", "1/m", "--capacity", "2", "--forget-idle", "600ms"}, []step{
		{0, 3, "200 200 429/1"}, // Retry-After: the 600 ms until the key is forgotten
		{1 * time.Second, 3, "200 200 429/1"},
	})
}

// TestServeRefillWhole: a bucket full since its tick at 1 s, drained at
// 2.5 s, regains a token at its grid's next tick (3 s), not a whole
// interval after the drain (3.5 s).
func TestServeRefillWhole(t *testing.T) {
	runSteps(t, []string{"--algorithm", "token-bucket", "--rate", "1/s", "--capacity", "2", "--refill", "whole"}, []step{
		{0, 1, "200"}, // the key's grid: ticks at 1 s, 2 s, 3 s…
		{2500 * time.Millisecond, 3, "200 200 429/1"},
		{3250 * time.Millisecond, 2, "200 429/1"},
	})
}

// TestServeRefillInterval: the whole capacity at each tick of a 2 s timer
// started with the server; nothing flows back between ticks.
func TestServeRefillInterval(t *testing.T) {
	runSteps(t, []string{"--algorithm", "token-bucket", "--rate", "1/s", "--capacity", "2", "--refill", "interval"}, []step{
		{0, 3, "200 200 429/2"},
		{1200 * time.Millisecond, 1, "429/1"}, // continuous: a token since 1 s
		{2400 * time.Millisecond, 3, "200 200 429/2"},
	})
}

// TestServeInstances: --instances 3 with a local store admits three times
// the limit of 2 when every request goes to the next instance, and the
// limit when the store is shared; --key-fault collapse keys every client
// as one (the requests of the steps all come from one address, so it is
// the store that decides).
func TestServeInstances(t *testing.T) {
	fw := []string{"--algorithm", "fixed-window", "--limit", "2", "--window", "30s"}
	runSteps(t, append(fw, "--instances", "3", "--balance", "request"), []step{{0, 7, "200 200 200 200 200 200 429/30"}})
	runSteps(t, append(fw, "--instances", "3", "--balance", "request", "--store", "shared"), []step{{0, 3, "200 200 429/30"}})
}
