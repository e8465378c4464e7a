package infer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
)

// experiment is a candidate schedule: sends at absolute times, all as
// client 0, with a name for the record's phase.
type experiment struct {
	phase string
	at    []time.Time
	// groups[i] is the group of send i: outcomes are compared per group
	// (the number accepted), as the fitting compares clusters.
	groups []int
	info   float64 // expected information, bits
	cost   time.Duration
}

func (e *experiment) end() time.Time { return e.at[len(e.at)-1] }

// paced returns e as prober.paced sends it: every send at least pace
// after the one before it. e's sends are in time order (as every
// candidate's are), so each keeps its group.
func (e experiment) paced(pace time.Duration) experiment {
	if pace <= 0 || len(e.at) == 0 {
		return e
	}
	sends := pacedSends(e.sends(e.at[0]), pace)
	at := make([]time.Time, len(sends))
	for i, sd := range sends {
		at[i] = e.at[0].Add(sd.At)
	}
	e.at = at
	return e
}

// Timing resolution of the design: a prediction that changes when the
// sends move by max(scale/designTolDiv, minDesignTol) is uncertain.
const (
	designTolDiv = 500
	minDesignTol = 2 * time.Millisecond
)

// sends turns the experiment into a schedule's sends starting at start.
func (e *experiment) sends(start time.Time) []patterns.Send {
	out := make([]patterns.Send, len(e.at))
	for i, t := range e.at {
		out[i] = patterns.Send{At: t.Sub(start), Phase: e.phase}
	}
	return out
}

// builder appends sends to an experiment.
type builder struct {
	e     experiment
	group int
}

func newBuilder(phase string) *builder { return &builder{e: experiment{phase: phase}} }

// burst adds n sends at t, as one group.
func (b *builder) burst(t time.Time, n int) *builder {
	for range n {
		b.e.at = append(b.e.at, t)
		b.e.groups = append(b.e.groups, b.group)
	}
	b.group++
	return b
}

// spread adds n sends evenly over [t, t+span], each its own group.
func (b *builder) spread(t time.Time, span time.Duration, n int) *builder {
	for i := range n {
		off := time.Duration(0)
		if n > 1 {
			off = span * time.Duration(i) / time.Duration(n-1)
		}
		b.e.at = append(b.e.at, t.Add(off))
		b.e.groups = append(b.e.groups, b.group)
		b.group++
	}
	return b
}

func (b *builder) done() experiment { return b.e }

// weighted is a hypothesis with its prior weight in the design.
type weighted struct {
	s scored
	w float64
}

// maxDesignHyps bounds the hypotheses simulated per candidate experiment.
const maxDesignHyps = 400

// missLikelihood is the relative likelihood of a hypothesis per outcome it
// misses beyond the best: a miss is twenty times less likely than a hit.
const missLikelihood = 0.05

// weigh gives each hypothesis of p a weight: each family, each variant
// within it and each (count, delay) group within that share equally, times
// the likelihood missLikelihood^(misses beyond the best) of the group's best
// hypothesis, shared within the group by likelihood. With limit > 0 it keeps
// at most about limit hypotheses, spread evenly over the continuous
// parameter of each group.
func weigh(p []scored, limit int) []weighted {
	type gkey struct {
		v    variant
		n, d int64
		p    float64
	}
	best := math.MaxInt
	groups := map[gkey][]int{} // indices into p
	var order []gkey
	for i, s := range p {
		best = min(best, s.miss)
		k := gkey{s.h.v, s.h.n, s.h.d, s.h.p}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	per := math.MaxInt
	if limit > 0 {
		per = max(limit/max(len(order), 1), 3)
	}
	famVariants := map[Family]map[variant]bool{}
	variantGroups := map[variant]int{}
	for _, k := range order {
		if famVariants[k.v.fam] == nil {
			famVariants[k.v.fam] = map[variant]bool{}
		}
		famVariants[k.v.fam][k.v] = true
		variantGroups[k.v]++
	}
	out := make([]weighted, 0, len(p))
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g, func(a, b int) int { return cmp.Compare(p[a].h.x, p[b].h.x) })
		pick := g
		if len(g) > per {
			pick = make([]int, 0, per)
			for i := range per {
				pick = append(pick, g[i*(len(g)-1)/(per-1)])
			}
		}
		// The group's weight goes to its hypotheses in proportion to their
		// likelihood, and the group weighs as its best hypothesis: a model
		// that fits only in a narrow range of its parameter is not thereby
		// less plausible than one that fits in a wide range.
		gbest := math.MaxInt
		for _, i := range pick {
			gbest = min(gbest, p[i].miss)
		}
		norm := 0.0
		for _, i := range pick {
			norm += math.Pow(missLikelihood, float64(p[i].miss-gbest))
		}
		w := 1 / float64(len(famVariants)) / float64(len(famVariants[k.v.fam])) / float64(variantGroups[k.v]) *
			math.Pow(missLikelihood, float64(gbest-best)) / norm
		for _, i := range pick {
			out = append(out, weighted{p[i], w * math.Pow(missLikelihood, float64(p[i].miss-gbest))})
		}
	}
	return out
}

// resolvedShare is the weight the leading class must hold for the
// hypotheses to count as resolved.
const resolvedShare = 0.99

