package infer

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestInferQueueThatNeverRejects: nginx limit_req at 20/s with burst 1000
// (`serve --algorithm leaky-bucket --rate 20/s --burst 1000`) queues every
// request a probe sends. Infer keeps every hold under half the 10 s
// timeout, never aborts, and reports a leaky-bucket-queue draining at
// 20/s ± 5 % that never rejected, with queue null and the most it held,
// and max_rate_per_s the rate of accepted answers.
func TestInferQueueThatNeverRejects(t *testing.T) {
	for _, rate := range []float64{20, 2, 150} {
		cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: rate, Capacity: 1001}
		e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, timeout: 10 * time.Second}, origin)
		e.record = true
		inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%g/s: %v", rate, err)
		}
		if inf.Algorithm != LeakyBucketQueue || !inf.NeverRejects || inf.Params.Queue != nil || inf.Params.Capacity != nil {
			t.Fatalf("%g/s: %s never_rejects=%v queue=%+v capacity=%+v note %q; want leaky-bucket-queue, never rejects, queue and capacity null",
				rate, inf.Algorithm, inf.NeverRejects, inf.Params.Queue, inf.Params.Capacity, inf.Note)
		}
		r := inf.Params.RatePerS
		if r == nil || math.Abs(r.Value-rate)/rate > 0.05 || r.Low > rate || r.High < rate {
			t.Errorf("%g/s: rate_per_s %+v, want %g ± 5 %% inside its bounds", rate, r, rate)
		}
		if u := inf.Params.Undelayed; u == nil || u.Value != 1 {
			t.Errorf("%g/s: undelayed %+v, want 1", rate, u)
		}
		if m := inf.MaxRatePerS; m == nil || math.Abs(*m-rate)/rate > 0.10 {
			t.Errorf("%g/s: max_rate_per_s %v, want the rate of accepted answers, %g", rate, deref(m), rate)
		}
		if inf.Note == "" || !inf.Complete {
			t.Errorf("%g/s: note %q complete %v", rate, inf.Note, inf.Complete)
		}
		for _, res := range e.recorded {
			if res.Err != "" {
				t.Errorf("%g/s: seq %d %s: %s; infer must keep holds under the timeout", rate, res.Seq, res.Phase, res.Err)
				break
			}
		}
		t.Logf("%g/s: %s rate %+v in %d requests: %s", rate, inf.Algorithm, *r, inf.Requests, inf.Note)
	}
}

// TestInferQueueTimeouts: a queue so slow that the first burst already
// times out (1 request per second, burst 1000): the timeouts are
// observations, not the end; the staircase of the answers that came back
// gives the queue.
func TestInferQueueTimeouts(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 1001}
	e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, timeout: 10 * time.Second}, origin)
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if inf.Algorithm != LeakyBucketQueue || !inf.NeverRejects {
		t.Fatalf("%s never_rejects=%v, want a queue that never rejects", inf.Algorithm, inf.NeverRejects)
	}
	if r := inf.Params.RatePerS; r == nil || math.Abs(r.Value-1) > 0.05 {
		t.Errorf("rate_per_s %+v, want 1/s", r)
	}
}

// TestInferNoneNeedsFlatLatency: a server without limiter that slows down
// under a burst (it serves 2000 requests a second, one at a time) is not a
// queue: at the offered rate a steady stream is served as offered with
// flat latency, and infer says none, with the rate of accepted answers.
func TestInferNoneNeedsFlatLatency(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 2000, Capacity: 100000}
	e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond}, origin)
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if inf.Algorithm != None || !inf.Complete || inf.MaxRatePerS == nil {
		t.Fatalf("%s complete %v max rate %v note %q, want none: served at the offered rate", inf.Algorithm, inf.Complete, deref(inf.MaxRatePerS), inf.Note)
	}
}

// TestInferOverAdmission: a fixed window of 10 per 2 s, aligned to the
// epoch, whose counter is not atomic (a 2 ms round trip between read and
// write, X-RateLimit headers): a concurrent burst admits far more than 10
// and its remaining values repeat. Infer fits from paced experiments —
// fixed-window, limit 10, window 2 s, epoch — and reports the concurrent
// burst as over_admission.
func TestInferOverAdmission(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: sec(2), Align: limiter.AlignEpoch}
	e := newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, raceGap: 2 * time.Millisecond, xrl: true}, origin)
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "non-atomic fixed window", inf, want{fam: FixedWindow, align: AlignEpoch, limit: 10, window: 2})
	oa := inf.OverAdmission
	if oa == nil || oa.SequentialMax != 10 || oa.ConcurrentMax <= 10 || oa.Evidence == "" {
		t.Fatalf("over_admission %+v, want sequential 10, concurrent > 10, with evidence", oa)
	}
	t.Logf("%s limit %+v window %+v; over_admission %+v", inf.Algorithm, *inf.Params.Limit, *inf.Params.WindowS, *oa)

	// An atomic counter shows no over-admission.
	e = newSimEngine(simServer{cfg: cfg, oneWay: 200 * time.Microsecond, xrl: true}, origin)
	inf, err = Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	if inf.OverAdmission != nil {
		t.Errorf("atomic counter: over_admission %+v, want null", *inf.OverAdmission)
	}
}
