package scenario

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// leaveOneOutCases are the selftest's leave-one-out rows: a reference
// server with a penalty beyond its family's plain model (a block),
// inferred with that behaviour's model left out of the candidates. The row
// is right when the answer is approximate or misfit — never exact: a name
// must mean a validated fit, so infer must not name a family at full
// confidence for a limiter it has no word for. They run in the synctest
// grid, and one row a penalty (the fixed window's) in `selftest --quick`.
func leaveOneOutCases() []SelftestCase {
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	type row struct {
		cfg   limiter.Config
		quick bool
	}
	var rows []row
	for _, p := range []limiter.Penalty{{Kind: limiter.PenaltyBlock, Duration: sec(4)}, {Kind: limiter.PenaltyExtend}, {Kind: limiter.PenaltyRestart}} {
		for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog, limiter.SlidingWindowCounter} {
			c := limiter.Config{Algorithm: alg, Limit: 5, Window: sec(1), Penalty: p}
			if alg != limiter.SlidingLog {
				c.Align = limiter.AlignFirstRequest
			}
			// One row a penalty runs in `selftest --quick`, over real
			// sockets: the fixed window's.
			rows = append(rows, row{cfg: c, quick: alg == limiter.FixedWindow})
		}
	}
	// Bucket quirks (idle eviction, whole-token refill) are left out: a
	// short idle time or a whole-token grid can still come out an exact
	// token bucket (the right family, its quirk unnamed).
	for _, alg := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
		block := limiter.Config{Algorithm: alg, Rate: 2, Capacity: 4}
		block.Penalty = limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: sec(5)}
		rows = append(rows, row{cfg: block})
	}
	// Interval refill, a fixed window on the server's timer (here 462.5 ms
	// into the epoch's periods of 1.25 s): without the timer's model, an
	// epoch-aligned window of a length near the period passes for it over
	// a run, and must not be exact. Not in --quick: a server started with
	// its timer may start within milliseconds of the epoch's phase, where
	// an epoch window is the timer.
	rows = append(rows, row{cfg: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 4, Capacity: 5, Refill: limiter.RefillInterval, Phase: sec(0.4625)}})
	var cs []SelftestCase
	for _, r := range rows {
		fam := infer.TokenBucket
		if r.cfg.Limit > 0 {
			fam = familyOf(r.cfg.Algorithm)
		}
		if r.cfg.Refill == limiter.RefillInterval {
			fam = infer.FixedWindow // a fixed window on the timer
		}
		cs = append(cs, SelftestCase{
			Name:   fmt.Sprintf("leave-out-%s-%s", behaviourTag(r.cfg), r.cfg.Algorithm),
			Policy: &testserver.Policy{Name: "selftest", Limiter: r.cfg, Key: testserver.KeyGlobal, Status: 429, Dialects: []headers.Dialect{headers.None}},
			Quick:  r.quick,
			Want:   SelftestWant{Family: fam, Key: infer.KeyGlobal, LeaveOut: infer.BehavioursOf(r.cfg)},
		})
	}
	return cs
}

// behaviourTag names a configuration's behaviours for a case name.
func behaviourTag(c limiter.Config) string {
	s := ""
	for _, b := range infer.BehavioursOf(c) {
		if s != "" {
			s += "-"
		}
		s += string(b)
	}
	return s
}

// familyOf is the family infer reports for a window algorithm.
func familyOf(a limiter.Algorithm) infer.Family {
	switch a {
	case limiter.FixedWindow:
		return infer.FixedWindow
	case limiter.SlidingLog:
		return infer.SlidingLog
	case limiter.SlidingWindowCounter:
		return infer.SlidingWindowCounter
	}
	return infer.TokenBucket
}
