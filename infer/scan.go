package infer

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// scan sends single probes at from + first·√2^k (those still ahead) until
// one is accepted; it returns the offsets of the last refused probe and of
// the accepted one. When the rejections before it advertised when quota
// returns (hint: Retry-After, or a rate-limit header's reset, at least
// minHint ahead), the geometric probes stop short of it and a comb of
// probes refines the second before the advertised moment instead (the
// advertisement is checked, not trusted: the geometric scan goes on beyond
// the comb when nothing there was accepted).
func (s *prober) scan(ctx context.Context, phase string, from time.Time, first time.Duration, hint time.Time) (lo, hi time.Duration, err error) {
	horizon := 2*s.opts.maxWindow() + 10*time.Second
	if !hint.IsZero() && hint.Add(2*time.Second).Before(s.deadline) {
		// An advertised return within the budget is waited for, however
		// long the window (an hour window, advertised, is seen to end).
		horizon = max(horizon, hint.Sub(from)+2*time.Second)
	}
	var combLo, combHi time.Duration
	if h := hint.Sub(from); !hint.IsZero() && h >= minHint {
		step := combStep(h)
		combLo, combHi = h-time.Second-step, h+2*step
	}
	for k := 0; ; k++ {
		off := time.Duration(float64(first) * math.Pow(math.Sqrt2, float64(k)))
		if combHi > 0 && off >= combLo {
			acc, l, h, err := s.comb(ctx, phase, from, combLo, combHi, combStep(hint.Sub(from)))
			if err != nil || acc {
				if l == 0 {
					l = lo
				}
				return l, h, err
			}
			lo, combHi = combHi, 0
			continue
		}
		if off > horizon {
			return lo, 0, nil
		}
		if off <= lo {
			continue
		}
		at := from.Add(off)
		if at.Before(s.now().Add(s.opts.lead())) {
			continue
		}
		res, err := s.run(ctx, phase, at, burstSends(1))
		if err != nil {
			return lo, 0, err
		}
		if acc, _ := s.counts(res); acc > 0 {
			return lo, off, nil
		}
		lo = off
	}
}

// minHint is the shortest advertised wait a scan refines with a comb (a
// shorter one is scanned finely enough by the geometric probes).
const minHint = 5 * time.Second

// combStep is the spacing of a comb refining an advertised wait h: a
// hundredth of it, from 20 to 100 ms.
func combStep(h time.Duration) time.Duration {
	return min(max(h/100, 20*time.Millisecond), 100*time.Millisecond)
}

// comb sends single probes every step over [lo, hi] after from (those
// still ahead), as one schedule; it reports whether one was accepted, with
// the offsets of the last refused probe before the first accepted one
// (0 when the first was accepted) and of that one.
func (s *prober) comb(ctx context.Context, phase string, from time.Time, lo, hi, step time.Duration) (accepted bool, last, first time.Duration, err error) {
	start := max(lo, s.now().Add(s.opts.lead()).Sub(from))
	var sends []patterns.Send
	for off := start; off <= hi; off += step {
		sends = append(sends, patterns.Send{At: off - start})
	}
	res, err := s.run(ctx, phase, from.Add(start), sends)
	if err != nil {
		return false, 0, 0, err
	}
	for i, r := range res {
		off := start + sends[i].At
		switch c, _ := record.Classify(r, s.opts.RejectStatus); c {
		case record.ClassAccepted:
			return true, last, off, nil
		case record.ClassRejected:
			last = off
		}
	}
	return false, last, 0, nil
}

// advertisedReturn returns when the rejections among res say quota
// returns: the median over them of the receipt plus the advertised wait
// (Retry-After, else the reset of a rate-limit header); zero when none
// says.
func (s *prober) advertisedReturn(res []record.Result) time.Time {
	var ts []time.Time
	for _, r := range res {
		if c, _ := record.Classify(r, s.opts.RejectStatus); c != record.ClassRejected {
			continue
		}
		received := s.opts.Origin.Add(time.Duration(r.TTFB))
		p := headers.Parse(r.Headers, received)
		switch {
		case p.RetryAfter != nil:
			ts = append(ts, received.Add(*p.RetryAfter))
		default:
			for _, l := range p.Limits {
				if l.HasReset {
					ts = append(ts, received.Add(l.Reset))
					break
				}
			}
		}
	}
	if len(ts) == 0 {
		return time.Time{}
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts[len(ts)/2]
}
