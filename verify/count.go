package verify

import (
	"math"
	"slices"
	"sort"
)

// Interval is a request's server arrival time, known only to lie in
// [Lo, Hi] (nanoseconds on the reference clock, Lo ≤ Hi).
type Interval struct {
	Lo, Hi int64
}

// Span is a set of requests found by a count, with its evidence.
type Span struct {
	// Count is the number of requests in the set.
	Count int
	// Members are the indexes (into the counted slice) of the requests,
	// ascending by Lo.
	Members []int
	// Start and End bound the set: for a certain set min(Lo) and max(Hi),
	// the interval that surely holds every arrival; for a possible set
	// min(Hi) and max(Lo).
	Start, End int64
}

// MaxInWindow returns the most requests that certainly, and that possibly,
// arrived within one interval of length w (half-open: two arrivals exactly
// w apart are in different intervals).
//
// A set is certain when max(Hi) − min(Lo) < w: whatever the true arrival
// times, they fit in one interval. It is possible when max(Lo) − min(Hi) <
// w: some arrival times inside the bounds fit. It runs in O(n log n).
func MaxInWindow(iv []Interval, w int64) (certain, possible Span) {
	n := len(iv)
	if n == 0 || w <= 0 {
		return Span{}, Span{}
	}
	// Certain: for each i as the earliest lower bound, count j with
	// Lo_j ≥ Lo_i and Hi_j < Lo_i + w. Process i by descending Lo,
	// inserting Hi values into a Fenwick tree over ranks of Hi.
	best, bestI := bestAnchor(iv, w, func(x Interval) int64 { return x.Lo }, func(x Interval) int64 { return x.Hi })
	if best > 0 {
		lo := iv[bestI].Lo
		certain = collect(iv, func(x Interval) bool { return x.Lo >= lo && x.Hi < lo+w })
		certain.Start, certain.End = lo, maxHi(iv, certain.Members)
	}
	// Possible: for each i as the earliest upper bound, count j with
	// Hi_j ≥ Hi_i and Lo_j < Hi_i + w.
	best, bestI = bestAnchor(iv, w, func(x Interval) int64 { return x.Hi }, func(x Interval) int64 { return x.Lo })
	if best > 0 {
		hi := iv[bestI].Hi
		possible = collect(iv, func(x Interval) bool { return x.Hi >= hi && x.Lo < hi+w })
		possible.Start, possible.End = hi, maxLo(iv, possible.Members)
	}
	return certain, possible
}

// bestAnchor maximises, over anchors i, #{j : key(j) ≥ key(i) and
// other(j) < key(i) + w}. It returns the count and the anchor.
func bestAnchor(iv []Interval, w int64, key, other func(Interval) int64) (int, int) {
	n := len(iv)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return key(iv[order[a]]) > key(iv[order[b]]) })
	vals := make([]int64, n)
	for i := range iv {
		vals[i] = other(iv[i])
	}
	slices.Sort(vals)
	bit := make([]int, n+1)
	add := func(r int) {
		for r++; r <= n; r += r & -r {
			bit[r]++
		}
	}
	sum := func(r int) int { // count of ranks < r
		s := 0
		for ; r > 0; r -= r & -r {
			s += bit[r]
		}
		return s
	}
	rank := func(v int64) int { return sort.Search(n, func(k int) bool { return vals[k] >= v }) }
	best, bestI := 0, -1
	for a := 0; a < n; {
		// Insert the whole group with the same key first (ties count).
		b := a
		for b < n && key(iv[order[b]]) == key(iv[order[a]]) {
			// Duplicate values share a rank; Fenwick counts them all.
			add(rank(other(iv[order[b]])))
			b++
		}
		for ; a < b; a++ {
			i := order[a]
			k := key(iv[i])
			c := sum(rank(satAdd(k, w)))
			if c > best {
				best, bestI = c, i
			}
		}
	}
	return best, bestI
}

// satAdd adds without overflowing.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func collect(iv []Interval, in func(Interval) bool) Span {
	var s Span
	for i, x := range iv {
		if in(x) {
			s.Members = append(s.Members, i)
		}
	}
	slices.SortStableFunc(s.Members, func(a, b int) int { return cmpInt64(iv[a].Lo, iv[b].Lo) })
	s.Count = len(s.Members)
	return s
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func maxHi(iv []Interval, m []int) int64 {
	v := int64(math.MinInt64)
	for _, i := range m {
		v = max(v, iv[i].Hi)
	}
	return v
}

