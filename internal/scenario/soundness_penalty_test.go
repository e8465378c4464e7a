package scenario

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// The soundness harness over servers with a penalty they declare: honest
// reference servers whose limiter blocks, extends or restarts after a
// refusal, checked against their own policy with the penalty declared, run
// as TestSoundness runs its cases (the suite and a pattern, under
// disorder); no certain finding at warning or above may come of it.
//
// A case is a TestSoundness case (its seed's low bits, masked) with a
// penalty in the seed's top bits, so a failure replays alone:
//
//	go test ./internal/scenario -run 'TestSoundnessPenalty$' -count=1 -v -args -seed=N

// The penalties, by the level in a seed's top bits (0: none).
var soundPenalties = []struct {
	name string
	// of returns the penalty for a case of period p.
	of func(p time.Duration) limiter.Penalty
	// buckets: the penalty applies to bucket algorithms too.
	buckets bool
}{
	{"none", func(time.Duration) limiter.Penalty { return limiter.Penalty{} }, true},
	// Shorter than the period: the key admits a whole quota again before
	// the policy's own count would.
	{"block-short", func(p time.Duration) limiter.Penalty {
		return limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: (p / 2).Truncate(time.Millisecond)}
	}, true},
	{"block-long", func(p time.Duration) limiter.Penalty {
		return limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 3 * p}
	}, true},
	{"extend", func(time.Duration) limiter.Penalty { return limiter.Penalty{Kind: limiter.PenaltyExtend} }, false},
	{"restart", func(time.Duration) limiter.Penalty { return limiter.Penalty{Kind: limiter.PenaltyRestart} }, false},
}

// seedPenaltyShift places the penalty in a seed's top three bits; the
// random part below stays under them.
const seedPenaltyShift = 61

// penaltyCasesPer is how many cases each penalty gets (×10 in soak).
const penaltyCasesPer = 12

// decodePenaltyCase rebuilds a penalty case: the TestSoundness case of
// the seed's lower bits, with the penalty of its top bits.
func decodePenaltyCase(seed uint64) (*soundCase, error) {
	k := int(seed >> seedPenaltyShift)
	if k >= len(soundPenalties) {
		return nil, fmt.Errorf("seed %d: penalty %d out of range", seed, k)
	}
	c, err := decodeCase(seed & (1<<seedPenaltyShift - 1))
	if err != nil {
		return nil, err
	}
	c.seed = seed
	if c.fault != 0 {
		return nil, fmt.Errorf("seed %d: penalty cases have no fault", seed)
	}
	pen := soundPenalties[k]
	if !pen.buckets && c.isBucket() {
		return nil, fmt.Errorf("seed %d: %s applies to windows only", seed, pen.name)
	}
	if c.level(fAlg) == "leaky-bucket" || c.level(fAlg) == "leaky-bucket-nodelay" {
		return nil, fmt.Errorf("seed %d: the leaky bucket takes no penalty", seed)
	}
	e, _ := c.policy()
	c.penalty = pen.of(e.Period())
	if c.penalty.Kind == limiter.PenaltyExtend {
		// Extend re-anchors the window at every request: its windows
		// start at a request, never at an epoch edge (limiter.Config
		// refuses the pair), so the case is first-request aligned.
		c.levels[fAlign] = slices.Index(soundFactors[fAlign].levels, string(limiter.AlignFirstRequest))
	}
	return c, nil
}

// penaltyCaseList builds per penalty the first perPenalty fitting rows of
// covering arrays of TestSoundness's factors, each with a seed of its own.
func penaltyCaseList(perPenalty int) []*soundCase {
	var cases []*soundCase
	rng := rand.New(rand.NewPCG(0x9e, 0xa1))
	for k := 1; k < len(soundPenalties); k++ {
		n := 0
		for r := 0; n < perPenalty && r < 100; r++ {
			for _, row := range allPairs(factorSizes(), rand.New(rand.NewPCG(uint64(r)+1, uint64(k)))) {
				var lv [nFactors]int
				copy(lv[:], row)
				rnd := rng.Uint64() >> (seedLevelBits + seedFaultBits + 64 - seedPenaltyShift)
				c, err := decodePenaltyCase(uint64(k)<<seedPenaltyShift | encodeSeed(lv, 0, rnd))
				if err != nil {
					continue
				}
				cases = append(cases, c)
				if n++; n == perPenalty {
					break
				}
			}
		}
	}
	return cases
}

