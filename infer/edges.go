package infer

import (
	"math"
	"time"
)

// edgeGap is an interval that must contain the start of a new window under an
// epoch-aligned fixed window: a key was refused at lo (or just before) and
// then accepted at hi, with nothing of that key in between.
type edgeGap struct {
	lo, hi float64 // Unix seconds
	first  float64 // the first request of the key, Unix seconds
	index  int     // 0 for the key's first refusal→acceptance
}

// edgeSet holds the edge gaps of a run, used to discard epoch-aligned
// windows cheaply before replaying them, and its bans: intervals between
// two refusals of a key with no acceptance between them, which hold no
// window's start (a fresh window would have admitted the second) — for a
// fixed window that does not count refusals, the shape a timer's phase is
// placed for.
type edgeSet struct{ gaps, bans []edgeGap }

// findEdges collects, per key, every refusal followed by an acceptance.
// Times are widened by the cluster gap: arrival estimates closer than that
// are not trusted to be ordered.
func findEdges(o *observations, perClient bool) edgeSet {
	type keyState struct {
		lastRejected time.Time
		hasRejected  bool
		first        time.Time
		n            int
	}
	keys := map[string]*keyState{}
	var es edgeSet
	w := clusterGap.Seconds()
	for _, cl := range o.clusters {
		// Within a cluster, order is unknown: compare cluster to cluster.
		first := o.list[cl[0]]
		key := fitKey(first.client, perClient)
		ks := keys[key]
		if ks == nil {
			ks = &keyState{first: first.at}
			keys[key] = ks
		}
		accepted, rejected := false, false
		var lastRej time.Time
		for i := cl[0]; i < cl[1]; i++ {
			if o.list[i].accepted {
				accepted = true
			} else {
				rejected = true
				lastRej = o.list[i].at
			}
		}
		if !accepted && ks.hasRejected {
			if lo, hi := unixSec(ks.lastRejected)+w, unixSec(first.at)-w; hi > lo {
				es.bans = append(es.bans, edgeGap{lo: lo, hi: hi, first: unixSec(ks.first), index: ks.n})
			}
		}
		if accepted && ks.hasRejected {
			es.gaps = append(es.gaps, edgeGap{
				lo:    unixSec(ks.lastRejected) - w,
				hi:    unixSec(first.at) + w,
				first: unixSec(ks.first),
				index: ks.n,
			})
			ks.n++
			ks.hasRejected = false
		}
		if rejected {
			ks.lastRejected, ks.hasRejected = lastRej, true
		}
	}
	return es
}