// resolved reports whether the plausible hypotheses agree on what would be
// reported: one class holds nearly all the weight, and among its best
// hypotheses the continuous parameter varies by at most 10 %.
func resolved(p []scored) bool {
	if len(p) == 0 {
		return true
	}
	mass := map[class]float64{}
	total := 0.0
	for _, x := range weigh(p, 0) {
		mass[classOf(x.s.h)] += x.w
		total += x.w
	}
	var top class
	for c, m := range mass {
		if m > mass[top] {
			top = c
		}
	}
	if mass[top] < resolvedShare*total {
		return false
	}
	trace("resolved: class %+v holds %.3f of %.3f", top, mass[top], total)
	best := math.MaxInt
	for _, s := range p {
		if classOf(s.h) == top {
			best = min(best, s.miss)
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p {
		if classOf(s.h) == top && s.miss == best {
			x := canonX(s.h)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	return hi/lo <= 1.1
}

// designer simulates candidate experiments over weighted hypotheses. The
// experiments are sent as one client, whose identity in the results is
// client.
type designer struct {
	ws        []weighted
	perClient bool
	client    string
	// pace, when set, is the spacing of a paced session's sends (see
	// prober.paced): a burst is sent one request after another, and the
	// candidates are predicted as they will be sent. A burst predicted
	// at one instant but sent over K·pace would tell a sliding log from
	// a fixed window where the sends as made tell nothing, and the same
	// design would be chosen again and again.
	pace time.Duration
	ans  []answer // answers(ws), computed on first use
}

// answerOf returns the answer of hypothesis i of dz.ws.
func (dz *designer) answerOf(i int) answer {
	if dz.ans == nil {
		dz.ans = answers(dz.ws)
	}
	return dz.ans[i]
}

// signature is a hypothesis's predicted outcome of an experiment whose sends
// arrive shift later, those at its first instant shift earlier instead:
// the number accepted per group.
func (dz *designer) signature(h hyp, from states, e *experiment, shift time.Duration) string {
	var b strings.Builder
	acc, g := 0, 0
	predict(h, from, e.at, -shift, shift, dz.client, dz.perClient, func(i int, d limiter.Decision) {
		if e.groups[i] != g {
			b.WriteString(strconv.Itoa(acc))
			b.WriteByte(',')
			acc, g = 0, e.groups[i]
		}
		if d.Allowed {
			acc++
		}
	})
	b.WriteString(strconv.Itoa(acc))
	return b.String()
}

// answerSpan is the relative width of the continuous parameter within
// which hypotheses of one class count as one answer: telling apart
// hypotheses closer than 2 % is worth nothing.
const answerSpan = 1.02

// answer is what a hypothesis would make infer report: its class and a
// group of neighbouring values of its continuous parameter.
type answer struct {
	c     class
	group int
}

// answers groups the hypotheses of each class by their continuous
// parameter: sorted, a group runs from its smallest value up to
// answerSpan times it. It returns each hypothesis's answer, by index.
func answers(ws []weighted) []answer {
	idx := make([]int, len(ws))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		ca, cb := classOf(ws[a].s.h), classOf(ws[b].s.h)
		if ca != cb {
			return cmp.Compare(fmt.Sprint(ca), fmt.Sprint(cb))
		}
		return cmp.Compare(canonX(ws[a].s.h), canonX(ws[b].s.h))
	})
	out := make([]answer, len(ws))
	group := 0
	var prev class
	start := 0.0
	for k, i := range idx {
		h := ws[i].s.h
		c, x := classOf(h), canonX(h)
		if k == 0 || c != prev || x > start*answerSpan {
			group++
			prev, start = c, x
		}
		out[i] = answer{c, group}
	}
	return out
}

// information returns the expected information (bits) that e's outcome
// carries about the answer: the mutual information H(outcome) −
// H(outcome | answer) under the hypotheses' weights. Outcomes that only
// split hypotheses of one answer are worth nothing, and so are differences
// that hinge on timing finer than a measurement can resolve (see
// designTolDiv).
func (dz *designer) information(e *experiment) float64 {
	type cell struct {
		a   answer
		sig string
	}
	joint := map[cell]float64{}
	bySig := map[string]float64{}
	byAns := map[answer]float64{}
	total := 0.0
	for i, x := range dz.ws {
		// A prediction that changes when the sends arrive a little early or
		// late (within what the fitting tolerates) is uncertain: the
		// hypothesis's weight is shared between both outcomes. The sends of
		// the experiment's first instant move the other way: what a
		// request does can hinge on its distance from the experiment's own
		// first one (a window started by it), and each arrives with its
		// own delay (a burst one window after a spread's first request was
		// split by a fixed window's range at its low end: every outcome
		// hinged on 3 ms of jitter, and told nothing).
		shift := max(x.s.h.scale()/designTolDiv, minDesignTol)
		early := dz.signature(x.s.h, x.s.r.states, e, -shift)
		late := dz.signature(x.s.h, x.s.r.states, e, shift)
		a := dz.answerOf(i)
		for _, sig := range []string{early, late} {
			joint[cell{a, sig}] += x.w / 2
			bySig[sig] += x.w / 2
		}
		byAns[a] += x.w
		total += x.w
	}
	info := 0.0
	for c, m := range joint {
		if m > 0 {
			info += m / total * math.Log2(m*total/(bySig[c.sig]*byAns[c.a]))
		}
	}
	return info
}