// stepAppliesPenalties reports whether limiter.Step applies penalties
// (they land on their own branch): a key blocked for an hour is refused
// two seconds after its one-per-second quota was spent.
func stepAppliesPenalties() bool {
	c := limiter.Config{Algorithm: limiter.SlidingLog, Limit: 1, Window: time.Second,
		Penalty: limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: time.Hour}}
	now := time.Unix(1e9, 0)
	st, _ := c.Step(limiter.State{}, now)
	st, _ = c.Step(st, now)
	_, d := c.Step(st, now.Add(2*time.Second))
	return !d.Allowed
}

// TestSoundnessPenalty runs the penalty cases; see the top of the file.
func TestSoundnessPenalty(t *testing.T) {
	if !stepAppliesPenalties() {
		t.Skip("limiter.Step does not apply penalties yet: the servers would not keep the penalty they declare")
	}
	if *soundSeed != 0 {
		c, err := decodePenaltyCase(*soundSeed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %d: %s", c.seed, c)
		o := runSoundCase(t, c)
		for _, f := range o.findings {
			t.Logf("  %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
		}
		judgePenalty(t, o)
		return
	}
	per := penaltyCasesPer
	if os.Getenv("RLPROBE_SOAK") == "1" {
		per *= 10
	}
	cases := penaltyCaseList(per)
	outcomes := make([]soundOutcome, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%s-%03d", c.penalty.Kind, i), func(t *testing.T) {
				t.Parallel()
				outcomes[i] = runSoundCase(t, c)
				judgePenalty(t, outcomes[i])
			})
		}
	})
	bad := 0
	for _, o := range outcomes {
		if len(o.bad) > 0 || o.err != nil {
			bad++
		}
	}
	t.Logf("soundness with declared penalties: %d cases, %d with a certain finding at warning or above", len(outcomes), bad)
}

// judgePenalty fails the test for a certain finding of an honest server
// with a declared penalty.
func judgePenalty(t *testing.T, o soundOutcome) {
	t.Helper()
	c := o.c
	replay := fmt.Sprintf("go test ./internal/scenario -run 'TestSoundnessPenalty$' -count=1 -v -args -seed=%d", c.seed)
	switch {
	case o.err != nil:
		t.Errorf("case %s\n  seed=%d: %v\n  replay: %s", c, c.seed, o.err, replay)
	case len(o.bad) > 0:
		var lines []string
		for _, f := range o.bad {
			lines = append(lines, fmt.Sprintf("    %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message))
		}
		t.Errorf("honest server with a declared penalty, certain finding:\n  case %s\n  seed=%d\n%s\n  replay: %s", c, c.seed, strings.Join(lines, "\n"), replay)
	}
}

// TestPenaltyCaseSeeds: every penalty case replays from its seed, and
// the cases cover each penalty with each algorithm it applies to.
func TestPenaltyCaseSeeds(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range penaltyCaseList(penaltyCasesPer) {
		d, err := decodePenaltyCase(c.seed)
		if err != nil || d.String() != c.String() {
			t.Fatalf("seed %d: %v\n%s\n%v", c.seed, err, c, d)
		}
		seen[string(c.penalty.Kind)+" "+c.level(fAlg)] = true
	}
	for _, alg := range []string{"fixed-window", "sliding-log", "sliding-window-counter", "token-bucket", "gcra"} {
		for _, p := range soundPenalties[1:] {
			bucket := alg == "token-bucket" || alg == "gcra"
			if want := !bucket || p.buckets; want != seen[string(p.of(time.Second).Kind)+" "+alg] {
				t.Errorf("%s × %s: covered %v, want %v", p.name, alg, !want, want)
			}
		}
	}
}
