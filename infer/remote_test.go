package infer

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestInferRemote infers limiters across a slow, jittery network: 40 ms
// each way, and up to 40 ms more on the way back, random per answer. The
// answer's lateness says nothing about when the server decided, so it
// must not blur arrivals into clusters so wide that the families look
// alike.
func TestInferRemote(t *testing.T) {
	t.Parallel()
	for _, i := range []int{1, 4, 6, 11} { // FW first-request, SWC, token bucket, leaky bucket with delay
		tt := truthTable[i]
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		e := newSimEngine(simServer{cfg: tt.cfg, oneWay: 40 * time.Millisecond}, origin)
		e.stall = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(40 * time.Millisecond))) }
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		check(t, tt.name, inf, tt.want)
	}
}
