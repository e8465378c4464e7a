package limiter

import (
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
)

// PenaltyKind names what a limiter does to a key after it refuses one of
// its requests, beyond counting it (CountRejected). The spellings are the
// contract's (serve --penalty, policy files, the infer document).
type PenaltyKind string

// The penalties.
const (
	// PenaltyNone: refusals change nothing but what CountRejected counts.
	PenaltyNone PenaltyKind = ""
	// PenaltyBlock: the first refused request starts a block of
	// Penalty.Duration from that refusal; during it every request is
	// refused and none extends it; when it ends the key starts from the
	// zero State. Applies to every algorithm but LeakyBucket. RetryAfter,
	// UntilMore and UntilFull of a refusal are the time to the block's end.
	PenaltyBlock PenaltyKind = "block"
	// PenaltyExtend: every request, admitted or refused, moves the key's
	// window end to now + Window; the count resets only after Window with
	// no request at all, so a client that never pauses for Window gets
	// Limit requests in total. Window algorithms only. Precisely, each
	// request re-anchors what is counted at its time t (see [State]):
	//   - fixed-window: the window becomes [t, t+W) with its count; at
	//     t+W a fresh window opens (so any Align means nothing: Validate
	//     refuses epoch and timer);
	//   - sliding-log: every logged time becomes t, so all of them leave
	//     the log together at t+W (from outside, as fixed-window);
	//   - sliding-window-counter: the estimate floor(prev·(W−e)/W) + curr
	//     becomes the count of a window starting at t; at t+W it becomes
	//     the previous window's count and decays linearly over the next W,
	//     as any SWC count does (so after W of silence the quota comes
	//     back as a ramp, fully after 2W).
	// RetryAfter of a refusal is then W for fixed-window and sliding-log:
	// the wait of a client that stays silent; a retry sooner is refused
	// and moves the end again.
	PenaltyExtend PenaltyKind = "extend"
	// PenaltyRestart: only a refused request moves the window end to
	// now + Window (the count stays); admitted requests leave the window
	// where it was. Window algorithms only. A refusal re-anchors what is
	// counted at its time t exactly as under PenaltyExtend; admissions
	// follow the algorithm (an aligned fixed window opened later is aligned
	// again). RetryAfter of a refusal is the wait with no retry meanwhile
	// (W for fixed-window and sliding-log).
	PenaltyRestart PenaltyKind = "restart"
)

// PenaltyKinds lists the penalties in the contract's order.
var PenaltyKinds = []PenaltyKind{PenaltyBlock, PenaltyExtend, PenaltyRestart}

// Penalty is a limiter's penalty: its kind and, for PenaltyBlock, how long
// a block lasts (a positive whole number of microseconds). The zero value
// is no penalty.
type Penalty struct {
	Kind     PenaltyKind   `json:"kind"`
	Duration time.Duration `json:"duration,omitempty"`
}

// IsZero reports whether p is no penalty.
func (p Penalty) IsZero() bool { return p.Kind == PenaltyNone }

// String returns p as ParsePenalty reads it: "block:30s", "extend",
// "restart", or "" for no penalty.
func (p Penalty) String() string {
	if p.Kind == PenaltyBlock {
		return string(p.Kind) + ":" + units.FormatDuration(p.Duration)
	}
	return string(p.Kind)
}

// ParsePenalty reads "block:D" (D in the contract's duration syntax),
// "extend" or "restart"; "" and "none" are no penalty.
func ParsePenalty(s string) (Penalty, error) {
	kind, arg, hasArg := strings.Cut(strings.TrimSpace(s), ":")
	switch PenaltyKind(kind) {
	case "", "none":
		if hasArg {
			return Penalty{}, problem.New("limiter", "", "penalty %q: none takes no duration", s)
		}
		return Penalty{}, nil
	case PenaltyBlock:
		if !hasArg {
			return Penalty{}, problem.New("limiter", "", "penalty %q: block needs a duration, e.g. block:30s", s)
		}
		d, err := units.ParseDuration(arg)
		if err != nil {
			return Penalty{}, problem.New("limiter", "", "penalty %q: %v", s, err)
		}
		if d <= 0 {
			return Penalty{}, problem.New("limiter", "", "penalty %q: the block must last more than 0", s)
		}
		return Penalty{Kind: PenaltyBlock, Duration: d}, nil
	case PenaltyExtend, PenaltyRestart:
		if hasArg {
			return Penalty{}, problem.New("limiter", "", "penalty %q: %s takes no duration", s, kind)
		}
		return Penalty{Kind: PenaltyKind(kind)}, nil
	}
	return Penalty{}, problem.New("limiter", "", "penalty %q: one of block:DURATION, extend, restart", s)
}

