package verify

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// The window family: sliding and fixed windows of N per W —
// window-limit-exceeded, and the window side of no-limiting-observed,
// under-admission, race and key-spoof availability and remaining-value
// consistency.

// windowsFor returns the fixed windows of rule e touching the group's
// traffic.
func (r *rule) windowsFor(t *traffic) []Window {
	seen := filter(t.os, func(o *obs) bool { return o.class.Counts() })
	if len(seen) == 0 {
		return nil
	}
	switch r.e.Align {
	case limiter.AlignEpoch, limiter.AlignTimer:
		return r.clockWindows(seen)
	}
	return FirstRequestWindows(ivsOf(seen), int64(r.e.Window), t.busy())
}

// clockWindows returns the windows of rule e, epoch- or timer-aligned,
// touching the requests seen. Epoch-aligned windows start at k·Window
// since the Unix epoch of the server's clock, placed under the records
// by their clock estimate and widened either way by its uncertainty
// (rule.epochOffset, rule.epochUnc). Timer-aligned ones start at Phase +
// k·Window on the records' clock, where infer measured the phase, each
// start widened either way by PhaseSpread.
func (r *rule) clockWindows(seen []*obs) []Window {
	w, ph, sp := int64(r.e.Window), int64(r.e.Phase), int64(r.e.PhaseSpread)
	if r.e.Align == limiter.AlignEpoch {
		ph, sp = r.epochOffset, r.epochUnc
	}
	lo, hi := span(seen)
	wins := EpochWindows(r.origin-ph, lo-sp, hi+sp, w)
	for i := range wins {
		wins[i].StartLo -= sp
		wins[i].StartHi += sp
	}
	return wins
}

// windowCounts raises window-limit-exceeded when more than N accepted
// requests (outside the race and key-spoof probes) fall in one window —
// of one stretch, when a declared penalty starts the count afresh after
// a refusal (countSets).
func (r *rule) windowCounts(t *traffic) []Finding {
	e := r.e
	n := int(e.Limit)
	what := "in any " + e.Window.String()
	if e.WindowType == Fixed {
		what = "in one " + e.Window.String() + " window"
	}
	count := func(set countSet) (Span, Span) {
		if e.WindowType == Fixed {
			return MaxInFixedWindows(ivsOf(set.os), set.wins)
		}
		return MaxInWindow(ivsOf(set.os), int64(e.Window))
	}
	certain, possible := r.countSets(t)
	var c, p Span
	var cAcc, pAcc []*obs
	for _, set := range certain {
		if s, _ := count(set); s.Count > c.Count {
			c, cAcc = s, set.os
		}
	}
	for _, set := range possible {
		if _, s := count(set); s.Count > p.Count {
			p, pAcc = s, set.os
		}
	}
	switch {
	case c.Count > n:
		ev := pick(cAcc, c.Members)
		return []Finding{r.finding(IDWindowLimitExceeded, Certain, t.g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted %s, certainly within %s (the policy allows %d)", c.Count, what, dur(c.End-c.Start), n),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(int64(n)),
				Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})}
	case p.Count > n:
		ev := pick(pAcc, p.Members)
		return []Finding{r.finding(IDWindowLimitExceeded, Possible, t.g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted %s if they arrived as early/late as the timing allows (the policy allows %d); measurement uncertainty leaves it open", p.Count, what, n),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(int64(n)),
				Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})}
	}
	return nil
}

// windowOffered returns the most offered requests certainly within one
// window, and the policy's bound.
func (r *rule) windowOffered(iv []Interval) (peak, int64) {
	var c Span
	if r.e.WindowType == Fixed {
		c, _ = MaxInFixedWindows(iv, r.wins)
	} else {
		c, _ = MaxInWindow(iv, int64(r.e.Window))
	}
	return peak{members: c.Members, count: c.Count, start: c.Start, end: c.End, length: c.End - c.Start}, r.e.Limit
}

// fixedAvailMax bounds from above the quota of a fixed window available
// over [lo, hi]: when [lo, hi] certainly falls in one window, N less the
// prior requests certainly in it and before lo; else N per window touched.
func (r *rule) fixedAvailMax(lo, hi int64, prior []*obs, wins []Window) int64 {
	var touched []Window
	for _, w := range wins {
		if w.StartLo <= hi && w.StartHi+w.Length > lo {
			touched = append(touched, w)
		}
	}
	if len(touched) != 1 || !touched[0].certainly(Interval{lo, hi}) {
		return int64(max(1, len(touched))) * r.e.Limit
	}
	n := int64(0)
	for _, o := range prior {
		if touched[0].certainly(o.iv) && o.iv.Hi < lo {
			n++
		}
	}
	return max(0, r.e.Limit-n)
}

// slidingAvailMax bounds from above the quota of a sliding window
// available over [lo, hi]: N less the prior requests that surely came
// before lo and still count at hi.
func (r *rule) slidingAvailMax(lo, hi int64, prior []*obs) int64 {
	n := int64(0)
	for _, o := range prior {
		if o.iv.Lo > hi-int64(r.e.Window) && o.iv.Hi < lo {
			n++
		}
	}
	return max(0, r.e.Limit-n)
}

