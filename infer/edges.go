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
// windows cheaply before replaying them.
type edgeSet struct{ gaps []edgeGap }

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