func maxLo(iv []Interval, m []int) int64 {
	v := int64(math.MinInt64)
	for _, i := range m {
		v = max(v, iv[i].Lo)
	}
	return v
}

// Window is one fixed window [Start, Start+Length), whose start is known
// only to lie in [StartLo, StartHi].
type Window struct {
	StartLo, StartHi int64
	Length           int64
	// Starter, when HasStarter, is the arrival bounds of the request that
	// surely opened the window (first-request alignment): it is in the
	// window whatever its true arrival.
	Starter    Interval
	HasStarter bool
}

// certainly reports whether x surely arrived inside the window.
func (w Window) certainly(x Interval) bool {
	if w.HasStarter && x == w.Starter {
		return true
	}
	return x.Lo >= w.StartHi && x.Hi < w.StartLo+w.Length
}

// possibly reports whether x may have arrived inside the window.
func (w Window) possibly(x Interval) bool {
	return x.Hi >= w.StartLo && x.Lo < w.StartHi+w.Length
}

// EpochWindows returns the fixed windows of length w that start at
// multiples of w since the Unix epoch and touch [from, to]; origin is the
// Unix time in nanoseconds of relative time 0.
func EpochWindows(origin, from, to, w int64) []Window {
	if w <= 0 || to < from {
		return nil
	}
	// Window k covers [k·w − origin, (k+1)·w − origin) in relative time.
	first := floorDiv(origin+from, w)
	last := floorDiv(origin+to, w)
	if last-first > 1e6 { // absurd spans: keep the count bounded
		last = first + 1e6
	}
	out := make([]Window, 0, last-first+1)
	for k := first; k <= last; k++ {
		s := k*w - origin
		out = append(out, Window{StartLo: s, StartHi: s, Length: w})
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// FirstRequestWindows returns the fixed windows of length w anchored at a
// key's first request: the first window starts at the first arrival of
// all (every request reaching the limiter, accepted or not); each later
// window at the first arrival at or after the previous start + w. Arrival
// bounds make window starts uncertain; the bounds are carried forward
// soundly. When busy, the key may have been in use before the first
// request (traffic from before the run): the first window may then have
// opened up to w before it, and the starts stay uncertain until a silence
// of w lets a request surely open one.
func FirstRequestWindows(all []Interval, w int64, busy bool) []Window {
	if len(all) == 0 || w <= 0 {
		return nil
	}
	byLo := slices.Clone(all)
	slices.SortFunc(byLo, func(a, b Interval) int { return cmpInt64(a.Lo, b.Lo) })
	byHi := slices.Clone(all)
	slices.SortFunc(byHi, func(a, b Interval) int { return cmpInt64(a.Hi, b.Hi) })
	// The first arrival lies in [min Lo, min Hi].
	cur := Window{StartLo: byLo[0].Lo, StartHi: byHi[0].Hi, Length: w}
	cur.Starter, cur.HasStarter = starter(byLo, byHi[0], math.MinInt64, math.MinInt64)
	if busy {
		cur.StartLo -= w - 1
		cur.Starter, cur.HasStarter = Interval{}, false
	}
	out := []Window{cur}
	for len(out) < 1e6 {
		endLo, endHi := cur.StartLo+w, cur.StartHi+w
		// Upper bound of the next start: the earliest Hi among requests
		// surely at or after endHi.
		i := sort.Search(len(byLo), func(k int) bool { return byLo[k].Lo >= endHi })
		nextHi := int64(math.MaxInt64)
		for _, x := range byLo[i:] {
			nextHi = min(nextHi, x.Hi)
		}
		// Lower bound: the earliest possible arrival at or after endLo.
		j := sort.Search(len(byHi), func(k int) bool { return byHi[k].Hi >= endLo })
		if j == len(byHi) {
			break // nobody can arrive after this window: it is the last
		}
		nextLo := int64(math.MaxInt64)
		for _, x := range byHi[j:] {
			if nextLo = min(nextLo, max(x.Lo, endLo)); nextLo == endLo {
				break
			}
		}
		if nextHi == math.MaxInt64 {
			// A later window may start, but only among requests that
			// straddle the end: its start is at most their latest Hi.
			nextHi = byHi[len(byHi)-1].Hi
		}
		cur = Window{StartLo: nextLo, StartHi: max(nextLo, nextHi), Length: w}
		cur.Starter, cur.HasStarter = starter(byLo, byHi[j], endLo, endHi)
		out = append(out, cur)
	}
	return out
}

// starter reports whether c — the request with the earliest Hi among those
// that may open a window after a previous one ending in [endLo, endHi] —
// surely opened it: it surely arrived after the end, and no other request
// can have arrived between the end and it.
func starter(byLo []Interval, c Interval, endLo, endHi int64) (Interval, bool) {
	if c.Lo < endHi {
		return Interval{}, false
	}
	for _, x := range byLo {
		if x.Lo >= c.Hi {
			break
		}
		if x != c && x.Hi >= endLo {
			return Interval{}, false
		}
	}
	return c, true
}

// MaxInFixedWindows returns the window holding the most requests
// certainly, and the one holding the most possibly, with their members.
func MaxInFixedWindows(iv []Interval, windows []Window) (certain, possible Span) {
	if len(iv) == 0 {
		return
	}
	order := make([]int, len(iv))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return iv[order[a]].Lo < iv[order[b]].Lo })
	var maxWidth int64
	for _, x := range iv {
		maxWidth = max(maxWidth, x.Hi-x.Lo)
	}
	for _, w := range windows {
		// Candidates: Lo in [StartLo − maxWidth, StartHi + Length).
		a := sort.Search(len(order), func(k int) bool { return iv[order[k]].Lo >= w.StartLo-maxWidth })
		var c, p Span
		for _, i := range order[a:] {
			x := iv[i]
			if x.Lo >= w.StartHi+w.Length {
				break
			}
			if w.certainly(x) {
				c.Members = append(c.Members, i)
			}
			if w.possibly(x) {
				p.Members = append(p.Members, i)
			}
		}
		c.Count, p.Count = len(c.Members), len(p.Members)
		if c.Count > certain.Count {
			c.Start, c.End = w.StartHi, w.StartLo+w.Length
			certain = c
		}
		if p.Count > possible.Count {
			p.Start, p.End = w.StartLo, w.StartHi+w.Length
			possible = p
		}
	}
	return certain, possible
}

