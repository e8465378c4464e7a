package infer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// deployFamilies are the per-instance policies the deployment tests run:
// a window and a bucket.
var deployFamilies = []struct {
	name string
	cfg  limiter.Config
	want want
}{
	{"fixed window", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: sec(2), Align: limiter.AlignEpoch},
		want{fam: FixedWindow, align: AlignEpoch, limit: 5, window: 2}},
	{"token bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 6},
		want{fam: TokenBucket, rate: 2, capacity: 6}},
}

// budgetOverrun is how far past its announced budget a run may end: the
// experiment under way when the deadline passes finishes.
const budgetOverrun = 10 * time.Second

// inferDeployed infers the simulated deployment d of cfg (with
// X-RateLimit headers when xrl; a non-atomic shared counter when race).
func inferDeployed(t *testing.T, cfg limiter.Config, d simDeploy, xrl, race bool) *Inference {
	t.Helper()
	return inferDeployedOn(t, deployedEngine(cfg, d, xrl, race))
}

// deployedEngine is the simulated deployment d of cfg (see inferDeployed).
func deployedEngine(cfg limiter.Config, d simDeploy, xrl, race bool) *simEngine {
	srv := simServer{cfg: cfg, oneWay: time.Millisecond, deploy: d, xrl: xrl}
	if race {
		srv.raceGap = 2 * time.Millisecond
	}
	return newSimEngine(srv, origin)
}

// inferDeployedOn infers the simulated deployment e runs, and checks that
// the run kept to the budget it announced.
func inferDeployedOn(t *testing.T, e *simEngine) *Inference {
	t.Helper()
	var budgets []time.Duration
	inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock,
		OnBudget: func(_, b time.Duration) { budgets = append(budgets, b) }})
	if err != nil {
		t.Fatal(err)
	}
	// The run keeps to the budget it announced last (progress counts
	// against it), within one experiment's length.
	if n := len(budgets); n == 0 {
		t.Error("no budget announced")
	} else if took := units.Seconds(inf.DurationS); took > budgets[n-1]+budgetOverrun {
		t.Errorf("took %v, announced at most %v (budgets %v)", took, budgets[n-1], budgets)
	}
	t.Logf("%s fit %s, params %s, instances %+v, over_admission %+v; %d requests, %.1fs; %s",
		inf.Algorithm, inf.Fit, paramsText(inf.Params), inf.Instances, inf.OverAdmission, inf.Requests, inf.DurationS, inf.Note)
	return inf
}

// TestInferInstancesByConnection: K ∈ {2, 3, 4} instances behind a
// per-connection balancer, each with a store of its own, are inferred as K
// instances of the per-instance policy, with and without headers that
// carry remaining values (three instances and more repeat them as lost
// updates would).
func TestInferInstancesByConnection(t *testing.T) {
	t.Parallel()
	for _, fam := range deployFamilies {
		for _, k := range []int{2, 3, 4} {
			for _, xrl := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d/xrl=%v", fam.name, k, xrl), func(t *testing.T) {
					inf := inferDeployed(t, fam.cfg, simDeploy{Instances: k}, xrl, false)
					check(t, fam.name, inf, fam.want)
					if in := inf.Instances; in == nil || in.Value != k || in.Low != k || in.High != k || in.By != BalanceConnection {
						t.Errorf("instances %+v, want %d by connection", in, k)
					}
					if inf.OverAdmission != nil {
						t.Errorf("over_admission %+v, want null beside instances", *inf.OverAdmission)
					}
				})
			}
		}
	}
}

// TestInferInstancesSecondCheck: an engine that sent the opening's
// concurrent bursts over one connection (a transport warming up) showed
// the first instance check one quota to a burst and one to the one
// connection, and a single bucket fitted both: one instance. The design's
// bursts then open connections to both instances behind the balancer, and
// no single limiter reproduces them: the check runs again, on new
// connections, and finds two instances of the bucket.
func TestInferInstancesSecondCheck(t *testing.T) {
	t.Parallel()
	fam := deployFamilies[1]
	e := deployedEngine(fam.cfg, simDeploy{Instances: 2}, false, false)
	e.poolCap, e.poolCapUntil = 1, 20*time.Second
	e.record = true
	inf := inferDeployedOn(t, e)
	check(t, fam.name, inf, fam.want)
	if in := inf.Instances; in == nil || in.Value != 2 || in.By != BalanceConnection {
		t.Errorf("instances %+v, want 2 by connection", in)
	}
	// The one connection's run, once for each check, with other
	// experiments between them.
	runs, last := 0, ""
	for _, r := range e.recorded {
		if r.Phase == phaseOneConn && last != phaseOneConn {
			runs++
		}
		last = r.Phase
	}
	if runs < 2 {
		t.Errorf("the one connection ran %d times: the case no longer misleads the first check", runs)
	}
}

