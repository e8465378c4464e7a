package deploytest

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/testenv"
)

// inferOnce runs `rlprobe infer url --json` and returns its exit code and
// document.
func inferOnce(t *testing.T, url string) (int, *infer.Inference) {
	t.Helper()
	var inf infer.Inference
	code := runJSON(t, &inf, "infer", url)
	return code, &inf
}

// quotaOf is the inferred quota: a window's limit or a bucket's capacity.
func quotaOf(inf *infer.Inference) float64 {
	switch {
	case inf.Params.Limit != nil:
		return inf.Params.Limit.Value
	case inf.Params.Capacity != nil:
		return inf.Params.Capacity.Value
	}
	return 0
}

func describeInference(code int, inf *infer.Inference) string {
	return fmt.Sprintf("exit %d: %s fit %s (closest %s), quota %g, instances %+v, over_admission %+v; %d requests in %.0fs; note: %s",
		code, inf.Algorithm, inf.Fit, inf.Closest, quotaOf(inf), inf.Instances, inf.OverAdmission, inf.Requests, inf.DurationS, inf.Note)
}

// inferAttempts is how often a deployment is inferred before the case
// fails (a new deployment each time): which instance a burst's connections
// reach depends on the order the server accepts them, and a second,
// independent inference that is right stands. An attempt that misses must
// not be exact.
const inferAttempts = 2

// The per-instance policies inferred: five in any 2 s (a sliding log and a
// fixed window on the clock) and a bucket of five at 4/s.
var (
	slidingLog  = []string{"--algorithm", "sliding-log", "--limit", "5", "--window", "2s"}
	fixedWindow = []string{"--algorithm", "fixed-window", "--limit", "5", "--window", "2s", "--align", "epoch"}
	tokenBucket = []string{"--algorithm", "token-bucket", "--rate", "4/s", "--capacity", "5"}
)

// TestInferInstances: the built binary infers `serve --instances K` over
// real sockets. A store per instance is K instances of the per-instance
// policy (quota 5) by connection (a fixed window, a sliding log) and by
// request (a fixed window, a sliding log: their interleaved remaining
// values show the instances); one shared store behind three instances is
// one limiter, instances null. A bucket per instance behind a
// per-connection balancer is a known gap over real sockets (the rest
// before the run on one connection is sized by the fit of the instances'
// sum, and the instance it reaches may not be whole again): it must only
// never be exact and wrong.
func TestInferInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time inference over sockets")
	}
	type deployment struct {
		name, fam string
		serve     []string
		instances int
		by        string // "" for a shared store
		known     bool   // a known gap: never exact and wrong, one attempt
	}
	var cases []deployment
	for _, k := range []int{2, 3, 4} {
		cases = append(cases,
			deployment{"sliding-log", string(infer.SlidingLog), slidingLog, k, infer.BalanceRequest, false},
			deployment{"fixed-window", string(infer.FixedWindow), fixedWindow, k, infer.BalanceRequest, false})
		if k == 3 || os.Getenv("RLPROBE_SOAK") != "" {
			// By connection, each run rests for the instances' whole
			// quota on a new connection (70–125 s a case): three
			// instances in every run, two and four in a soak
			// (infer's simulated deployments run all three always).
			cases = append(cases,
				deployment{"fixed-window", string(infer.FixedWindow), fixedWindow, k, infer.BalanceConnection, false},
				deployment{"sliding-log", string(infer.SlidingLog), slidingLog, k, infer.BalanceConnection, false})
		}
	}
	cases = append(cases,
		deployment{"token-bucket", string(infer.TokenBucket), tokenBucket, 3, infer.BalanceConnection, true},
		deployment{"sliding-log", string(infer.SlidingLog), slidingLog, 3, "", false},
		deployment{"token-bucket", string(infer.TokenBucket), tokenBucket, 3, "", false})
	for _, c := range cases {
		store, balance := "local", c.by
		if c.by == "" {
			store, balance = "shared", infer.BalanceConnection
		}
		t.Run(fmt.Sprintf("%s/%s-%d/by-%s", c.name, store, c.instances, balance), func(t *testing.T) {
			t.Parallel()
			var misses []string
			for range inferAttempts {
				// A deployment of its own each attempt: the next starts
				// from whole instances, not from what the last left.
				url := testenv.ServeBinary(t, testenv.BuildRlprobe(t), append(slices.Clone(c.serve),
					"--instances", fmt.Sprint(c.instances), "--store", store, "--balance", balance)...)
				code, inf := inferOnce(t, url)
				t.Log(describeInference(code, inf))
				var why string
				switch in := inf.Instances; {
				case code != 0:
					why = fmt.Sprintf("exit %d, want 0", code)
				case string(inf.Algorithm) != c.fam || quotaOf(inf) != 5:
					why = fmt.Sprintf("%s with quota %g, want %s with 5", inf.Algorithm, quotaOf(inf), c.fam)
				case c.by == "" && in != nil:
					why = fmt.Sprintf("instances %+v, want null", *in)
				case c.by != "" && (in == nil || in.Value != c.instances || in.By != c.by):
					why = fmt.Sprintf("instances %+v, want %d by %s", in, c.instances, c.by)
				case inf.OverAdmission != nil:
					why = fmt.Sprintf("over_admission %+v, want null", *inf.OverAdmission)
				}
				if why == "" {
					return
				}
				if inf.Fit == infer.FitExact {
					t.Errorf("exact, and wrong: %s", why)
				}
				if c.known {
					return
				}
				misses = append(misses, why)
			}
			t.Errorf("no attempt right: %v", misses)
		})
	}
}