// BucketSpan is the interval where accepted requests most exceed a
// bucket's refill: Count requests in an interval of length Length ns.
type BucketSpan struct {
	Span
	// Length is the interval length in ns: End − Start for a certain
	// set, max(0, End − Start) for a possible one.
	Length int64
	// Excess is Count − rate·Length (rate per ns): the bucket's bound
	// capacity + ⌊rate·Length⌋ is broken exactly when Excess > capacity.
	Excess float64
}

// Bound returns capacity + ⌊rate·Length⌋ for rate in requests per second.
func (b BucketSpan) Bound(capacity int64, rate float64) int64 {
	return capacity + int64(math.Floor(rate*float64(b.Length)/1e9+1e-9))
}

// MaxBucketExcess returns the sets of requests that most exceed a refill
// at rate requests per second, certainly and possibly, over intervals of
// length at most maxLen ns (0 = any). A token bucket of capacity C
// refilled at rate admits at most C + ⌊rate·L⌋ in any interval of length
// L, so Excess > C proves a violation. O(n log n).
func MaxBucketExcess(iv []Interval, rate float64, maxLen int64) (certain, possible BucketSpan) {
	if len(iv) == 0 || rate <= 0 {
		return
	}
	rns := rate / 1e9
	if maxLen <= 0 {
		maxLen = math.MaxInt64
	}
	// Certain: start = Lo_i, end = Hi_p; count j with Lo_j ≥ Lo_i and
	// Hi_j ≤ Hi_p.
	ci, cp, cv := bestBucket(iv, rns, maxLen, false)
	if ci >= 0 {
		lo, hi := iv[ci].Lo, iv[cp].Hi
		certain.Span = collect(iv, func(x Interval) bool { return x.Lo >= lo && x.Hi <= hi })
		certain.Start, certain.End, certain.Length = lo, hi, hi-lo
		certain.Excess = cv
	}
	// Possible: start = Hi_i, end = Lo_p; count j with Hi_j ≥ Hi_i and
	// Lo_j ≤ Lo_p; the length is max(0, Lo_p − Hi_i).
	pi, pp, pv := bestBucket(iv, rns, maxLen, true)
	if pi >= 0 {
		s, e := iv[pi].Hi, iv[pp].Lo
		possible.Span = collect(iv, func(x Interval) bool { return x.Hi >= s && x.Lo <= e })
		possible.Start, possible.End, possible.Length = s, e, max(0, e-s)
		possible.Excess = pv
	}
	return certain, possible
}

