package verify

import (
	"math"
	"slices"
	"sort"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// Penalties (Endpoint.Penalty): what a limiter does to a key after
// refusing it, beyond counting. A declared penalty changes what the checks
// expect of an honest target:
//
//   - block:D ends in a fresh key, so the count starts afresh between a
//     refusal and the next admission; restart and block restart fixed
//     windows there. Where that changes the counts (freshAfterRefusal),
//     they are judged per stretch between refusals (split).
//   - A refusal the declared penalty may explain is expected: it is not
//     under-admission (penaltyExplains).
//   - Under extend and restart, a request between a refusal and the retry
//     its Retry-After invites moves the moment the retry is admitted
//     (retryMoved).
//
// A penalty the rule does not declare is undeclared-penalty
// (undeclared.go).

// firstRequest reports whether the rule counts fixed windows that start at
// a key's first request.
func (e *Endpoint) firstRequest() bool {
	return !e.IsBucket() && e.WindowType == Fixed && e.Align != limiter.AlignEpoch && e.Align != limiter.AlignTimer
}

// freshAfterRefusal reports whether, under the declared penalty, an honest
// key's count starts afresh between a refusal and the next admission where
// the rule's own counting would not: a block shorter than the period
// (the key admits a whole quota again before the policy's count would let
// it), and a block or restart under fixed windows that start at a key's
// first request (the next window starts at the first admission after it).
// A block at least a period long admits nothing the policy forbids, and a
// window counted over any interval or clock-aligned windows are kept by
// restart too (every admission after a refusal comes a window after it).
// Fixed clock-aligned windows under restart: the window a refusal
// stretched ends by a later window's start, whose count is fresh.
func (e *Endpoint) freshAfterRefusal() bool {
	switch e.Penalty.Kind {
	case limiter.PenaltyBlock:
		return e.Penalty.Duration < e.Period() || e.firstRequest()
	case limiter.PenaltyRestart:
		return e.firstRequest()
	}
	return false
}

// delimiters returns the refusals of t that split its counts into
// stretches (nil: no split). Under a declared penalty that makes counts
// start afresh (freshAfterRefusal), every refusal does. Under fixed windows
// that start at a key's first request, a refusal run that may last a
// window or more does too: an honest key of that policy, with or without a
// penalty, starts a new window at its first admission after any refusal,
// and only a penalty (or a longer window) keeps a key refused that long,
// so a window chained across such a run would be the penalty's, not the
// policy's (a block's fresh start is not window-limit-exceeded). Shorter
// runs are not split, so that a target whose windows do not start at its
// first request still shows.
func (r *rule) delimiters(t *traffic) []*obs {
	switch {
	case len(t.rej) == 0:
		return nil
	case r.e.freshAfterRefusal():
		return t.rej
	case r.e.firstRequest():
		return longRuns(t.os, int64(r.e.Window))
	}
	return nil
}

// longRuns returns the rejections of the runs in os (sorted by Lo) that
// may last w or more; a run ends at an acceptance surely decided after its
// first rejection (an acceptance that may precede it is taken into the
// run, which only makes it longer).
func longRuns(os []*obs, w int64) []*obs {
	var out, run []*obs
	var hi int64
	flush := func() {
		if len(run) > 0 && hi-run[0].iv.Lo >= w {
			out = append(out, run...)
		}
		run = nil
	}
	for _, o := range os {
		switch o.class {
		case record.ClassRejected:
			if len(run) == 0 {
				hi = o.iv.Hi
			}
			run = append(run, o)
			hi = max(hi, o.iv.Hi)
		case record.ClassAccepted:
			if len(run) > 0 && surelyAfter(run[0], o) {
				flush()
			}
		}
	}
	flush()
	return out
}

// delimiterIndex counts delimiters surely decided before and after an
// observation, under surelyAfter's rules: by decision sequence when both
// carry one, else by time.
type delimiterIndex struct {
	n int
	// Of the delimiters with a decision sequence: the sequences; of those
	// without: Hi and Lo; of all: Hi and Lo. Each sorted.
	decs, noDecHi, noDecLo, allHi, allLo []int64
}

func newDelimiterIndex(ds []*obs) *delimiterIndex {
	x := &delimiterIndex{n: len(ds)}
	for _, d := range ds {
		if d.res.Decision != nil {
			x.decs = append(x.decs, *d.res.Decision)
		} else {
			x.noDecHi = append(x.noDecHi, d.iv.Hi)
			x.noDecLo = append(x.noDecLo, d.iv.Lo)
		}
		x.allHi = append(x.allHi, d.iv.Hi)
		x.allLo = append(x.allLo, d.iv.Lo)
	}
	for _, s := range [][]int64{x.decs, x.noDecHi, x.noDecLo, x.allHi, x.allLo} {
		slices.Sort(s)
	}
	return x
}

// below counts the values of sorted s that are < v; above those > v.
func below(s []int64, v int64) int { return sort.Search(len(s), func(k int) bool { return s[k] >= v }) }
func above(s []int64, v int64) int {
	return len(s) - sort.Search(len(s), func(k int) bool { return s[k] > v })
}

// rangeOf returns the stretches o may belong to: from the number of
// delimiters surely decided before it to the number not surely decided
// after it. lo == hi: o's stretch is certain.
func (x *delimiterIndex) rangeOf(o *obs) (lo, hi int) {
	var before, after int
	if d := o.res.Decision; d != nil {
		before = below(x.decs, *d) + below(x.noDecHi, o.iv.Lo)
		after = above(x.decs, *d) + above(x.noDecLo, o.iv.Hi)
	} else {
		before = below(x.allHi, o.iv.Lo)
		after = above(x.allLo, o.iv.Hi)
	}
	return before, max(before, x.n-after)
}

// stretch is the acceptances between two delimiters.
type stretch struct {
	id int
	// acc are the acceptances surely in it, maybe those that may be
	// (acc included), both sorted by Lo.
	acc, maybe []*obs
	// wins are, under fixed windows that start at a key's first request,
	// the windows of a clean stretch: they start at its first admission.
	wins []Window
}

// clean reports whether every acceptance that may be in the stretch
// surely is: only then are its requests, and so its windows, known.
func (s *stretch) clean() bool { return len(s.acc) == len(s.maybe) }

// split is a group's traffic cut into stretches at its delimiters.
type split struct {
	ranges map[*obs][2]int // acceptance → its stretch range
	list   []*stretch      // by id, only stretches with acceptances
}

// splitOf cuts t's acceptances at r's delimiters; nil when there are none.
func (r *rule) splitOf(t *traffic) *split {
	ds := r.delimiters(t)
	if len(ds) == 0 {
		return nil
	}
	x := newDelimiterIndex(ds)
	sp := &split{ranges: make(map[*obs][2]int, len(t.acc))}
	byID := map[int]*stretch{}
	for _, o := range t.acc {
		lo, hi := x.rangeOf(o)
		sp.ranges[o] = [2]int{lo, hi}
		for k := lo; k <= hi; k++ {
			s := byID[k]
			if s == nil {
				s = &stretch{id: k}
				byID[k] = s
				sp.list = append(sp.list, s)
			}
			s.maybe = append(s.maybe, o)
			if lo == hi {
				s.acc = append(s.acc, o)
			}
		}
	}
	slices.SortFunc(sp.list, func(a, b *stretch) int { return a.id - b.id })
	if r.e.firstRequest() {
		for _, s := range sp.list {
			if s.clean() {
				s.wins = FirstRequestWindows(ivsOf(s.acc), int64(r.e.Window), false)
			}
		}
	}
	return sp
}

// stretchOf returns o's stretch id when it is certain.
func (sp *split) stretchOf(o *obs) (int, bool) {
	rg, ok := sp.ranges[o]
	return rg[0], ok && rg[0] == rg[1]
}

// sameStretch returns the stretch every acceptance of os surely belongs
// to, nil when they may belong to several (or os has none).
func (sp *split) sameStretch(os []*obs) *stretch {
	id := -1
	for _, o := range os {
		k, ok := sp.stretchOf(o)
		if !ok || id >= 0 && k != id {
			return nil
		}
		id = k
	}
	for _, s := range sp.list {
		if s.id == id {
			return s
		}
	}
	return nil
}

// inStretch returns the members of os surely in stretch s.
func (sp *split) inStretch(os []*obs, s *stretch) []*obs {
	return filter(os, func(o *obs) bool { k, ok := sp.stretchOf(o); return ok && k == s.id })
}

// maybeInStretch returns the members of os that may be in stretch s.
func (sp *split) maybeInStretch(os []*obs, s *stretch) []*obs {
	return filter(os, func(o *obs) bool { rg, ok := sp.ranges[o]; return ok && rg[0] <= s.id && s.id <= rg[1] })
}

// countSet is a set of accepted requests judged as one count: under a
// split, one stretch's; else all of them. wins are the fixed windows to
// count them in (nil: none fit, or not fixed).
type countSet struct {
	os   []*obs
	wins []Window
}

// countSets returns the sets of counted acceptances whose counts are
// certain (each surely in one stretch, under windows known for it) and
// those whose counts are possible.
func (r *rule) countSets(t *traffic) (certain, possible []countSet) {
	if r.sp == nil {
		return []countSet{{t.counted, r.wins}}, []countSet{{t.counted, r.wins}}
	}
	for _, s := range r.sp.list {
		c := countSet{os: r.sp.inStretch(t.counted, s), wins: r.wins}
		p := countSet{os: r.sp.maybeInStretch(t.counted, s), wins: r.wins}
		if r.e.firstRequest() {
			c.wins, p.wins = s.wins, FirstRequestWindows(ivsOf(s.maybe), int64(r.e.Window), false)
			if !s.clean() {
				c.os = nil
			}
		}
		certain = append(certain, c)
		possible = append(possible, p)
	}
	return certain, possible
}

// splitWindows returns the windows of the clean stretches (fixed windows
// that start at a key's first request, under a split).
func (sp *split) splitWindows() []Window {
	var wins []Window
	for _, s := range sp.list {
		wins = append(wins, s.wins...)
	}
	return wins
}

// penaltyExplains returns whether the declared penalty may explain
// rejection x (nil: there is none to explain it): under block:D a refusal
// that may come less than D after another (a block started there); under
// restart one that may come less than a window after another (which moved
// the window's end past it). Extend changes what counts instead
// (extendLeft). Every order the evidence allows is taken, so a refusal is
// unexplained only if it is in every one.
func (r *rule) penaltyExplains(t *traffic) func(x *obs) bool {
	var d int64
	switch r.e.Penalty.Kind {
	case limiter.PenaltyBlock:
		d = int64(r.e.Penalty.Duration)
	case limiter.PenaltyRestart:
		d = int64(r.e.Window)
	default:
		return nil
	}
	// The two latest Hi among the rejections up to each Lo (t.rej is
	// sorted by Lo): the latest other than x is one of them.
	rej := t.rej
	top := make([][2]*obs, len(rej))
	var a, b *obs
	for i, o := range rej {
		switch {
		case a == nil || o.iv.Hi > a.iv.Hi:
			a, b = o, a
		case b == nil || o.iv.Hi > b.iv.Hi:
			b = o
		}
		top[i] = [2]*obs{a, b}
	}
	return func(x *obs) bool {
		// Rejections that may come before x: Lo ≤ x's Hi.
		k := sort.Search(len(rej), func(i int) bool { return rej[i].iv.Lo > x.iv.Hi })
		if k == 0 {
			return false
		}
		s := top[k-1][0]
		if s == x {
			s = top[k-1][1]
		}
		return s != nil && x.iv.Lo < s.iv.Hi+d
	}
}

// extendLeft returns, under extend, for a rejection x, the quota surely
// left: N less every acceptance that may belong to x's busy period (the
// requests before it with gaps shorter than a window, each gap as short
// as the bounds allow: extend resets the count only after a window
// without any request). Requests that may have reached the limiter count
// as requests.
func (r *rule) extendLeft(t *traffic) func(*obs) int64 {
	w := int64(r.e.Window)
	reqs := filter(t.os, func(o *obs) bool { return o.class != record.ClassNotSent })
	slices.SortStableFunc(reqs, func(a, b *obs) int { return cmpInt64(b.iv.Hi, a.iv.Hi) })
	return func(x *obs) int64 {
		c, n := x.iv.Lo, int64(0)
		for _, y := range reqs {
			if y == x || y.iv.Lo > x.iv.Hi {
				continue
			}
			if y.iv.Hi <= c-w {
				break
			}
			c = min(c, y.iv.Lo)
			if y.class == record.ClassAccepted {
				n++
			}
		}
		return r.e.Limit - n
	}
}

// retryMoved reports whether, under extend (any request), restart or
// block (a refusal), a request may have been decided between response x
// and the retry q: it moved the window's end, or started a block, past the
// moment x advertised, so an honest target refuses q.
func (r *rule) retryMoved(t *traffic, x, q *obs) bool {
	kind := r.e.Penalty.Kind
	if kind == "" {
		return false
	}
	for _, o := range t.from(x.iv.Lo) {
		if o.iv.Lo > q.iv.Hi {
			break
		}
		if o == x || o == q || o.class == record.ClassNotSent || kind != limiter.PenaltyExtend && o.class != record.ClassRejected {
			continue
		}
		if possiblyAfter(x, o) && possiblyAfter(o, q) {
			return true
		}
	}
	return false
}

// freshAt returns, under a declared penalty that starts the count afresh
// after a refusal (freshAfterRefusal), the earliest a refusal other than a,
// possibly decided after a, may have reached the server — looking no
// further than until; math.MaxInt64 when there is none. A request that
// answered before that moment surely came before every such refusal.
func (r *rule) freshAt(t *traffic, a *obs, until int64) int64 {
	if !r.e.freshAfterRefusal() {
		return math.MaxInt64
	}
	for _, o := range t.from(a.iv.Lo) {
		if o.iv.Lo > until {
			break
		}
		if o != a && o.class == record.ClassRejected && possiblyAfter(a, o) {
			return o.iv.Lo
		}
	}
	return math.MaxInt64
}
