package scenario

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// The soundness harness over deployments: the reference server as K
// limiter instances behind one listener (serve --instances K --store
// local|shared --balance connection|request), run as TestSoundness runs
// its cases (the suite and a pattern, under disorder). Honest variants —
// one instance, or K sharing one store — may give no certain finding at
// warning or above; K instances each with the whole policy (local) over-
// admit K times, which is true, but never as a certain
// race-over-admission: nothing races there; with nothing disturbing the
// run and the paced series sent, they must be found a certain
// per-instance-limit (mustShowInstances).
//
// A case is a TestSoundness case (its seed's low bits, masked) with a
// deployment in the seed's top bits, so a failure replays alone:
//
//	go test ./internal/scenario -run 'TestSoundnessDeploy$' -count=1 -v -args -seed=N

// The deployments, by the level in a seed's top bits (0: none).
var soundDeploys = []struct {
	name string
	d    testserver.Deployment
}{
	{"none", testserver.Deployment{}},
	{"one", testserver.Deployment{Instances: 1}},
	{"shared-2-by-connection", testserver.Deployment{Instances: 2, Store: testserver.StoreShared, Balance: testserver.BalanceConnection}},
	{"shared-3-by-request", testserver.Deployment{Instances: 3, Store: testserver.StoreShared, Balance: testserver.BalanceRequest}},
	{"local-2-by-connection", testserver.Deployment{Instances: 2, Store: testserver.StoreLocal, Balance: testserver.BalanceConnection}},
	{"local-3-by-connection", testserver.Deployment{Instances: 3, Store: testserver.StoreLocal, Balance: testserver.BalanceConnection}},
	{"local-2-by-request", testserver.Deployment{Instances: 2, Store: testserver.StoreLocal, Balance: testserver.BalanceRequest}},
	{"local-3-by-request", testserver.Deployment{Instances: 3, Store: testserver.StoreLocal, Balance: testserver.BalanceRequest}},
}

// seedDeployShift places the deployment in a seed's top three bits (as
// the penalty cases do theirs).
const seedDeployShift = 61

// deployCasesPer is how many cases each deployment gets (×10 in soak).
const deployCasesPer = 12

// decodeDeployCase rebuilds a deployment case: the honest TestSoundness
// case of the seed's lower bits, run as the deployment of its top bits.
func decodeDeployCase(seed uint64) (*soundCase, error) {
	k := int(seed >> seedDeployShift)
	if k == 0 || k >= len(soundDeploys) {
		return nil, fmt.Errorf("seed %d: deployment %d out of range", seed, k)
	}
	c, err := decodeCase(seed & (1<<seedDeployShift - 1))
	if err != nil {
		return nil, err
	}
	if c.fault != 0 {
		return nil, fmt.Errorf("seed %d: deployment cases have no fault", seed)
	}
	c.seed, c.deploy = seed, soundDeploys[k].d
	return c, nil
}

// local reports whether c's instances each keep the whole policy.
func (c *soundCase) local() bool {
	return c.deploy.Instances > 1 && c.deploy.Store != testserver.StoreShared
}

// seriesChecks are the suite's checks that send the paced series: every
// other deployment case runs one of them (the suite entire, the burst or
// the race check alone), so that the series and the race meet instances.
var seriesChecks = []string{"all", verify.CheckBurst, verify.CheckRace}

