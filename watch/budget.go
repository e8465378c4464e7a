package watch

import (
	"fmt"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// DefaultShare is the default budget: the share of a rule's quota that
// watch may spend (2 %), in any period of the rule and over any --every.
const DefaultShare = 0.02

// DefaultEvery is the default time between cycles.
const DefaultEvery = 5 * time.Minute

// Mode says how a cycle learns the limit.
type Mode string

// Modes. The mode is chosen after the first request of the first cycle.
const (
	// ModeHeaders: the target sends a rate-limit header dialect rlprobe
	// reads; each cycle's budgeted requests read it.
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

// Budget is what watch may send of the quota it shares with other clients
// (every request but an exhausting burst's). It keeps two bounds:
//
//   - over any interval of length Every, at most Share × Admits (what the
//     rule admits in Every: windows Limit·⌈Every/Window⌉, buckets
//     Capacity + Rate·Every);
//   - over any interval of the rule's Period, at most
//     max(1, ⌊Share × Quota⌋): one request per period is always allowed
//     when the first bound holds.
//
// Cycles start at least Every after the previous cycle's last budgeted
// request, so both hold for any interval when each cycle sends at most
// PerCycle.
type Budget struct {
	// Share is the declared share of the quota (--budget; 0.02 = 2 %).
	Share float64
	// Quota and Period are the binding rule's fresh quota and the time it
	// takes to come back (verify.Endpoint.Quota and Period).
	Quota  int64
	Period time.Duration
	// Every is the time between cycles.
	Every time.Duration
	// Admits is how many requests the rule admits in Every.
	Admits float64
	// PerCycle is how many budgeted requests one cycle sends: the smaller
	// of ⌊Share·Admits⌋ and max(1, ⌊Share·Quota⌋) / ⌈Period/Every⌉
	// (rounded down; that many cycles can fall within one period).
	PerCycle int
	// PerPeriodMax is the most budgeted requests in any interval of length
	// Period: PerCycle × ⌈Period/Every⌉, never above max(1, ⌊Share·Quota⌋).
	PerPeriodMax int
	// Exhaust is how many requests an exhausting cycle may send under
	// watch's own identity (ModeExhaust only): enough to find a limit up
	// to MaxGrowth times the declared one.
	Exhaust int
}

// MaxGrowth bounds the limit an exhausting cycle can find, as a multiple
// of the declared (or first inferred) quota.
const MaxGrowth = 4

// admits is what rule e admits in d: windows N·⌈d/W⌉, buckets C + r·d.
func admits(e verify.Endpoint, d time.Duration) float64 {
	if e.IsBucket() {
		return float64(e.Quota()) + e.Rate*d.Seconds()
	}
	return float64(e.Limit) * math.Ceil(float64(d)/float64(e.Window))
}

// PlanBudget sizes the cycles for rule e. An error (class Usage) says why
// the budget cannot fit and suggests the --budget and the --every that
// would (session.Fixes reads them).
func PlanBudget(e verify.Endpoint, share float64, every time.Duration, mode Mode) (Budget, error) {
	b, err := planShared(e, share, every)
	if err != nil || b.PerCycle >= 1 && mode != ModeExhaust {
		return b, err
	}
	if mode == ModeExhaust {
		return b, b.planExhaust(e)
	}
	allowed := share * b.Admits
	msg := fmt.Sprintf("watch: the budget cannot fit: %s%% of %s is %s request(s) per --every %s",
		units.HumanNumber(share*100), what(e, every), units.HumanNumber(allowed), units.HumanDuration(every))
	if cycles := cyclesPerPeriod(b.Period, every); allowed >= 1 {
		msg = fmt.Sprintf("watch: the budget cannot fit: %s%% of %d per %s is %d request(s), shared by the %d cycles of --every %s within one period",
			units.HumanNumber(share*100), b.Quota, units.HumanDuration(b.Period), perPeriod(share, b.Quota), cycles, units.HumanDuration(every))
	}
	var fixes []session.Fix
	if s, ok := fitShare(e, share, every); ok {
		fixes = append(fixes, session.Fix{Flag: "--budget", Value: s})
	}
	if d, ok := fitEvery(e, share, every); ok {
		fixes = append(fixes, session.Fix{Flag: "--every", Value: d})
	}
	if len(fixes) == 0 {
		return b, session.Errorf(session.Usage, "%s", msg)
	}
	return b, session.Suggest(session.Usage, msg, fixes...)
}

// what names what rule e admits in d, for messages.
func what(e verify.Endpoint, d time.Duration) string {
	if e.IsBucket() {
		return fmt.Sprintf("%s the rule admits in %s (capacity %d + %s × %s)", units.HumanNumber(admits(e, d)), units.HumanDuration(d),
			e.Quota(), units.FormatRate(e.Rate), units.HumanDuration(d))
	}
	return fmt.Sprintf("%s the rule admits in %s (%d per %s)", units.HumanNumber(admits(e, d)), units.HumanDuration(d), e.Limit, units.HumanDuration(e.Window))
}

// perPeriod is the second bound: max(1, ⌊share × quota⌋).
func perPeriod(share float64, quota int64) int {
	return max(1, int(math.Floor(share*float64(quota)+1e-9)))
}

// cyclesPerPeriod is how many cycles, each starting at least every after
// the previous one's last request, can send within one period.
func cyclesPerPeriod(period, every time.Duration) int {
	return int((period + every - 1) / every)
}

// planShared checks the settings and sizes the budgeted requests.
func planShared(e verify.Endpoint, share float64, every time.Duration) (Budget, error) {
	b := Budget{Share: share, Quota: e.Quota(), Period: e.Period(), Every: every}
	switch {
	case !(share > 0 && share <= 1):
		return b, fmt.Errorf("watch: --budget must be a share of the quota above 0 and at most 100%%, not %s", units.HumanNumber(share*100)+"%")
	case every <= 0:
		return b, fmt.Errorf("watch: --every must be positive")
	case b.Quota <= 0 || b.Period <= 0:
		return b, fmt.Errorf("watch: the rule %q has no quota and period to budget against", e.String())
	}
	b.Admits = admits(e, every)
	cycles := cyclesPerPeriod(b.Period, every)
	b.PerCycle = min(int(math.Floor(share*b.Admits+1e-9)), perPeriod(share, b.Quota)/cycles)
	b.PerPeriodMax = max(b.PerCycle, 0) * cycles
	return b, nil
}

// planExhaust sizes an exhausting cycle: a fresh quota at each cycle.
func (b *Budget) planExhaust(e verify.Endpoint) error {
	b.Exhaust = int(MaxGrowth*b.Quota) + 1
	if b.Period > b.Every {
		return session.Suggest(session.Usage, fmt.Sprintf("watch: an exhausting cycle needs a fresh quota: --every %s is shorter than the rule's period %s",
			units.HumanDuration(b.Every), units.HumanDuration(b.Period)), session.Fix{Flag: "--every", Value: units.FormatDuration(b.Period)})
	}
	if fresh := e.Fresh(); fresh > b.Every {
		return session.Suggest(session.Usage, fmt.Sprintf("watch: an exhausting cycle needs a fresh quota: --every %s is shorter than the declared penalty %s",
			units.HumanDuration(b.Every), e.Penalty), session.Fix{Flag: "--every", Value: units.FormatDuration(fresh)})
	}
	return nil
}

// fitShare is the least --budget (in tenths of a percent, as --budget
// reads it) with which the budget fits at every; false when none does.
func fitShare(e verify.Endpoint, share float64, every time.Duration) (string, bool) {
	for tenths := int(math.Ceil(share * 1000)); tenths <= 1000; tenths++ {
		s := units.HumanNumber(float64(tenths)/10) + "%"
		v, err := ParseShare(s)
		if err != nil {
			continue
		}
		if b, err := planShared(e, v, every); err == nil && b.PerCycle >= 1 {
			return s, true
		}
	}
	return "", false
}

// fitEvery is the least --every, in whole seconds, with which the budget
// fits at share; false when none up to a day does.
func fitEvery(e verify.Endpoint, share float64, every time.Duration) (string, bool) {
	// From the bounds: one request per cycle needs share·admits(every) ≥ 1
	// and a whole period per cycle (or max(1, ⌊share·quota⌋) cycles).
	need := float64(e.Period()) / float64(perPeriod(share, e.Quota()))
	if e.IsBucket() && e.Rate > 0 {
		need = max(need, (1/share-float64(e.Quota()))/e.Rate*float64(time.Second))
	} else if e.Limit > 0 {
		// ⌈every/W⌉ windows of Limit: a whole number of windows.
		need = max(need, float64(e.Window)*math.Ceil(1/(share*float64(e.Limit))-1e-9))
	}
	d := max(every, time.Duration(math.Ceil(need/float64(time.Second)))*time.Second)
	for ; d <= 24*time.Hour; d += time.Second {
		if b, err := planShared(e, share, d); err == nil && b.PerCycle >= 1 {
			return units.FormatDuration(d), true
		}
	}
	return "", false
}

// SharePerPeriod is the share of the quota the budgeted requests really
// use at most in one period: PerPeriodMax / Quota (more than Share when
// one request per period is more).
func (b Budget) SharePerPeriod() float64 {
	if b.Quota <= 0 {
		return 0
	}
	return float64(b.PerPeriodMax) / float64(b.Quota)
}

// String says the plan in one line, as watch prints it at start: the
// share it really uses.
func (b Budget) String() string {
	s := fmt.Sprintf("every %s: %d request(s) per cycle, at most %d in any %s: %s%% of the quota of %d",
		units.HumanDuration(b.Every), b.PerCycle, b.PerPeriodMax, units.HumanDuration(b.Period),
		units.HumanNumber(b.SharePerPeriod()*100), b.Quota)
	if used := b.SharePerPeriod(); used > b.Share+1e-9 {
		s += fmt.Sprintf(" (above --budget %s%%: one request per period is the least a cycle sends)", units.HumanNumber(b.Share*100))
	}
	if b.Exhaust > 0 {
		s += fmt.Sprintf(", plus up to %d under watch's own identity to find the limit", b.Exhaust)
	}
	return s
}