// TestInferOneInstance: one instance, a shared store behind K instances
// and a racy shared counter are not instances (null); the racy counter is
// over_admission.
func TestInferOneInstance(t *testing.T) {
	t.Parallel()
	for _, fam := range deployFamilies {
		for _, tt := range []struct {
			name string
			d    simDeploy
			race bool
		}{
			{"one", simDeploy{Instances: 1}, false},
			{"shared 3", simDeploy{Instances: 3, Shared: true}, false},
			{"racy shared 3", simDeploy{Instances: 3, Shared: true}, true},
		} {
			t.Run(fam.name+"/"+tt.name, func(t *testing.T) {
				inf := inferDeployed(t, fam.cfg, tt.d, true, tt.race)
				check(t, fam.name, inf, fam.want)
				if inf.Instances != nil {
					t.Errorf("instances %+v, want null", *inf.Instances)
				}
				if tt.race && inf.OverAdmission == nil {
					t.Errorf("over_admission null, want the race")
				}
			})
		}
	}
}

// TestInferInstancesByRequest: behind a balancer that rotates every
// request, K ∈ {2, 3, 4} instances admit K quotas to any connection. With
// remaining values in the headers, a window's K interleaved countdowns
// show them: K instances by request of the per-instance policy. Without
// headers a window's instances fill and empty together, and nothing tells
// them from one limiter of K quotas: infer must then not name a count of
// instances it cannot see nor call them a race. A bucket's refill blurs
// its countdowns: a known gap, held to the same honesty.
func TestInferInstancesByRequest(t *testing.T) {
	t.Parallel()
	for _, fam := range deployFamilies {
		for _, k := range []int{2, 3, 4} {
			if fam.want.fam == TokenBucket && k != 3 {
				continue // the known gap, once: its misfits are slow to reach
			}
			for _, xrl := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d/xrl=%v", fam.name, k, xrl), func(t *testing.T) {
					inf := inferDeployed(t, fam.cfg, simDeploy{Instances: k, ByRequest: true}, xrl, false)
					// A bucket's repeated remaining values read as lost
					// updates; with no family fitting, that is not a
					// confident answer (the known gap).
					if inf.OverAdmission != nil && inf.Fit != FitMisfit {
						t.Errorf("over_admission %+v beside a %s fit, want null", *inf.OverAdmission, inf.Fit)
					}
					in := inf.Instances
					if xrl && fam.want.fam != TokenBucket {
						check(t, fam.name, inf, fam.want)
						if in == nil || in.Value != k || in.Low != k || in.High != k || in.By != BalanceRequest {
							t.Errorf("instances %+v, want %d by request", in, k)
						}
						if len(inf.Advertised) != 0 {
							t.Errorf("advertised %+v: one instance's quota is what the headers claim", inf.Advertised)
						}
						return
					}
					if in != nil && (in.Low > k || in.High < k) {
						t.Errorf("instances %+v, want null or a range holding %d", *in, k)
					}
				})
			}
		}
	}
}

// TestInferSlidingLogByRequest: a sliding log of five in any 2 s on each
// of K instances behind a balancer that rotates every request. The
// instances give quota back one by one, each when its own oldest request
// ages out, and no single limiter of K·5 does that: the fit steps each
// request on the next instance, and names the per-instance log exactly.
func TestInferSlidingLogByRequest(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(2)}
	for _, k := range []int{2, 4} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			inf := inferDeployed(t, cfg, simDeploy{Instances: k, ByRequest: true}, true, false)
			check(t, "sliding log", inf, want{fam: SlidingLog, limit: 5, window: 2})
			if inf.Fit != FitExact {
				t.Errorf("fit %s, want exact", inf.Fit)
			}
			if in := inf.Instances; in == nil || in.Value != k || in.By != BalanceRequest {
				t.Errorf("instances %+v, want %d by request", in, k)
			}
		})
	}
}

