package scenario

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestSteadyAgainstTokenBucket: a steady 10/s schedule for 2 s against a
// token bucket of 5/s and capacity 5, in a synctest bubble over in-memory
// connections, gives exactly the decisions the limiter model makes for the
// scheduled arrival times: the first 9 requests (0 … 0.8 s) drain the
// bucket, then every other one passes — 14 accepted, at 0…0.8 s and 1.0,
// 1.2, 1.4, 1.6, 1.8 s.
func TestSteadyAgainstTokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 5}
		srv, err := testserver.New(testserver.Config{
			Routes:  []testserver.Route{{Policy: testserver.Policy{Limiter: lc, Dialects: []headers.Dialect{headers.None}}}},
			Handler: testserver.HandlerOptions{EchoArrival: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		ml := testserver.NewMemListener()
		if err := srv.StartListener(ml); err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		sess, err := session.New(session.Config{Probe: probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: ml.Dial, TimerPacing: true}})
		if err != nil {
			t.Fatal(err)
		}
		plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
			{Pattern: patterns.PatternSteady, Rate: 10, Duration: patterns.Duration(2 * time.Second)}}}
		s, err := sess.Schedule(plan)
		if err != nil {
			t.Fatal(err)
		}
		sends := slices.Collect(s.All()) // a steady plan is streamed
		if len(sends) != 20 {
			t.Fatalf("%d sends scheduled, want 20", len(sends))
		}
		if _, err := sess.Run(context.Background(), plan); err != nil {
			t.Fatal(err)
		}
		results := sess.Record().Results
		zero := sess.Record().Header.Start

		// The oracle: the limiter model stepped at the scheduled times.
		var st limiter.State
		var want, got []string
		for i, r := range results {
			at := zero.Add(time.Duration(r.Sched))
			var d limiter.Decision
			st, d = lc.Step(st, at)
			want = append(want, fmt.Sprintf("%v:%v", sends[i].At, d.Allowed))
			got = append(got, fmt.Sprintf("%v:%v", sends[i].At, r.Status == 200))
			if r.Arrival == nil || *r.Arrival != r.Sched {
				t.Errorf("seq %d: arrival %v, want exactly its schedule %d (fake time)", r.Seq, r.Arrival, r.Sched)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("accepted sequence\n got %v\nwant %v", got, want)
		}
		// And by hand.
		var accepted []time.Duration
		for i, r := range results {
			if r.Status == 200 {
				accepted = append(accepted, sends[i].At)
			}
		}
		ms := time.Millisecond
		hand := []time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 400 * ms, 500 * ms, 600 * ms, 700 * ms, 800 * ms,
			1000 * ms, 1200 * ms, 1400 * ms, 1600 * ms, 1800 * ms}
		if !slices.Equal(accepted, hand) {
			t.Errorf("accepted at %v, want %v", accepted, hand)
		}
	})
}
