package session_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// serve starts the reference server with policy on an in-memory listener
// and returns the probe options that reach it, and its stop function.
func serve(policy testserver.Policy) (probe.Options, func()) {
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Policy: policy}}})
	if err != nil {
		panic(err)
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		panic(err)
	}
	opt := probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: ml.Dial}
	return opt, func() { srv.Shutdown(context.Background()) }
}

// nginx limits like nginx's "limit_req rate=1r/s burst=3 nodelay",
// answering 503 without rate-limit headers.
var nginx = testserver.Policy{
	Limiter:    limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true},
	Status:     503,
	Dialects:   []headers.Dialect{headers.None},
	RetryAfter: testserver.RetryMissing,
}

// Run fires a burst of 8 requests at an nginx-like limiter: the bucket
// holds four, the other four are rejected.
func ExampleSession_Run() {
	opt, stop := serve(nginx)
	defer stop()
	s, err := session.New(session.Config{Probe: opt, Tool: "example"})
	if err != nil {
		panic(err)
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{{Pattern: "burst", Count: 8}}}
	sum, err := s.Run(context.Background(), plan)
	if err != nil {
		panic(err)
	}
	fmt.Printf("sent %d: %d accepted, %d rejected\n", sum.Sent, sum.Accepted, sum.Rejected)
	fmt.Println("end:", s.Record().End.Reason)
	// Output:
	// sent 8: 4 accepted, 4 rejected
	// end: completed
}

// Check runs the burst check of "rate 1/s, capacity 4, rejections with
// 503" against the nginx-like limiter: it keeps that promise, but sends
// no Retry-After (a warning, below the fail level) and no rate-limit
// header (for information, since none was declared).
func ExampleSession_Check() {
	opt, stop := serve(nginx)
	defer stop()
	s, err := session.New(session.Config{Probe: opt, Tool: "example"})
	if err != nil {
		panic(err)
	}
	pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Rate: 1, Capacity: 4, Status: 503}}}.Normalize()
	rep, err := s.Check(context.Background(), &pol, session.CheckOptions{Only: []string{"burst"}})
	if err != nil {
		panic(err)
	}
	fmt.Println("verdict:", rep.Verdict)
	for _, f := range rep.Findings {
		fmt.Println(f.Severity, f.ID)
	}
	// Output:
	// verdict: pass
	// warning retry-after-missing
	// info ratelimit-header-missing
}

// Infer tells a token bucket of 5/s and capacity 5 from the other
// families by experiments, from the outside.
func ExampleSession_Infer() {
	opt, stop := serve(testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 5}})
	defer stop()
	s, err := session.New(session.Config{Probe: opt, Tool: "example", Caps: session.Caps{MaxDuration: time.Minute}})
	if err != nil {
		panic(err)
	}
	inf, err := s.Infer(context.Background(), session.InferOptions{MaxWindow: 2 * time.Second})
	if err != nil && !errors.Is(err, session.ErrIncomplete) { // a loaded machine may cut it short
		panic(err)
	}
	fmt.Println("algorithm:", inf.Algorithm)
	fmt.Println("capacity:", inf.Params.Capacity.Value)
	// Output:
	// algorithm: token-bucket
	// capacity: 5
}