// deployCaseList builds per deployment perDeploy cases from rows of
// covering arrays of TestSoundness's factors, each with a seed of its own;
// every other row runs a check that sends the paced series.
func deployCaseList(perDeploy int) []*soundCase {
	var cases []*soundCase
	rng := rand.New(rand.NewPCG(0xde, 0x91))
	for k := 1; k < len(soundDeploys); k++ {
		rows := allPairs(factorSizes(), rand.New(rand.NewPCG(uint64(k), 0xde)))
		for i := 0; i < perDeploy && i < len(rows); i++ {
			var lv [nFactors]int
			copy(lv[:], rows[i])
			if i%2 == 0 {
				lv[fChecks] = slices.Index(soundFactors[fChecks].levels, seriesChecks[i/2%len(seriesChecks)])
			}
			rnd := rng.Uint64() >> (seedLevelBits + seedFaultBits + 64 - seedDeployShift)
			c, err := decodeDeployCase(uint64(k)<<seedDeployShift | encodeSeed(lv, 0, rnd))
			if err != nil {
				continue
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// TestSoundnessDeploy runs the deployment cases; see the top of the file.
func TestSoundnessDeploy(t *testing.T) {
	if *soundSeed != 0 {
		c, err := decodeDeployCase(*soundSeed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %d: %s", c.seed, c)
		o := runSoundCase(t, c)
		for _, f := range o.findings {
			t.Logf("  %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
		}
		judgeDeploy(t, o)
		return
	}
	per := deployCasesPer
	if os.Getenv("RLPROBE_SOAK") == "1" {
		per *= 10
	}
	cases := deployCaseList(per)
	outcomes := make([]soundOutcome, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			name := soundDeploys[c.seed>>seedDeployShift].name
			t.Run(fmt.Sprintf("%s-%03d", name, i), func(t *testing.T) {
				t.Parallel()
				outcomes[i] = runSoundCase(t, c)
				judgeDeploy(t, outcomes[i])
			})
		}
	})
	honest, bad, local, perInstance := 0, 0, 0, 0
	for _, o := range outcomes {
		if o.c.local() {
			local++
			if certainPerInstance(o.findings) {
				perInstance++
			}
			continue
		}
		honest++
		if len(o.bad) > 0 || o.err != nil {
			bad++
		}
	}
	t.Logf("soundness over deployments: %d honest cases, %d with a certain finding at warning or above; %d with local instances, %d of them a certain per-instance-limit",
		honest, bad, local, perInstance)
}

// mustShowInstances reports whether c's local instances must be found
// certain: with nothing disturbing the run, the paced series sent (each
// on the connection it names), and their evidence readable — a
// balancer by connection, or by request with remaining values of a
// window that count down once per instance (a bucket's refill blurs
// them; the delaying leaky bucket queues rather than refuses).
func (c *soundCase) mustShowInstances() bool {
	if !c.local() || c.level(fDisorder) != "none" || !slices.Contains(seriesChecks, c.level(fChecks)) || !rejectsAtOnce(c) {
		return false
	}
	return c.deploy.Balance != testserver.BalanceRequest || !c.isBucket() && withHeaders(c)
}

// certainPerInstance reports whether fs hold a certain per-instance-limit.
func certainPerInstance(fs []verify.Finding) bool {
	return slices.ContainsFunc(fs, func(f verify.Finding) bool {
		return f.ID == verify.IDPerInstanceLimit && f.Certainty == verify.Certain
	})
}

// judgeDeploy fails the test for a certain finding of an honest
// deployment, or a certain race-over-admission of instances that each
// keep the whole policy.
func judgeDeploy(t *testing.T, o soundOutcome) {
	t.Helper()
	c := o.c
	replay := fmt.Sprintf("go test ./internal/scenario -run 'TestSoundnessDeploy$' -count=1 -v -args -seed=%d", c.seed)
	if o.err != nil {
		t.Errorf("case %s\n  seed=%d: %v\n  replay: %s", c, c.seed, o.err, replay)
		return
	}
	if c.mustShowInstances() && !certainPerInstance(o.findings) {
		var ids []string
		for _, f := range o.findings {
			ids = append(ids, fmt.Sprintf("%s/%s", f.ID, f.Certainty))
		}
		t.Errorf("local instances not found certain (want %s; found %v):\n  case %s\n  seed=%d\n  replay: %s",
			verify.IDPerInstanceLimit, ids, c, c.seed, replay)
	}
	var bad []verify.Finding
	if c.local() {
		for _, f := range o.findings {
			if f.ID == verify.IDRaceOverAdmission && f.Certainty == verify.Certain {
				bad = append(bad, f)
			}
		}
	} else {
		bad = o.bad
	}
	if len(bad) == 0 {
		return
	}
	var lines []string
	for _, f := range bad {
		lines = append(lines, fmt.Sprintf("    %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message))
	}
	what := "honest deployment, certain finding"
	if c.local() {
		what = "instances each with the whole policy, a certain race"
	}
	t.Errorf("%s:\n  case %s\n  seed=%d\n%s\n  replay: %s", what, c, c.seed, strings.Join(lines, "\n"), replay)
}

// TestDeployCaseSeeds: every deployment case replays from its seed, and
// every deployment has cases.
func TestDeployCaseSeeds(t *testing.T) {
	seen := map[string]int{}
	for _, c := range deployCaseList(deployCasesPer) {
		d, err := decodeDeployCase(c.seed)
		if err != nil || d.String() != c.String() {
			t.Fatalf("seed %d: %v\n%s\n%v", c.seed, err, c, d)
		}
		seen[soundDeploys[c.seed>>seedDeployShift].name]++
	}
	for _, d := range soundDeploys[1:] {
		if seen[d.name] != deployCasesPer {
			t.Errorf("%s: %d cases, want %d", d.name, seen[d.name], deployCasesPer)
		}
	}
}