func unixSec(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// filter keeps the windows (seconds) of an epoch-aligned variant that put an
// edge in every gap that demands one: every gap for a fixed window; for a
// sliding-window counter only a key's first gap, and only when its first
// request fell in the same window as its first refusal (the previous window
// then held nothing, so nothing can be admitted before the next edge).
func (es edgeSet) filter(v variant, ws []float64) []float64 {
	if len(es.gaps) == 0 {
		return ws
	}
	var out []float64
	for _, w := range ws {
		ok := true
		for _, g := range es.gaps {
			if v.fam == SlidingWindowCounter {
				if g.index != 0 || math.Floor(g.first/w) != math.Floor(g.lo/w) {
					continue
				}
			}
			if math.Floor(g.hi/w) <= math.Floor(g.lo/w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, w)
		}
	}
	return out
}

// phaseSlack is how many of a run's edge gaps a timer's phase may leave
// without an edge (one in eight): an arrival estimate pushed across an
// edge by disorder must not rule the true phase out; the replay counts
// what such a phase misses.
const phaseSlack = 8

// phaseSpots is how many phases of the stretch that edgeSet.phases
// places are candidates: its middle, and points a fifth of the way in from
// either end, so that a truth near an end is a candidate too (the stretch
// is as wide as the gaps, whose ends the arrival estimates widen).
var phaseSpots = []float64{0.5, 0.2, 0.8}

// phases returns the candidate phases (seconds in [0, w)) of a timer of
// windows of w seconds — windows start at phase + k·w since the Unix
// epoch — that put an edge in the most gaps and in no ban: the phaseSpots
// of the longest stretch of phases that does (one phase when the stretch
// is under a millisecond). It returns none when the run has no gap
// (nothing places the timer), when the best phase leaves more than one
// gap in phaseSlack without an edge, or when the stretch holds phase 0:
// that timer is the epoch-aligned window, a candidate of its own.
func (es edgeSet) phases(w float64) []float64 {
	start, length, ok := es.stretch(w)
	if !ok {
		return nil
	}
	if length < 0.001 {
		return []float64{math.Mod(start+length/2, w)}
	}
	out := make([]float64, len(phaseSpots))
	for i, f := range phaseSpots {
		out[i] = math.Mod(start+f*length, w)
	}
	return out
}

// stretch returns the longest stretch of phases [start, start+length) of
// a timer of windows of w seconds that puts an edge in the most gaps and
// in no ban (see phases).
func (es edgeSet) stretch(w float64) (start, length float64, ok bool) {
	if len(es.gaps) == 0 || !(w > 0) {
		return 0, 0, false
	}
	// Each gap allows the phases of an arc [start, start+length) of the
	// circle of circumference w; a gap of w or more allows every phase.
	type arc struct{ start, length float64 }
	arcs := make([]arc, 0, len(es.gaps))
	free := 0
	for _, g := range es.gaps {
		if g.hi-g.lo >= w {
			free++
			continue
		}
		arcs = append(arcs, arc{start: math.Mod(g.lo, w), length: g.hi - g.lo})
	}
	if len(arcs) == 0 {
		return 0, 0, false
	}
	// dist is the distance from a forward to b on the circle.
	dist := func(a, b float64) float64 {
		d := math.Mod(b-a, w)
		if d < 0 {
			d += w
		}
		return d
	}
	// The most covered stretch starts at some arc's start: from there it
	// lasts until the first end of an arc that covers it.
	bestCount, bestStart, bestLen := -1, 0.0, 0.0
	for _, a := range arcs {
		count, length := 0, w
		for _, b := range arcs {
			if d := dist(b.start, a.start); d <= b.length {
				count++
				length = math.Min(length, b.length-d)
			}
		}
		if count > bestCount || (count == bestCount && length > bestLen) {
			bestCount, bestStart, bestLen = count, a.start, length
		}
	}
	if missed := len(arcs) - bestCount; missed > (len(arcs)+free)/phaseSlack {
		return 0, 0, false
	}
	if dist(bestStart, 0) <= bestLen || bestStart == 0 {
		return 0, 0, false // the epoch's phase: an epoch-aligned window
	}
	// The bans cut the stretch: its longest piece that no ban covers
	// (offsets from bestStart) places the phase; when the bans cover it
	// all, the stretch's middle stands and the replay counts its misses.
	pieces := [][2]float64{{0, bestLen}}
	for _, b := range es.bans {
		if b.hi-b.lo >= w {
			continue // a model with this window misses there anyway
		}
		lo := dist(bestStart, math.Mod(b.lo, w))
		for _, cut := range [][2]float64{{lo, lo + b.hi - b.lo}, {lo - w, lo - w + b.hi - b.lo}} {
			var next [][2]float64
			for _, pc := range pieces {
				if cut[1] <= pc[0] || cut[0] >= pc[1] {
					next = append(next, pc)
					continue
				}
				if cut[0] > pc[0] {
					next = append(next, [2]float64{pc[0], cut[0]})
				}
				if cut[1] < pc[1] {
					next = append(next, [2]float64{cut[1], pc[1]})
				}
			}
			pieces = next
		}
	}
	from, long := 0.0, bestLen
	best := -1.0
	for _, pc := range pieces {
		if pc[1]-pc[0] > best {
			best, from, long = pc[1]-pc[0], pc[0], pc[1]-pc[0]
		}
	}
	return math.Mod(bestStart+from, w), long, true
}