// MarshalText implements encoding.TextMarshaler (String).
func (p Penalty) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParsePenalty), so a
// Penalty reads from a flag, YAML or JSON string.
func (p *Penalty) UnmarshalText(b []byte) error {
	q, err := ParsePenalty(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Refill names how a bucket (TokenBucket, GCRA) regains tokens.
type Refill string

// The refills.
const (
	// RefillContinuous: tokens flow back continuously (the default).
	RefillContinuous Refill = ""
	// RefillWhole: one whole token is added at each tick t₀ + k/Rate, t₀
	// the key's first request (since it was last zero); progress between
	// ticks is not credited, so it is lost across an exhaustion. The grid
	// of ticks stays the key's while its State is kept: a bucket that
	// filled up and is drained again regains its next token at the next
	// tick of that grid, not 1/Rate after the drain. The token bucket's
	// ticks fall every Params.IntervalUS µs; GCRA's at t₀ + ceil(k·10⁶ /
	// Params.RateMilli) ms on nginx's millisecond clock. The State is zero
	// again only when the key was never seen, is forgotten (ForgetIdle) or
	// evicted from a Store.
	RefillWhole Refill = "whole"
	// RefillInterval: the whole Capacity is restored at each tick of a
	// server-wide timer of period Capacity/Rate whose ticks fall at Phase
	// + k·period since the Unix epoch: from outside, a fixed window of
	// Capacity per Capacity/Rate aligned to the timer (AlignTimer). The
	// period in µs is [Config.RefillPeriod]; Step decides exactly as a
	// FixedWindow of Limit Capacity, Window the period, AlignTimer at Phase.
	RefillInterval Refill = "interval"
)

// Refills lists the refills that can be asked for, in the contract's order.
var Refills = []Refill{RefillWhole, RefillInterval}

// AlignTimer places fixed windows on a server-wide timer: windows start at
// Phase + k·Window since the Unix epoch (the limiter's own fill timer,
// started with the server). AlignEpoch is AlignTimer with Phase 0.
const AlignTimer Align = "timer"

// validateBehaviours adds to Validate the problems of the behaviour fields
// (Penalty, ForgetIdle, Refill, Phase); c.Algorithm is known.
func (c Config) validateBehaviours(bad func(field, format string, args ...any)) {
	a := c.Algorithm
	wholeUS := func(d time.Duration) bool { return d%time.Microsecond == 0 }
	switch p := c.Penalty; p.Kind {
	case PenaltyNone:
		if p.Duration != 0 {
			bad("penalty", "a duration (%v) without a kind; one of block:DURATION, extend, restart", p.Duration)
		}
	case PenaltyBlock:
		switch {
		case a == LeakyBucket:
			bad("penalty", "block is not for %s, which queues excess requests as nginx does (block applies to every other algorithm)", a)
		case p.Duration <= 0:
			bad("penalty", "a block must last more than 0, got %v", p.Duration)
		case !wholeUS(p.Duration):
			bad("penalty", "the block must be a whole number of microseconds, got %v", p.Duration)
		}
	case PenaltyExtend, PenaltyRestart:
		switch {
		case !a.windowed():
			bad("penalty", "%s only for %s, %s and %s: %s has no window to move (block applies to it)", p.Kind, FixedWindow, SlidingLog, SlidingWindowCounter, a)
		case p.Duration != 0:
			bad("penalty", "%s takes no duration, got %v", p.Kind, p.Duration)
		}
	default:
		bad("penalty", "unknown %q; one of block:DURATION, extend, restart", string(p.Kind))
	}
	switch {
	case c.ForgetIdle < 0:
		bad("forget_idle", "must not be negative, got %v", c.ForgetIdle)
	case !wholeUS(c.ForgetIdle):
		bad("forget_idle", "must be a whole number of microseconds, got %v", c.ForgetIdle)
	}
	switch c.Refill {
	case RefillContinuous:
	case RefillWhole, RefillInterval:
		if a != TokenBucket && a != GCRA {
			bad("refill", "only for %s and %s, got %s", TokenBucket, GCRA, a)
		}
	default:
		bad("refill", "unknown %q; one of %s, %s", string(c.Refill), RefillWhole, RefillInterval)
	}
	var period time.Duration // of the timer Phase places, 0 = none
	switch {
	case c.Align == AlignTimer && (a == FixedWindow || a == SlidingWindowCounter):
		period = c.Window
	case c.Refill == RefillInterval && (a == TokenBucket || a == GCRA) && c.Capacity > 0 && c.Capacity <= MaxCount &&
		c.Rate > 0 && c.Rate <= MaxRate && (a == TokenBucket || nginxRate(c.Rate) >= 1):
		period = c.RefillPeriod()
	}
	switch {
	case c.Phase == 0:
	case period == 0 && !(c.Align == AlignTimer || c.Refill == RefillInterval):
		bad("phase", "only with align %s (%s, %s) or refill %s", AlignTimer, FixedWindow, SlidingWindowCounter, RefillInterval)
	case c.Phase < 0 || (period > 0 && c.Phase >= period):
		bad("phase", "must lie in [0, %v), got %v", period, c.Phase)
	case !wholeUS(c.Phase):
		bad("phase", "must be a whole number of microseconds, got %v", c.Phase)
	}
}