// TestInferByRequestJitterExact: a window behind three instances by
// request, across a network of up to 3 ms of jitter (loopback under load),
// is named exactly.
//
//   - The session is paced (a burst is sent one request after another, so
//     that the rotation is known), and the design predicts its experiments
//     as sent. With seed 12, a design that predicted its bursts at one
//     instant chose the same spread-then-burst eleven times, each predicted
//     to tell the sliding log from a first-request fixed window and each
//     telling nothing; the budget ended with an approximate fixed window
//     (an incomplete run, exit 3, as TestInferInstances saw over real
//     sockets).
//   - A plain answer's rival is validated against too: with seed 3, a
//     limiter's own timer of 2.01 s reproduced every outcome of the epoch
//     window of 2 s, and the answer stayed approximate (29 seeds of 30).
func TestInferByRequestJitterExact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		seed uint64
		cfg  limiter.Config
		want want
	}{
		{"sliding log", 12, limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(2)}, want{fam: SlidingLog, limit: 5, window: 2}},
		{"sliding log", 13, limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(2)}, want{fam: SlidingLog, limit: 5, window: 2}},
		{"fixed window", 3, deployFamilies[0].cfg, deployFamilies[0].want},
	} {
		t.Run(fmt.Sprintf("%s/%d", c.name, c.seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(c.seed, 7))
			srv := simServer{cfg: c.cfg, oneWay: time.Millisecond, deploy: simDeploy{Instances: 3, ByRequest: true}, xrl: true}
			e := newSimEngine(srv, origin)
			e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(3 * time.Millisecond))) }
			inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s fit %s, params %s, instances %+v, %d requests in %.0fs; %s", inf.Algorithm, inf.Fit, paramsText(inf.Params), inf.Instances, inf.Requests, inf.DurationS, inf.Note)
			check(t, c.name, inf, c.want)
			if inf.Fit != FitExact || !inf.Complete {
				t.Errorf("fit %s, complete %v, want exact and complete", inf.Fit, inf.Complete)
			}
		})
	}
}

// TestInferByRequestJitterNeverExactAndWrong: a sliding log behind three
// instances by request, across a network whose up to 15 ms of jitter
// reorders what the balancer rotates. An answer may then be approximate,
// or even name the first-request fixed window that reproduces the same
// outcomes, but never exactly a family another one fits as well: seed 32
// validated a fixed window exactly while the sliding log still missed
// nothing.
func TestInferByRequestJitterNeverExactAndWrong(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(2)}
	for _, seed := range []uint64{30, 31, 32, 33} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 7))
			srv := simServer{cfg: cfg, oneWay: time.Millisecond, deploy: simDeploy{Instances: 3, ByRequest: true}, xrl: true}
			e := newSimEngine(srv, origin)
			e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(15 * time.Millisecond))) }
			inf, err := Infer(context.Background(), e, Options{Origin: origin, Now: e.clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s fit %s, params %s, instances %+v; %s", inf.Algorithm, inf.Fit, paramsText(inf.Params), inf.Instances, inf.Note)
			if inf.Fit == FitExact && inf.Algorithm != SlidingLog {
				t.Errorf("exact %s, and wrong (a sliding log)", inf.Algorithm)
			}
		})
	}
}

