package limiter

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestStepperMatchesStep: a compiled Stepper decides every request as
// Config.Step does, through Step and through StepOwned, for every
// algorithm and behaviour (a sliding log of a large limit too, whose owned
// log is stepped in place); Step never writes the State it is given.
func TestStepperMatchesStep(t *testing.T) {
	cfgs := append(propertyConfigs(),
		Config{Algorithm: SlidingLog, Limit: 60, Window: 2 * sec},
		Config{Algorithm: SlidingLog, Limit: 60, Window: 2 * sec, CountRejected: true, Penalty: Penalty{Kind: PenaltyRestart}},
	)
	for i, cfg := range cfgs {
		t.Run(fmt.Sprintf("%d/%s", i, cfg.Algorithm), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			s := cfg.Stepper()
			var want, viaStep, owned State
			now := t0
			for j := range 3000 {
				// Bursts and pauses: logs fill, drain and fill again.
				if rng.IntN(50) == 0 {
					now = now.Add(time.Duration(rng.IntN(3000)) * ms)
				} else {
					now = now.Add(time.Duration(rng.IntN(20_000)) * us)
				}
				before := slices.Clone(viaStep.Log)
				var w, g, o Decision
				want, w = cfg.Step(want, now)
				next, g := s.Step(viaStep, now)
				if !slices.Equal(viaStep.Log, before) {
					t.Fatalf("request %d: Stepper.Step wrote the State it was given", j)
				}
				viaStep = next
				owned, o = s.StepOwned(owned, now)
				if g != w || o != w {
					t.Fatalf("request %d at t0+%v: Step %+v, Stepper.Step %+v, StepOwned %+v", j, now.Sub(t0), w, g, o)
				}
				if !reflect.DeepEqual(normLog(viaStep), normLog(want)) || !reflect.DeepEqual(normLog(owned), normLog(want)) {
					t.Fatalf("request %d: states differ: Step %+v, Stepper.Step %+v, StepOwned %+v", j, want, viaStep, owned)
				}
			}
		})
	}
}
