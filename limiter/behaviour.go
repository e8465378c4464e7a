package limiter

import (
	"fmt"
	"strings"
	"time"

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
	// zero State. Applies to every algorithm but LeakyBucket.
	PenaltyBlock PenaltyKind = "block"
	// PenaltyExtend: every request, admitted or refused, moves the key's
	// window end to now + Window; the count resets only after Window with
	// no request at all, so a client that never pauses for Window gets
	// Limit requests in total. Window algorithms only.
	PenaltyExtend PenaltyKind = "extend"
	// PenaltyRestart: only a refused request moves the window end to
	// now + Window (the count stays); admitted requests leave the window
	// where it was. Window algorithms only.
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
			return Penalty{}, fmt.Errorf("limiter: penalty %q: none takes no duration", s)
		}
		return Penalty{}, nil
	case PenaltyBlock:
		if !hasArg {
			return Penalty{}, fmt.Errorf("limiter: penalty %q: block needs a duration, e.g. block:30s", s)
		}
		d, err := units.ParseDuration(arg)
		if err != nil {
			return Penalty{}, fmt.Errorf("limiter: penalty %q: %w", s, err)
		}
		if d <= 0 {
			return Penalty{}, fmt.Errorf("limiter: penalty %q: the block must last more than 0", s)
		}
		return Penalty{Kind: PenaltyBlock, Duration: d}, nil
	case PenaltyExtend, PenaltyRestart:
		if hasArg {
			return Penalty{}, fmt.Errorf("limiter: penalty %q: %s takes no duration", s, kind)
		}
		return Penalty{Kind: PenaltyKind(kind)}, nil
	}
	return Penalty{}, fmt.Errorf("limiter: penalty %q: one of block:DURATION, extend, restart", s)
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
	// ticks is not credited, so it is lost across an exhaustion.
	RefillWhole Refill = "whole"
	// RefillInterval: the whole Capacity is restored at each tick of a
	// server-wide timer of period Capacity/Rate whose ticks fall at Phase
	// + k·period since the Unix epoch: from outside, a fixed window of
	// Capacity per Capacity/Rate aligned to the timer (AlignTimer).
	RefillInterval Refill = "interval"
)

// Refills lists the refills that can be asked for, in the contract's order.
var Refills = []Refill{RefillWhole, RefillInterval}

// AlignTimer places fixed windows on a server-wide timer: windows start at
// Phase + k·Window since the Unix epoch (the limiter's own fill timer,
// started with the server). AlignEpoch is AlignTimer with Phase 0.
const AlignTimer Align = "timer"