// TestInferByRequestWindowEdges: a fixed window on the clock behind four
// instances by request, with the run starting at phases of the window
// where an edge falls inside the opening's experiments. A concurrent
// burst of 16 is then admitted whole at a window's end, and a paced run
// that follows can cross the next edge: the paced exhaust must end
// refused before the recovery it starts from is trusted (phases 1.85 s
// and 1.95 s: a fit from a half-used window, or none at all), and the
// countdowns on one connection are read up to the first refusal (0.1 s
// and 1.0 s: a run admitted again across an edge hid the four instances,
// and one limit of 20 was answered exactly). Every phase must be inferred
// exactly and rightly.
func TestInferByRequestWindowEdges(t *testing.T) {
	t.Parallel()
	fw := deployFamilies[0]
	for _, phase := range []time.Duration{100, 1000, 1800, 1850, 1900, 1950} {
		t.Run(fmt.Sprint(phase*time.Millisecond), func(t *testing.T) {
			t.Parallel()
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(phase * time.Millisecond)
			srv := simServer{cfg: fw.cfg, oneWay: time.Millisecond, deploy: simDeploy{Instances: 4, ByRequest: true}, xrl: true}
			e := newSimEngine(srv, at)
			inf, err := Infer(context.Background(), e, Options{Origin: at, Now: e.clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s fit %s, params %s, instances %+v, %d requests in %.0fs; %s", inf.Algorithm, inf.Fit, paramsText(inf.Params), inf.Instances, inf.Requests, inf.DurationS, inf.Note)
			check(t, fw.name, inf, fw.want)
			if in := inf.Instances; in == nil || in.Value != 4 || in.By != BalanceRequest {
				t.Errorf("instances %+v, want 4 by request", in)
			}
			if inf.Fit != FitExact || !inf.Complete {
				t.Errorf("fit %s, complete %v, want exact and complete", inf.Fit, inf.Complete)
			}
		})
	}
}

// TestInferEpochNotTiedWithItsTimer: a fixed window on the clock behind
// two instances by connection, started at phases where a fixed window on
// a server-wide timer of 2.002 s or 1.998 s reproduced every outcome as
// well: the answer stayed approximate ("the validations did not tell them
// apart"). A timer of the window's length at phase 0 is the epoch window
// itself, so a timer that only ties is no rival: the answer is exact.
func TestInferEpochNotTiedWithItsTimer(t *testing.T) {
	t.Parallel()
	fw := deployFamilies[0]
	for _, phase := range []time.Duration{400, 500} {
		t.Run(fmt.Sprint(phase*time.Millisecond), func(t *testing.T) {
			t.Parallel()
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(phase * time.Millisecond)
			srv := simServer{cfg: fw.cfg, oneWay: time.Millisecond, deploy: simDeploy{Instances: 2}, xrl: true}
			e := newSimEngine(srv, at)
			inf, err := Infer(context.Background(), e, Options{Origin: at, Now: e.clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s fit %s, params %s, instances %+v; %s", inf.Algorithm, inf.Fit, paramsText(inf.Params), inf.Instances, inf.Note)
			check(t, fw.name, inf, fw.want)
			if in := inf.Instances; in == nil || in.Value != 2 || in.By != BalanceConnection {
				t.Errorf("instances %+v, want 2 by connection", in)
			}
			if inf.Fit != FitExact {
				t.Errorf("fit %s, want exact", inf.Fit)
			}
		})
	}
}

// TestDeploymentPhases (RLPROBE_SOAK=1): every simulated deployment of a
// fixed window on the epoch and a sliding log, five per 2 s, behind 2, 3
// and 4 instances by request and by connection, started at window phases
// 0.1 s apart (without jitter) and 0.2 s apart (with up to 3 ms of it).
// No answer may be exact and wrong (family, quota, instances); the share
// that is exact is logged per deployment. The window edges that fall
// inside the opening's experiments at some phases and not at others are
// where stop 12's CI failure hid: one phase per run over real sockets
// cannot show them.
func TestDeploymentPhases(t *testing.T) {
	if os.Getenv("RLPROBE_SOAK") == "" {
		t.Skip("a soak size (RLPROBE_SOAK=1): 360 simulated inferences")
	}
	t.Parallel()
	fams := []struct {
		name string
		cfg  limiter.Config
		want want
	}{
		deployFamilies[0],
		{"sliding log", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: sec(2)}, want{fam: SlidingLog, limit: 5, window: 2}},
	}
	for _, fam := range fams {
		for _, k := range []int{2, 3, 4} {
			for _, byRequest := range []bool{true, false} {
				for _, jitter := range []time.Duration{0, 3 * time.Millisecond} {
					by := BalanceConnection
					if byRequest {
						by = BalanceRequest
					}
					step := 100 * time.Millisecond
					if jitter > 0 {
						step = 200 * time.Millisecond
					}
					t.Run(fmt.Sprintf("%s/%d/by-%s/jitter=%v", fam.name, k, by, jitter), func(t *testing.T) {
						t.Parallel()
						exact := 0
						var not []string
						for phase := time.Duration(0); phase < 2*time.Second; phase += step {
							at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(phase)
							srv := simServer{cfg: fam.cfg, oneWay: time.Millisecond, deploy: simDeploy{Instances: k, ByRequest: byRequest}, xrl: true}
							e := newSimEngine(srv, at)
							if jitter > 0 {
								rng := rand.New(rand.NewPCG(uint64(phase), uint64(k)))
								e.jitter = func(int64) time.Duration { return time.Duration(rng.Int64N(int64(jitter))) }
							}
							inf, err := Infer(context.Background(), e, Options{Origin: at, Now: e.clock})
							if err != nil {
								t.Fatalf("phase %v: %v", phase, err)
							}
							right := inf.Algorithm == fam.want.fam && inf.Params.Limit != nil && inf.Params.Limit.Value == float64(fam.want.limit) &&
								inf.Instances != nil && inf.Instances.Value == k && inf.Instances.By == by
							switch {
							case inf.Fit == FitExact && right:
								exact++
							case inf.Fit == FitExact:
								t.Errorf("phase %v: exact, and wrong: %s, params %s, instances %+v", phase, inf.Algorithm, paramsText(inf.Params), inf.Instances)
							default:
								not = append(not, fmt.Sprintf("%v: %s %s (%s, instances %+v)", phase, inf.Fit, inf.Algorithm, paramsText(inf.Params), inf.Instances))
							}
						}
						t.Logf("%d of %d phases exact and right; the others: %v", exact, exact+len(not), not)
					})
				}
			}
		}
	}
}