// fixedLeft returns, for a rejection x, the quota a fixed window surely
// had left: N less the most accepted requests that may share a window
// with x and may have come before it.
func (r *rule) fixedLeft(acc []*obs) func(*obs) int64 {
	q := r.e.Quota()
	wins := r.wins
	return func(x *obs) int64 {
		most := int64(0)
		for _, w := range wins {
			if !w.possibly(x.iv) {
				continue
			}
			n := int64(0)
			for _, o := range acc {
				if w.possibly(o.iv) && o.iv.Lo <= x.iv.Hi {
					n++
				}
			}
			most = max(most, n)
		}
		return q - most
	}
}

// slidingLeft returns, for a rejection x, the quota a sliding window surely
// had left: N less every accepted request that may fall in the window
// before x.
func (r *rule) slidingLeft(acc []*obs) func(*obs) int64 {
	q := r.e.Quota()
	los := make([]int64, len(acc))
	his := make([]int64, len(acc))
	for i, o := range acc {
		los[i], his[i] = o.iv.Lo, o.iv.Hi
	}
	slices.Sort(los)
	slices.Sort(his)
	w := int64(r.e.Window)
	return func(x *obs) int64 {
		n := sort.Search(len(los), func(k int) bool { return los[k] > x.iv.Hi }) -
			sort.Search(len(his), func(k int) bool { return his[k] > x.iv.Lo-w })
		return q - int64(n)
	}
}

// fixedWindowRemaining judges the remaining values advertised in each
// fixed window whose accepted requests certainly fall inside it (k of
// them, none possibly so) and all carry the rule's limit, sorted from the
// largest, v_1 ≥ … ≥ v_k:
//
//   - always v_j ≤ N − j: after j acceptances the window can hold at most
//     N − j more, so a larger value advertises quota the policy does not
//     grant (a stuck or inflated remaining). Sorting makes this hold
//     whatever the order of arrival, and traffic unseen by the probe only
//     lowers the true remaining, so a violation is certain.
//   - v_j = N − j exactly, when the window shows no carry-over: its
//     largest value is N − 1 (its first acceptance saw the whole quota), or
//     no request of the group may have reached the server in the window's
//     length before it started, and the window began after every request
//     that may have met traffic from before the run (settledFrom). A pure fixed window always counts down
//     N − 1…N − k then.
//
// Otherwise a lower value is not a contradiction: a sliding-window counter
// keeps the fixed-window promise yet advertises
// N − ⌊prev·(W−elapsed)/W⌋ − curr, less than N − j while the previous
// window's weighted share lasts, and rising again as it decays. Within a
// window, the values need not decrease in arrival order for the same
// reason. A window the spoofed key-spoof requests may reach is not judged:
// they may or may not share its quota.
func (r *rule) fixedWindowRemaining(t *traffic, acc []*obs, note noteFunc) {
	n := r.e.Limit
	spoofFrom, _ := span(t.spoofed)
	for _, w := range r.wins {
		inW, ok := r.cleanWindow(w, acc, spoofFrom)
		if !ok {
			continue
		}
		rem := make([]int64, len(inW))
		for i, o := range inW {
			l, _ := limitFor(&o.ph, r.e)
			rem[i] = l.Remaining
		}
		slices.SortFunc(rem, func(a, b int64) int { return cmpInt64(b, a) })
		k := int64(len(rem))
		over, off := false, false
		for j, v := range rem {
			over = over || v > n-1-int64(j)
			off = off || v != n-1-int64(j)
		}
		switch {
		case over:
			note(inW[0], "a window with %d accepted advertised remaining %v, more than the %d…%d it can still hold", k, rem, n-1, n-k)
		case off && (rem[0] == n-1 || w.StartLo > t.doubtEnd && !r.carryOver(t.os, w)):
			note(inW[0], "a window with %d accepted and nothing carried over advertised remaining %v, not %d…%d", k, rem, n-1, n-k)
		default:
			continue
		}
		for _, o := range inW[1:] {
			note(o, "")
		}
	}
}

// cleanWindow returns the accepted requests certainly in w when none is
// possibly so only, each carries a remaining value for the rule, no
// spoofed request (from spoofFrom on) may reach w, and, under a split,
// all surely belong to one stretch.
func (r *rule) cleanWindow(w Window, acc []*obs, spoofFrom int64) ([]*obs, bool) {
	if spoofFrom < w.StartHi+w.Length {
		return nil, false
	}
	var inW []*obs
	for _, o := range acc {
		switch {
		case w.certainly(o.iv):
			if _, ok := limitFor(&o.ph, r.e); o.cached || !ok {
				return nil, false
			}
			inW = append(inW, o)
		case w.possibly(o.iv):
			return nil, false
		}
	}
	if r.sp != nil && r.sp.sameStretch(inW) == nil {
		// A declared penalty's fresh start falls in the window.
		return nil, false
	}
	return inW, len(inW) > 0
}

// carryOver reports whether a request of the group (any that may have
// reached the server) may have arrived in the window's length before w
// started: what a sliding-window counter weighs into w. Under a declared
// extend or restart, which re-anchor a counter's window at a request, the
// count a counter weighs in may date from two lengths before w.
func (r *rule) carryOver(os []*obs, w Window) bool {
	reach := w.Length
	if k := r.e.Penalty.Kind; k == limiter.PenaltyExtend || k == limiter.PenaltyRestart {
		reach = 2 * w.Length
	}
	for _, o := range os {
		if o.class == record.ClassNotSent {
			continue
		}
		if o.iv.Lo < w.StartHi && o.iv.Hi >= w.StartLo-reach && !w.certainly(o.iv) {
			return true
		}
	}
	return false
}
