package infer

import (
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// Candidates of a timed behaviour's length (hyp.p), from the observations
// alone: what the outcomes allow, never a grid over all lengths.
const (
	// maxTimedCandidates bounds the lengths tried per (variant, count,
	// continuous parameter): each multiplies the search.
	maxTimedCandidates = 7
	// maxIdleCandidates bounds the idle times tried: one per interval
	// between the pauses seen, which a run of a minute holds about 20 of.
	maxIdleCandidates = 24
	// minTimed is the shortest length worth a candidate: below it, a block
	// or an idle time is lost in the timing of one request.
	minTimed = 10 * time.Millisecond
	// timedMerge: gaps closer than this ratio are one candidate boundary.
	timedMerge = 1.1
)

// timedCandidates returns the lengths, in seconds, worth trying for the
// duration of behaviour beh (block or idle eviction), derived from o.
func timedCandidates(o *observations, beh Behaviour, perClient bool) []float64 {
	switch beh {
	case BehaviourBlock:
		lo, hi := blockBounds(o, perClient)
		return blockCandidates(lo, hi)
	case BehaviourIdle:
		return idleCandidates(idleGaps(o, perClient))
	}
	return nil
}

// blockBounds returns what the outcomes say of a block's length, were the
// limiter one that blocks a key from its first refusal: every run of
// refusals of a key lasts less than the block (lo, the longest run), and
// the first acceptance after a run comes after the block's end (hi, the
// shortest time from a run's first refusal to the acceptance that ends it;
// +Inf when no run ended). An acceptance within the timing uncertainty of
// the run's start does not end it (the two are of unknown order).
func blockBounds(o *observations, perClient bool) (lo, hi time.Duration) {
	type run struct {
		start, last time.Time
		open        bool
	}
	runs := map[string]*run{}
	hi = time.Duration(math.MaxInt64)
	for _, ob := range o.list {
		k := fitKey(ob.client, perClient)
		r := runs[k]
		if !ob.accepted {
			if r == nil || !r.open {
				runs[k] = &run{start: ob.at, last: ob.at, open: true}
			} else {
				r.last = ob.at
			}
			continue
		}
		if r == nil || !r.open || ob.at.Sub(r.start) <= 2*clusterGap+ob.unc {
			continue
		}
		lo = max(lo, r.last.Sub(r.start))
		hi = min(hi, ob.at.Sub(r.start))
		r.open = false
	}
	for _, r := range runs {
		if r.open {
			lo = max(lo, r.last.Sub(r.start))
		}
	}
	return lo, hi
}

// blockCandidates spreads candidates over (lo, hi]: evenly when the block
// ended within the observations, else geometrically beyond lo. Outcomes
// that contradict every block (hi ≤ lo) still get candidates around hi, so
// that the block models are fitted and lose on their misses.
func blockCandidates(lo, hi time.Duration) []float64 {
	lo = max(lo, minTimed)
	var out []float64
	switch {
	case hi == time.Duration(math.MaxInt64):
		for _, f := range []float64{1.05, 1.5, 2.5, 4, 8} {
			out = append(out, lo.Seconds()*f)
		}
	case hi <= lo:
		out = append(out, max(hi, minTimed).Seconds(), lo.Seconds())
	default:
		steps := maxTimedCandidates - 1
		for i := range maxTimedCandidates {
			// From just above lo to hi: the block is longer than the longest
			// run and at most the shortest time to an acceptance.
			f := (float64(i) + 0.5) / float64(steps)
			if i == steps {
				f = 1
			}
			out = append(out, lo.Seconds()+f*(hi-lo).Seconds())
		}
	}
	return out
}

// idleGaps returns the distinct pauses between consecutive requests of a
// key (at least minTimed), sorted.
func idleGaps(o *observations, perClient bool) []time.Duration {
	last := map[string]time.Time{}
	var gaps []time.Duration
	for _, ob := range o.list {
		k := fitKey(ob.client, perClient)
		if t, ok := last[k]; ok {
			if g := ob.at.Sub(t); g >= minTimed {
				gaps = append(gaps, g)
			}
		}
		last[k] = ob.at
	}
	slices.Sort(gaps)
	return slices.Compact(gaps)
}

// busiest returns the longest time over which one key of o kept sending
// with no pause of idle or more: how long a state forgotten after idle
// was kept at most (cached per idle time).
func (o *observations) busiest(idle time.Duration, perClient bool) time.Duration {
	k := busyKey{idle: idle, perClient: perClient}
	if d, ok := o.busy[k]; ok {
		return d
	}
	type span struct{ start, last time.Time }
	spans := map[string]*span{}
	var longest time.Duration
	for _, ob := range o.list {
		key := fitKey(ob.client, perClient)
		sp := spans[key]
		switch {
		case sp == nil:
			spans[key] = &span{start: ob.at, last: ob.at}
			continue
		case ob.at.Sub(sp.last) >= idle:
			sp.start = ob.at
		}
		sp.last = ob.at
		longest = max(longest, sp.last.Sub(sp.start))
	}
	if o.busy == nil {
		o.busy = map[busyKey]time.Duration{}
	}
	o.busy[k] = longest
	return longest
}

// idleCandidates returns idle times between consecutive pauses (merged
// when within timedMerge of each other): a key forgotten after D replays
// alike for every D between two pauses, so the middle of each interval
// stands for it (the equally good range, fit.bracket, then reaches to the
// pauses on either side, and the design splits it). Every interval gets
// one, up to maxIdleCandidates kept evenly from the shortest to the
// longest: a short idle time is no less likely than a long one (a bucket
// of 1/s forgotten after 400 ms, whose pauses reach 3 s, lost its truth
// when only the longest pauses' candidates were kept).
func idleCandidates(gaps []time.Duration) []float64 {
	var bounds []time.Duration
	for _, g := range gaps {
		if n := len(bounds); n > 0 && float64(g) < timedMerge*float64(bounds[n-1]) {
			bounds[n-1] = g
			continue
		}
		bounds = append(bounds, g)
	}
	var out []float64
	for i := 1; i < len(bounds); i++ {
		out = append(out, (bounds[i-1].Seconds()+bounds[i].Seconds())/2)
	}
	if len(out) > maxIdleCandidates {
		kept := make([]float64, maxIdleCandidates)
		for i := range kept {
			kept[i] = out[i*(len(out)-1)/(maxIdleCandidates-1)]
		}
		out = kept
	}
	return out
}

// fillBehaviour reports the winner's behaviour beyond its family's plain
// model: the penalty, or the bucket's quirk, with a timed behaviour's
// length and the range over which it reproduces the outcomes as well (the
// tied hypotheses of the winner's variant and count n), widened by what
// the run's timing cannot resolve.
func fillBehaviour(inf *Inference, f *fit, w scored, n float64, first time.Time) {
	var length *Param
	if w.h.v.timed() {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range slices.Concat(f.pool, f.brackets) {
			if s.h.v == w.h.v && s.miss == w.miss && float64(s.h.n) == n {
				lo, hi = math.Min(lo, s.h.p), math.Max(hi, s.h.p)
			}
		}
		if math.IsInf(lo, 0) {
			lo, hi = w.h.p, w.h.p
		}
		length = roundParam(interval{lo: lo, hi: hi, value: (lo + hi) / 2})
	}
	switch w.h.v.beh {
	case BehaviourBlock:
		inf.Penalty = &PenaltyFit{Kind: limiter.PenaltyBlock, DurationS: length}
	case BehaviourExtend:
		inf.Penalty = &PenaltyFit{Kind: limiter.PenaltyExtend}
	case BehaviourRestart:
		inf.Penalty = &PenaltyFit{Kind: limiter.PenaltyRestart}
	case BehaviourIdle:
		inf.Quirks = append(inf.Quirks, BehaviourIdle)
		inf.Params.IdleS = length
	case BehaviourWholeToken:
		inf.Quirks = append(inf.Quirks, BehaviourWholeToken)
	case BehaviourTimer:
		inf.Params.PhaseS = timerParam(f, w, n, inf.Params.WindowS.Value, first)
	}
}

// timerParam returns a timer-aligned answer's phase as the document states
// it: relative to the reported window (rounded, as the document gives
// it), so that windows start at phase + k·window near the run — a phase
// is taken modulo the window since the Unix epoch, and the answer's own
// length differs from the reported one by a hair that, over the epoch's
// billions of windows, would move it anywhere. The range is the spread,
// either way, of the phases that fit as well at the answer's length.
func timerParam(f *fit, w scored, n, window float64, first time.Time) *Param {
	x := w.h.x
	if !(window > 0) {
		window = x
	}
	t := unixSec(first)
	// The first tick at or after the run's first request, on the
	// answer's own timer.
	tick := w.h.ph + math.Ceil((t-w.h.ph)/x)*x
	spread := 0.0
	for _, s := range slices.Concat(f.pool, f.brackets) {
		if s.h.v == w.h.v && s.miss == w.miss && float64(s.h.n) == n && s.h.x == x {
			d := math.Mod(math.Abs(s.h.ph-w.h.ph), x)
			spread = math.Max(spread, math.Min(d, x-d))
		}
	}
	ph := math.Mod(tick, window)
	ph = math.Round(ph*1e6) / 1e6
	return &Param{Value: ph, Low: math.Round((ph-spread)*1e6) / 1e6, High: math.Round((ph+spread)*1e6) / 1e6}
}

// decisive reports whether the outcomes tell w's answer apart from every
// other answer: no rival comes as close.
func (f *fit) decisive(w scored) bool {
	_, tied := f.rival(w)
	return !tied
}

// rival returns the best other answer the outcomes do not tell apart from
// w's (the one of fewest misses, then by name), and whether there is one.
// For a plain answer, that is the best of any other family or alignment
// (what the document names) that misses no more outcomes than it: a
// validation that held proves nothing about the family when the
// runner-up, refitted, reproduces the new outcomes as well (behind a
// balancer that rotates requests over instances, across a jittery
// network, a sliding log and a first-request fixed window whose windows
// differ by milliseconds both reproduce every experiment). For an answer
// with a behaviour, the best of any other family, or of another behaviour
// of its own family, that misses at most slack outcomes more. A penalty
// or a quirk hides much of what tells the families apart (a block ends
// every exhausting experiment alike; extend and restart differ only where
// an admitted request falls late in a window), so an answer that comes
// within the slack is as plausible, and naming one of them would be a
// guess.
//
// The slack is the noise the run showed (rivalSlack): an answer that
// reproduces every outcome leaves a rival that misses two no timing noise
// to hide behind.
//
// A fixed window on a server-wide timer that misses as many outcomes as an
// answer on the epoch is no rival: a timer of the epoch window's length at
// phase 0 is that window, so the timer's tie holds it too, and the epoch,
// the rounder of the two, is named (epochTimer names the timer when its
// length is rounder). Only a timer that misses fewer tells them apart.
func (f *fit) rival(w scored) (scored, bool) {
	var r scored
	found := false
	for v, b := range f.best {
		if v == timerVariant && w.h.v.fam == FixedWindow && w.h.v.align == limiter.AlignEpoch && w.h.v.beh == "" && b.miss >= w.miss {
			// A timer off the epoch by more than the timing tolerance
			// that fits as well is a rival; the best timer found by the
			// search only ties and may be the epoch window itself.
			t := f.offEpoch
			if t == nil || t.h.x != w.h.x || t.h.n != w.h.n || t.miss > w.miss {
				continue
			}
			b = *t
		}
		var close bool
		if w.h.v.beh == "" {
			close = (v.fam != w.h.v.fam || v.align != w.h.v.align) && b.miss <= w.miss
		} else {
			close = (v.fam != w.h.v.fam || v.beh != w.h.v.beh) && b.miss <= w.miss+f.rivalSlack(w)
		}
		if close && (!found || b.miss < r.miss || b.miss == r.miss && v.String() < r.h.v.String()) {
			r, found = b, true
		}
	}
	return r, found
}

// rivalSlack is how many outcomes beyond an answer with a behaviour a
// rival may miss and still be as plausible: the fit's slack, but no more
// than one beyond what the answer itself misses. The answer's misses are
// the timing noise of this run; where it reproduced every outcome, a
// rival's two misses are outcomes it gets wrong, not noise.
func (f *fit) rivalSlack(w scored) int { return min(f.slack, 1+w.miss) }
