package watch

import (
	"fmt"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// DefaultShare is the default budget: the share of a rule's quota per
// period that watch may spend (2 %).
const DefaultShare = 0.02

// DefaultEvery is the default time between cycles.
const DefaultEvery = 5 * time.Minute

// Mode says how a cycle learns the limit.
type Mode string

// Modes.
const (
	// ModeHeaders: the target advertises its policy (RateLimit-Policy,
	// X-RateLimit-Limit…); a few requests within the budget read it.
	ModeHeaders Mode = "headers"
	// ModeExhaust: a per-key limit without headers; each cycle exhausts
	// watch's own identity (a key nobody else uses), which spends none of
	// the quota other clients share.
	ModeExhaust Mode = "exhaust"
	// ModeSample: a global limit without headers; the cycle samples within
	// the budget and can see headers, Retry-After and statuses appear or
	// vanish, but not the limit drift (a start-up warning says so).
	ModeSample Mode = "sample"
)

// Budget is what every cycle may send.
type Budget struct {
	// Share is the declared share of the quota (0.02 = 2 %).
	Share float64
	// Quota and Period are the binding rule's fresh quota and the time it
	// takes to come back (verify.Endpoint.Quota and Period).
	Quota  int64
	Period time.Duration
	// Every is the time between cycles.
	Every time.Duration
	// PerCycle is how many requests of the shared quota one cycle sends:
	// ⌊Share·Quota / ⌈Period/Every⌉⌋, so that no window of length Period
	// holds more than Share·Quota of watch's requests.
	PerCycle int
	// Exhaust is how many requests an exhausting cycle may send under
	// watch's own identity (ModeExhaust only): enough to find a limit up
	// to MaxGrowth times the declared one.
	Exhaust int
}

// MaxGrowth bounds the limit an exhausting cycle can find, as a multiple
// of the declared (or first inferred) quota.
const MaxGrowth = 4

// PlanBudget sizes the cycles for rule e: an error says why the budget
// cannot fit, and what would make it fit.
func PlanBudget(e verify.Endpoint, share float64, every time.Duration, mode Mode) (Budget, error) {
	b := Budget{Share: share, Quota: e.Quota(), Period: e.Period(), Every: every}
	switch {
	case !(share > 0 && share <= 1):
		return b, fmt.Errorf("watch: --budget must be a share of the quota above 0 and at most 100%%, not %s", units.HumanNumber(share*100)+"%")
	case every <= 0:
		return b, fmt.Errorf("watch: --every must be positive")
	case b.Quota <= 0 || b.Period <= 0:
		return b, fmt.Errorf("watch: the rule %q has no quota and period to budget against", e.String())
	}
	perPeriod := int64(math.Ceil(float64(b.Period) / float64(every)))
	allowed := share * float64(b.Quota)
	b.PerCycle = int(math.Floor(allowed / float64(perPeriod)))
	if mode == ModeExhaust {
		b.Exhaust = int(MaxGrowth*b.Quota) + 1
		if b.Period > every {
			return b, fmt.Errorf("watch: an exhausting cycle needs a fresh quota: --every %s is shorter than the rule's period %s; use --every %s or more",
				units.HumanDuration(every), units.HumanDuration(b.Period), units.HumanDuration(b.Period))
		}
		if fresh := e.Fresh(); fresh > every {
			return b, fmt.Errorf("watch: an exhausting cycle needs a fresh quota: --every %s is shorter than the declared penalty %s; use --every %s or more",
				units.HumanDuration(every), e.Penalty, units.HumanDuration(fresh))
		}
		return b, nil
	}
	if b.PerCycle < 1 {
		need := math.Ceil(float64(perPeriod)/float64(b.Quota)*1000) / 10
		return b, fmt.Errorf("watch: the budget cannot fit: %s%% of %d per %s is %s requests, spread over %d cycles of --every %s; raise --budget to %s%% or --every to %s",
			units.HumanNumber(share*100), b.Quota, units.HumanDuration(b.Period), units.HumanNumber(allowed), perPeriod,
			units.HumanDuration(every), units.HumanNumber(need), units.HumanDuration(b.Period))
	}
	return b, nil
}

// String says the plan in one line, as watch prints it at start.
func (b Budget) String() string {
	s := fmt.Sprintf("every %s: %d request(s) per cycle (%s%% of %d per %s)",
		units.HumanDuration(b.Every), b.PerCycle, units.HumanNumber(b.Share*100), b.Quota, units.HumanDuration(b.Period))
	if b.Exhaust > 0 {
		s += fmt.Sprintf(", plus up to %d under watch's own identity to find the limit", b.Exhaust)
	}
	return s
}
