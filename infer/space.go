package infer

import (
	"math"
	"slices"
	"time"
)

// narrowed returns the space of a refit after more observations: for each
// variant still in the pool, its counts and the range of its continuous
// parameter widened by 8 % (for epoch-aligned variants, the surviving
// windows themselves).
func (f *fit) narrowed() space {
	type acc struct {
		counts map[int64]bool
		delays map[int64]bool
		lo, hi float64
		xs     map[float64]bool
	}
	per := map[variant]*acc{}
	for _, s := range f.pool {
		a := per[s.h.v]
		if a == nil {
			a = &acc{counts: map[int64]bool{}, delays: map[int64]bool{}, lo: s.h.x, hi: s.h.x, xs: map[float64]bool{}}
			per[s.h.v] = a
		}
		a.counts[s.h.n] = true
		a.delays[s.h.d] = true
		a.lo, a.hi = math.Min(a.lo, s.h.x), math.Max(a.hi, s.h.x)
		a.xs[s.h.x] = true
	}
	sp := space{perClient: f.perClient, bounds: f.bounds}
	for _, v := range allVariants {
		a := per[v]
		if a == nil {
			continue
		}
		ax := axis{v: v, lo: a.lo / narrowMargin, hi: a.hi * narrowMargin}
		if b, ok := f.bounds[v]; ok {
			ax.lo, ax.hi = math.Max(ax.lo, b[0]), math.Min(ax.hi, b[1])
		}
		for c := range a.counts {
			ax.counts = append(ax.counts, c)
		}
		for d := range a.delays {
			ax.delays = append(ax.delays, d)
		}
		slices.Sort(ax.counts)
		slices.Sort(ax.delays)
		if v.aligned() {
			for x := range a.xs {
				ax.xs = append(ax.xs, x)
			}
			slices.Sort(ax.xs)
		}
		sp.axes = append(sp.axes, ax)
	}
	return sp
}

// blockWiden is how much further a block variant's first space reaches
// towards short windows and fast rates than the recovery time suggests.
const blockWiden = 20

// narrowMargin widens a narrowed space beyond the pool's range by two
// coarse steps, so that a best value at its edge can still move.
const narrowMargin = coarseRatio * coarseRatio

// unitGrid returns the multiples of a round unit (1, 2 or 5 × 10^k ms, at
// least 1 ms) in [lo, hi] seconds, the unit chosen so that there are at most
// maxPoints of them.
func unitGrid(lo, hi float64, maxPoints int) []float64 {
	unit := 0.001
	for k := 0; (hi-lo)/unit > float64(maxPoints); k++ {
		unit = 0.001 * []float64{2, 5, 10}[k%3] * math.Pow(10, float64(k/3))
	}
	var xs []float64
	for m := math.Ceil(lo/unit - 1e-9); m*unit <= hi*(1+1e-12); m++ {
		xs = append(xs, math.Round(m*unit*1e6)/1e6)
	}
	return xs
}

// newSpace builds the space of a first fit: every variant worth fitting,
// with the count candidates of the observations, windows in [wmin, wmax]
// seconds and rates in [rmin, rmax] per second.
func newSpace(o *observations, wmin, wmax, rmin, rmax float64, perClient bool) space {
	counts, delays := countCandidates(o)
	sp := space{perClient: perClient}
	for _, v := range variantsFor(o) {
		ax := axis{v: v, counts: counts, delays: delays, lo: wmin, hi: wmax}
		if !v.windowed() {
			ax.lo, ax.hi = rmin, rmax
		}
		switch v.beh {
		case BehaviourBlock:
			// A block hides the algorithm's own time scale: recovery took
			// as long as the block, which bounds the window (or the time
			// the bucket takes to fill) from above, not from below.
			if v.windowed() {
				ax.lo = max(ax.lo/blockWiden, minScaleS)
			} else {
				ax.hi = min(ax.hi*blockWiden, maxRateS)
			}
		case BehaviourExtend, BehaviourRestart:
			// Every refused probe of the recovery scans moved the window's
			// end again: recovery took the window after the last of them,
			// longer than the window by the scans themselves (a sliding log
			// of 1.5 s that restarts recovered after 5 s, and a first space
			// from 1.7 s never held it).
			ax.lo = max(ax.lo/blockWiden, minScaleS)
		}
		sp.axes = append(sp.axes, ax)
	}
	return sp
}

