package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/testserver"
)

// deployedServer serves one route of policy p as deployment d on an
// in-memory listener and returns the probe options reaching it.
func deployedServer(t *testing.T, p testserver.Policy, d testserver.Deployment, mem testserver.MemoryConfig) probe.Options {
	t.Helper()
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Policy: p}},
		Handler: testserver.HandlerOptions{EchoArrival: true, Deployment: d}, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: ml.Dial, TimerPacing: true}
}

// inferDeployment infers the reference server running p as d, in fake
// time through the probe engine.
func inferDeployment(t *testing.T, p testserver.Policy, d testserver.Deployment, mem testserver.MemoryConfig) *infer.Inference {
	t.Helper()
	var inf *infer.Inference
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Config{Probe: deployedServer(t, p, d, mem), Command: "infer", Tool: "test",
			Caps: Caps{MaxRequests: 5000, MaxDuration: 10 * time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		inf, err = s.Infer(context.Background(), InferOptions{MaxWindow: 10 * time.Second})
		if inf == nil {
			t.Fatalf("Infer: %v", err)
		}
		if err != nil && !errors.Is(err, ErrIncomplete) && inf.Fit != infer.FitMisfit {
			t.Fatalf("Infer = %+v, %v", inf, err)
		}
	})
	t.Logf("%s fit %s, params %+v %+v %+v %+v, instances %+v, over_admission %+v; %d requests, %.1fs; %s",
		inf.Algorithm, inf.Fit, inf.Params.Limit, inf.Params.WindowS, inf.Params.Capacity, inf.Params.RatePerS,
		inf.Instances, inf.OverAdmission, inf.Requests, inf.DurationS, inf.Note)
	return inf
}

// deployPolicies are a window and a bucket, per instance.
var deployPolicies = []struct {
	name  string
	p     testserver.Policy
	fam   infer.Family
	count float64
}{
	{"fixed-window", testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}, Status: 429}, infer.FixedWindow, 5},
	{"token-bucket", testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 6}, Status: 429}, infer.TokenBucket, 6},
}

// countOf is the inferred per-instance quota: limit or capacity.
func countOf(inf *infer.Inference) float64 {
	switch {
	case inf.Params.Limit != nil:
		return inf.Params.Limit.Value
	case inf.Params.Capacity != nil:
		return inf.Params.Capacity.Value
	}
	return 0
}

// attempts is how often a deployment case runs before it fails: the
// goroutines' order within one fake instant (which of a concurrent
// burst's dials the server accepts first, how many connections the
// engine opens for it) changes from run to run, and with it which
// instances a burst reaches; a second, independent inference that is
// right stands (as the selftest's retryRaces does). Every attempt that
// misses must say so: never an exact fit beside a wrong instance count.
const attempts = 2

// tryDeployment runs the case until right is true, at most attempts
// times, and fails when no attempt was right or a wrong one was exact.
func tryDeployment(t *testing.T, p testserver.Policy, d testserver.Deployment, mem testserver.MemoryConfig, right func(*infer.Inference) string) {
	t.Helper()
	var misses []string
	for range attempts {
		inf := inferDeployment(t, p, d, mem)
		why := right(inf)
		if why == "" {
			return
		}
		if inf.Fit == infer.FitExact {
			t.Errorf("exact, and wrong: %s", why)
		}
		misses = append(misses, why)
	}
	t.Errorf("no attempt right: %v", misses)
}

// TestInferDeployments: the reference server in-process, through the
// probe engine (Send.Conn on its in-memory connections): K ∈ {2, 3, 4}
// instances with a store of their own behind a per-connection balancer
// are K instances of the per-instance policy; a shared store behind three
// is one limiter (instances null), and a racy shared counter is
// over_admission.
func TestInferDeployments(t *testing.T) {
	for _, pol := range deployPolicies {
		for _, k := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/local/%d", pol.name, k), func(t *testing.T) {
				tryDeployment(t, pol.p, testserver.Deployment{Instances: k, Store: testserver.StoreLocal, Balance: testserver.BalanceConnection}, testserver.MemoryConfig{},
					func(inf *infer.Inference) string {
						switch in := inf.Instances; {
						case inf.Algorithm != pol.fam || countOf(inf) != pol.count:
							return fmt.Sprintf("%s with quota %g, want %s with %g per instance", inf.Algorithm, countOf(inf), pol.fam, pol.count)
						case in == nil || in.Value != k || in.By != infer.BalanceConnection:
							return fmt.Sprintf("instances %+v, want %d by connection", in, k)
						case inf.OverAdmission != nil:
							return fmt.Sprintf("over_admission %+v beside instances", *inf.OverAdmission)
						}
						return ""
					})
			})
		}
		t.Run(pol.name+"/shared/3", func(t *testing.T) {
			tryDeployment(t, pol.p, testserver.Deployment{Instances: 3, Store: testserver.StoreShared, Balance: testserver.BalanceConnection}, testserver.MemoryConfig{},
				func(inf *infer.Inference) string {
					switch {
					case inf.Algorithm != pol.fam || countOf(inf) != pol.count:
						return fmt.Sprintf("%s with quota %g, want %s with %g", inf.Algorithm, countOf(inf), pol.fam, pol.count)
					case inf.Instances != nil:
						return fmt.Sprintf("instances %+v, want null", *inf.Instances)
					}
					return ""
				})
		})
	}
	// A racy shared counter (check-then-act with a 2 ms round trip to the
	// store) behind three instances admits more to a concurrent burst, and
	// one quota to paced requests on any connection: over_admission.
	t.Run("fixed-window/racy-shared/3", func(t *testing.T) {
		pol := deployPolicies[0]
		tryDeployment(t, pol.p, testserver.Deployment{Instances: 3, Store: testserver.StoreShared, Balance: testserver.BalanceConnection},
			testserver.MemoryConfig{NonAtomic: true, RaceGap: 2 * time.Millisecond},
			func(inf *infer.Inference) string {
				switch {
				case inf.Algorithm != pol.fam || countOf(inf) != pol.count:
					return fmt.Sprintf("%s with quota %g, want %s with %g", inf.Algorithm, countOf(inf), pol.fam, pol.count)
				case inf.Instances != nil || inf.OverAdmission == nil:
					return fmt.Sprintf("instances %+v, over_admission %+v: want the race, not instances", inf.Instances, inf.OverAdmission)
				}
				return ""
			})
	})
}
