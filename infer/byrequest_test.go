package infer

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// TestSplitCountdowns: remaining values split into interleaved countdowns
// from their top, in stretches at every rise (a window edge), as K
// instances behind a per-request balancer advertise them; one limiter is
// one countdown, and values that neither continue a countdown nor start
// one at the top (a bucket's refill) do not split.
func TestSplitCountdowns(t *testing.T) {
	for _, tt := range []struct {
		name  string
		vs    []int64
		k     int
		final int // length of the last stretch
	}{
		{"one limiter", []int64{4, 3, 2, 1, 0}, 1, 5},
		{"three instances", []int64{4, 4, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0}, 3, 15},
		{"two instances, an edge within", []int64{4, 4, 3, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0}, 2, 10},
		{"a bucket's refill: a rise not to the top", []int64{4, 4, 3, 3, 2, 3, 2}, 0, 0},
		{"out of place", []int64{4, 2, 1}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, final := splitCountdowns(tt.vs)
			if c.k != tt.k || len(final) != tt.final {
				t.Errorf("k %d, last stretch %v; want k %d and a last stretch of %d", c.k, final, tt.k, tt.final)
			}
		})
	}
}

// TestRanOut: the last stretch of a refused run on one connection holds k
// countdowns each run to zero; a window edge within its first k requests
// leaves up to k more top values in front, the instances' share before the
// edge, which do not count.
func TestRanOut(t *testing.T) {
	four := []int64{4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0}
	for _, tt := range []struct {
		name string
		vs   []int64
		top  int64
		k    int
		ok   bool
	}{
		{"four instances, whole", four, 4, 4, true},
		{"an unseen edge after one request", append([]int64{4}, four...), 4, 4, true},
		{"an unseen edge after four requests", append([]int64{4, 4, 4, 4}, four...), 4, 4, true},
		{"more tops than an unseen edge leaves", append([]int64{4, 4, 4, 4, 4}, four...), 4, 0, false},
		{"two instances", []int64{2, 2, 1, 1, 0, 0}, 2, 2, true},
		{"one limiter", []int64{4, 3, 2, 1, 0}, 4, 0, false},
		{"not run out", four[:12], 4, 0, false},
		{"one countdown short", four[:19], 4, 0, false},
		{"a value out of place", []int64{4, 4, 3, 3, 1, 2, 2, 1, 0, 0}, 4, 0, false},
		{"interleaved out of turn", []int64{4, 4, 3, 2, 3, 2, 1, 1, 0, 0}, 4, 2, true},
		{"a constant, lying", []int64{4, 4, 4, 4}, 4, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if k, ok := ranOut(tt.vs, tt.top); k != tt.k || ok != tt.ok {
				t.Errorf("ranOut(%v, %d) = %d, %v; want %d, %v", tt.vs, tt.top, k, ok, tt.k, tt.ok)
			}
		})
	}
}

// TestCountdownsOfAnUnseenEdge: the paced run on one connection of the
// instance check under load (four fixed windows of 5, epoch-aligned, by
// request): an edge fell after its fourth request, so it admitted 24 with
// remaining values 4 eight times, then 3, 2, 1 and 0 four times each,
// before three refusals. That is four instances by request, not one
// limiter of 20 (which counted one countdown, and was the answer before).
func TestCountdownsOfAnUnseenEdge(t *testing.T) {
	var res []record.Result
	add := func(status int, remaining int64) {
		h := http.Header{}
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		at := int64(len(res)) * int64(18*time.Millisecond)
		res = append(res, record.Result{Type: record.TypeResult, Outcome: record.OutcomeResponse, Status: status, Wrote: at, TTFB: at + int64(time.Millisecond), Headers: h})
	}
	for range 4 {
		add(200, 4)
	}
	for v := int64(4); v >= 0; v-- {
		for range 4 {
			add(200, v)
		}
	}
	for range 3 {
		add(429, 0)
	}
	c, ok := countdownsOf(res, time.Unix(0, 0), 429)
	if !ok || c.k != 4 || c.top != 4 {
		t.Fatalf("countdownsOf = %+v, %v; want 4 countdowns from 4", c, ok)
	}
	if inst, _ := judgeByRequest(res, time.Unix(0, 0), 429, 20); inst == nil || inst.Value != 4 || inst.By != BalanceRequest {
		t.Errorf("judgeByRequest = %+v; want 4 instances by request", inst)
	}
}