// defaultSpace derives a search space from the observations alone: windows
// from 5 ms to 1.5× the observed span (at most twice maxWindow), rates to
// match.
func defaultSpace(o *observations, maxWindow time.Duration, perClient bool) space {
	span := o.last.Sub(o.first).Seconds()
	wmax := math.Min(math.Max(1.5*span, 0.1), 2*maxWindow.Seconds())
	return newSpace(o, 0.005, wmax, 1/wmax, 1000, perClient)
}

// variantsFor returns the variants worth fitting: the leaky-bucket-queue only
// when accepted requests were held (queueing), and no behaviour of
// o.without, nor any behaviour when queueing (a queue's penalties are not
// in the vocabulary).
func variantsFor(o *observations) []variant {
	var vs []variant
	for _, v := range allVariants {
		if o.admits(v) {
			vs = append(vs, v)
		}
	}
	return vs
}

// admits reports whether a hypothesis of variant v may be fitted to o
// (see variantsFor): every hypothesis that enters a pool passes it.
func (o *observations) admits(v variant) bool {
	if v.fam == LeakyBucketQueue && !o.queueing {
		return false
	}
	return v.beh == "" || !o.queueing && !slices.Contains(o.without, v.beh)
}

// countCandidates proposes limits/capacities and leaky-bucket delays. Two
// counts estimate the quota available from idle: the most accepted in one
// cluster that also saw a rejection (a burst that exhausted the limiter),
// and everything accepted up to and including the first such cluster (a
// series of growing bursts from idle). Each gives A−2…A+1; the undelayed
// requests of the burst give the leaky bucket's delay=.
func countCandidates(o *observations) (counts, delays []int64) {
	best, bestUndelayed, first := quotaRuns(o)
	seen := map[int64]bool{}
	estimates := []int{best, first}
	if p := pacedPrefix(o); p > 0 {
		estimates = append(estimates, p)
	}
	for _, a := range estimates {
		if o.rotate > 1 {
			a = int(math.Round(float64(a) / float64(o.rotate))) // one instance's
		}
		for c := max(a-2, 1); c <= max(a+1, 1); c++ {
			if !seen[int64(c)] {
				seen[int64(c)] = true
				counts = append(counts, int64(c))
			}
		}
	}
	slices.Sort(counts)
	for dd := max(bestUndelayed-2, 0); dd <= bestUndelayed; dd++ {
		delays = append(delays, int64(dd))
	}
	return counts, delays
}

// pacedPrefix is, in a paced session (o.pace set), the most accepted
// before the first rejection of one run: a paced burst that crossed a
// window's edge admitted two windows' quotas, and its first one is the
// count. 0 when the session is not paced.
func pacedPrefix(o *observations) int {
	if o.pace <= 0 {
		return 0
	}
	most := 0
	for _, cl := range o.runs() {
		for i := cl[0]; i < cl[1]; i++ {
			if !o.list[i].accepted {
				most = max(most, i-cl[0])
				break
			}
		}
	}
	return most
}

// quotaEstimate is the larger of the two estimates of countCandidates (at
// least 1).
func quotaEstimate(o *observations) int {
	best, _, first := quotaRuns(o)
	return max(best, first, 1)
}

// quotaRuns returns the most accepted in one cluster that also saw a
// rejection (and how many of those were not delayed), and the number
// accepted up to and including the first cluster with a rejection.
func quotaRuns(o *observations) (best, bestUndelayed, first int) {
	total := 0
	for _, cl := range o.runs() {
		acc, undelayed, rejected := 0, 0, false
		for i := cl[0]; i < cl[1]; i++ {
			ob := o.list[i]
			if ob.accepted {
				acc++
				if ob.delay <= o.tol {
					undelayed++
				}
			} else {
				rejected = true
			}
		}
		total += acc
		if !rejected {
			continue
		}
		if first == 0 {
			first = total
		}
		if acc > best {
			best, bestUndelayed = acc, undelayed
		}
	}
	return best, bestUndelayed, first
}