// bestBucket maximises count − r·length over (start i, end p). With swap
// false, start = Lo_i, end = Hi_p, members Lo ≥ start and Hi ≤ end; with
// swap true, start = Hi_i, end = Lo_p, members Hi ≥ start, Lo ≤ end, and
// the length is clamped at 0.
func bestBucket(iv []Interval, r float64, maxLen int64, swap bool) (bi, bp int, bv float64) {
	n := len(iv)
	start := func(x Interval) int64 { return x.Lo }
	end := func(x Interval) int64 { return x.Hi }
	if swap {
		start, end = end, start
	}
	// Positions are ends sorted ascending.
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	sort.Slice(pos, func(a, b int) bool { return end(iv[pos[a]]) < end(iv[pos[b]]) })
	ends := make([]int64, n)
	for k, i := range pos {
		ends[k] = end(iv[i])
	}
	t := newSegTree(n)
	// Initial value at position k: −r·end_k (relative to the first end,
	// to keep magnitudes small).
	base := ends[0]
	for k := range n {
		t.set(k, -r*float64(ends[k]-base))
	}
	// Cumulative counts for the clamped (length 0) case of swap.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return start(iv[order[a]]) > start(iv[order[b]]) })
	firstGE := func(v int64) int { return sort.Search(n, func(k int) bool { return ends[k] >= v }) }
	bi, bp, bv = -1, -1, math.Inf(-1)
	inserted := newFenwick(n)
	for a := 0; a < n; {
		b := a
		for b < n && start(iv[order[b]]) == start(iv[order[a]]) {
			i := order[b]
			// Member of every set whose end ≥ its own end.
			t.add(firstGE(end(iv[i])), n, 1)
			inserted.add(firstGE(end(iv[i])))
			b++
		}
		for ; a < b; a++ {
			i := order[a]
			s := start(iv[i])
			lo := firstGE(s)
			hi := n
			if maxLen != math.MaxInt64 {
				// ends < s + maxLen (strictly shorter than maxLen).
				hi = firstGE(satAdd(s, maxLen))
			}
			if lo < hi {
				if v, k := t.max(lo, hi); v+r*float64(s-base) > bv {
					bv, bi, bp = v+r*float64(s-base), i, pos[k]
				}
			}
			if swap && lo > 0 {
				// Ends before the start: length 0, count = members
				// whose end ≤ that end, i.e. all inserted with end < s.
				if c := float64(inserted.sum(lo)); c > bv {
					bv, bi, bp = c, i, pos[lo-1]
				}
			}
		}
	}
	return bi, bp, bv
}

// segTree is a range-add, range-max segment tree over float64.
type segTree struct {
	n    int
	mx   []float64
	lazy []float64
	arg  []int
}

func newSegTree(n int) *segTree {
	size := 1
	for size < n {
		size <<= 1
	}
	t := &segTree{n: size, mx: make([]float64, 2*size), lazy: make([]float64, 2*size), arg: make([]int, 2*size)}
	for k := range t.mx {
		t.mx[k] = math.Inf(-1)
	}
	for k := range size {
		t.arg[size+k] = k
	}
	return t
}

func (t *segTree) set(k int, v float64) {
	k += t.n
	t.mx[k] = v
	for k >>= 1; k > 0; k >>= 1 {
		t.pull(k)
	}
}

func (t *segTree) pull(k int) {
	l, r := 2*k, 2*k+1
	if t.mx[l] >= t.mx[r] {
		t.mx[k], t.arg[k] = t.mx[l], t.arg[l]
	} else {
		t.mx[k], t.arg[k] = t.mx[r], t.arg[r]
	}
	t.mx[k] += t.lazy[k]
}

// add adds v to positions [l, r).
func (t *segTree) add(l, r int, v float64) { t.addRec(1, 0, t.n, l, r, v) }

func (t *segTree) addRec(k, kl, kr, l, r int, v float64) {
	if r <= kl || kr <= l {
		return
	}
	if l <= kl && kr <= r {
		t.mx[k] += v
		t.lazy[k] += v
		return
	}
	m := (kl + kr) / 2
	t.addRec(2*k, kl, m, l, r, v)
	t.addRec(2*k+1, m, kr, l, r, v)
	t.pull(k)
}

// max returns the maximum over [l, r) and its position.
func (t *segTree) max(l, r int) (float64, int) { return t.maxRec(1, 0, t.n, l, r) }

func (t *segTree) maxRec(k, kl, kr, l, r int) (float64, int) {
	if r <= kl || kr <= l {
		return math.Inf(-1), -1
	}
	if l <= kl && kr <= r {
		return t.mx[k], t.arg[k]
	}
	m := (kl + kr) / 2
	a, ai := t.maxRec(2*k, kl, m, l, r)
	b, bi := t.maxRec(2*k+1, m, kr, l, r)
	if b > a {
		a, ai = b, bi
	}
	return a + t.lazy[k], ai
}

// fenwick counts insertions by position.
type fenwick []int

func newFenwick(n int) fenwick { return make(fenwick, n+1) }

func (f fenwick) add(k int) {
	for k++; k < len(f); k += k & -k {
		f[k]++
	}
}

// sum counts insertions at positions < k.
func (f fenwick) sum(k int) int {
	s := 0
	for ; k > 0; k -= k & -k {
		s += f[k]
	}
	return s
}

// MaxInUnknownWindows counts fixed windows of length w whose alignment is
// unknown (align unknown, as infer reports it): windows start at phase +
// k·w for some phase in [0, w). certain is the most requests that, whatever
// the phase, some window certainly holds — a count the target exceeded
// under every alignment; certainPhase is a phase where no window holds
// more. possible is the most any window may hold under some phase, at
// possiblePhase. O(n log n).
func MaxInUnknownWindows(iv []Interval, w int64) (certain, possible int, certainPhase, possiblePhase int64) {
	if len(iv) == 0 || w <= 0 {
		return 0, 0, 0, 0
	}
	// A request is certainly in the window starting at s for s in
	// [Hi−w+1, Lo], possibly for s in [Lo−w+1, Hi]. Split each range of s
	// into (k, phase) pieces and sweep the phase.
	type event struct {
		at    int64 // phase
		k     int64
		delta int
	}
	pieces := func(a, b int64) []event {
		var out []event
		for a <= b {
			k := floorDiv(a, w)
			end := min(b, (k+1)*w-1)
			out = append(out, event{a - k*w, k, +1}, event{end - k*w + 1, k, -1})
			a = end + 1
		}
		return out
	}
	sweep := func(evs []event, best func(cur, bestSoFar int) bool, init int) (int, int64) {
		slices.SortFunc(evs, func(x, y event) int {
			if c := cmpInt64(x.at, y.at); c != 0 {
				return c
			}
			return x.delta - y.delta // ends before starts at the same phase
		})
		count := map[int64]int{}
		freq := map[int]int{}
		top := 0
		result, phase := init, int64(0)
		judge := func(at int64) {
			if at < w && best(top, result) {
				result, phase = top, at
			}
		}
		if len(evs) == 0 || evs[0].at > 0 {
			judge(0)
		}
		for i := 0; i < len(evs); {
			at := evs[i].at
			for ; i < len(evs) && evs[i].at == at; i++ {
				e := evs[i]
				c := count[e.k]
				if c > 0 {
					freq[c]--
				}
				c += e.delta
				count[e.k] = c
				if c > 0 {
					freq[c]++
				}
				if c > top {
					top = c
				}
				for top > 0 && freq[top] == 0 {
					top--
				}
			}
			judge(at)
		}
		return result, phase
	}
	var ce, pe []event
	for _, x := range iv {
		if x.Hi-x.Lo < w {
			ce = append(ce, pieces(x.Hi-w+1, x.Lo)...)
		}
		pe = append(pe, pieces(x.Lo-w+1, x.Hi)...)
	}
	certain, certainPhase = sweep(ce, func(cur, so int) bool { return cur < so }, math.MaxInt)
	possible, possiblePhase = sweep(pe, func(cur, so int) bool { return cur > so }, -1)
	return certain, possible, certainPhase, possiblePhase
}
