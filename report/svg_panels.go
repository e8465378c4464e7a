package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// The panels below the timeline (see svg.go): they share its time scale.

// drawWindow computes the count judged against the limit.
func drawWindow(in *Input, p *prepared, sc scale, acc map[uint32][]int64) windowPanel {
	s := in.trailingCounts(p, acc)
	if len(s.points) == 0 {
		return windowPanel{}
	}
	maxV := make([]float64, sc.bins)
	for i := range maxV {
		maxV[i] = -1
	}
	top := 0.0
	for _, pt := range s.points {
		bn := sc.bin(pt.t)
		maxV[bn] = math.Max(maxV[bn], pt.v)
		top = math.Max(top, pt.v)
	}
	top = math.Max(top, s.limit) * 1.1
	const y0, y1 = 12, 130
	y := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	out := windowPanel{Drawn: true, Label: s.label, Height: panelHeight, Axis: timeAxis(sc, y0, y1, false)}
	var ok, over strings.Builder
	for bn, v := range maxV {
		if v < 0 {
			continue
		}
		x := sc.binX(bn)
		if s.limit > 0 && v > s.limit+1e-9 {
			fmt.Fprintf(&ok, "M%d %.1fh%dV%dh-%dz", x, y(s.limit), sc.binPx, y1, sc.binPx)
			fmt.Fprintf(&over, "M%d %.1fh%dV%.1fh-%dz", x, y(v), sc.binPx, y(s.limit), sc.binPx)
		} else {
			fmt.Fprintf(&ok, "M%d %.1fh%dV%dh-%dz", x, y(v), sc.binPx, y1, sc.binPx)
		}
	}
	out.Bars = append(out.Bars, shape{D: ok.String(), Fill: colorCount})
	if over.Len() > 0 {
		out.Bars = append(out.Bars, shape{D: over.String(), Fill: colorViolation, Title: "above the limit"})
	}
	out.Lines = append(out.Lines, line{X1: marginLeft, X2: sc.right(), Y1: y1, Y2: y1, Stroke: colorLink})
	if s.limit == 0 || y(s.limit) < y1-10 {
		out.Labels = append(out.Labels, yLabel(y1, "0"))
	}
	if s.limit > 0 {
		yl := px(y(s.limit))
		out.Lines = append(out.Lines, line{X1: marginLeft, X2: sc.right(), Y1: yl, Y2: yl, Stroke: colorLimit, Dash: "6 3"})
		out.Labels = append(out.Labels, yLabel(y(s.limit)+4, "limit "+units.HumanNumber(s.limit)))
	}
	if peak := top / 1.1; s.limit == 0 || math.Abs(y(peak)-y(s.limit)) > 10 {
		out.Labels = append(out.Labels, yLabel(y(peak)+4, units.HumanNumber(peak)))
	}
	out.Caption = s.label + "."
	if s.limit > 0 {
		if s.violations > 0 {
			out.Caption += fmt.Sprintf(" %s above the limit, the first at %s (drawn at send times; findings judge arrival bounds).",
				units.Count(s.violations, "accepted request"), fmtOffset(s.first))
		} else {
			out.Caption += " Never above the limit at send times."
		}
	}
	return out
}

// drawLatency computes each column's fastest and slowest answer per
// class, on a log scale.
func drawLatency(in *Input, p *prepared, sc scale) latencyPanel {
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := range in.reqs {
		if q := &in.reqs[i]; q.lat >= 0 && q.outcome == outResponse {
			lo, hi = min(lo, q.lat), max(hi, q.lat)
		}
	}
	if hi == 0 {
		return latencyPanel{}
	}
	dlo := math.Floor(math.Log10(float64(max(lo, 1000))))
	dhi := math.Ceil(math.Log10(float64(max(hi, 1000)) * 1.01))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	const y0, y1 = 10, 136
	y := func(ns int64) float64 {
		return y1 - (math.Log10(float64(max(ns, 1)))-dlo)/(dhi-dlo)*(y1-y0)
	}
	type mm struct{ lo, hi int64 }
	cols := make([]mm, sc.bins*int(numClasses))
	for i := range cols {
		cols[i] = mm{math.MaxInt64, -1}
	}
	for i := range in.reqs {
		q := &in.reqs[i]
		if q.lat < 0 || q.outcome != outResponse {
			continue
		}
		k := sc.bin(q.t)*int(numClasses) + int(q.class)
		cols[k].lo = min(cols[k].lo, q.lat)
		cols[k].hi = max(cols[k].hi, q.lat)
	}
	out := latencyPanel{Drawn: true, Height: panelHeight, Axis: timeAxis(sc, y0, y1, false)}
	for e := dlo; e <= dhi; e++ {
		yy := y(int64(math.Pow(10, e)))
		out.Grid = append(out.Grid, line{X1: marginLeft, X2: sc.right(), Y1: px(yy), Y2: px(yy), Stroke: colorGrid})
		out.Labels = append(out.Labels, yLabel(yy+4, units.HumanDuration(time.Duration(math.Pow(10, e)))))
	}
	var paths [numClasses]strings.Builder
	for k, c := range cols {
		if c.hi < 0 {
			continue
		}
		x := sc.binX(k / int(numClasses))
		cl := k % int(numClasses)
		fmt.Fprintf(&paths[cl], "M%d %.0fh2v2h-2z", x, y(c.hi)-1)
		if c.lo != c.hi {
			fmt.Fprintf(&paths[cl], "M%d %.0fh2v2h-2z", x, y(c.lo)-1)
		}
	}
	out.Marks = classShapes(&paths)
	if p.threshold > 0 {
		yy := px(y(p.threshold))
		out.Threshold = &line{X1: marginLeft, X2: sc.right(), Y1: yy, Y2: yy, Stroke: Delayed.Color(), Dash: "4 3",
			Title: "delayed from " + units.HumanDuration(time.Duration(p.threshold))}
	}
	return out
}

// drawClaims computes the waits advertised by rejections against the
// first acceptance observed after them.
func drawClaims(in *Input, p *prepared, sc scale, acc map[uint32][]int64) claimsPanel {
	cs := in.claims(p, acc)
	if len(cs) == 0 {
		return claimsPanel{}
	}
	// One claim per column and kind; the scale covers every claim.
	type key struct {
		bin  int
		kind uint8
	}
	picked := map[key]claimObs{}
	var keys []key
	top := int64(0)
	early, late := 0, 0
	for _, c := range cs {
		top = max(top, c.wait, c.observed)
		k := key{sc.bin(c.sent), c.kind}
		if _, ok := picked[k]; !ok {
			picked[k] = c
			keys = append(keys, k)
		}
		switch {
		case c.observed >= 0 && c.observed < c.wait-int64(time.Second):
			late++
		case c.observed > c.wait+int64(time.Second):
			early++
		}
	}
	top = max(top+top/10, int64(time.Second))
	const y0, y1 = 10, 136
	y := func(ns int64) float64 { return y1 - float64(ns)/float64(top)*(y1-y0) }
	out := claimsPanel{Drawn: true, Height: panelHeight, Axis: timeAxis(sc, y0, y1, false)}
	step := niceStep(top)
	for v := int64(0); v <= top; v += step {
		out.Labels = append(out.Labels, yLabel(y(v)+4, fmtTick(v)))
	}
	var links, ra, rst, obs strings.Builder
	for _, k := range keys {
		c := picked[k]
		x := sc.x(c.sent)
		d := &ra
		if c.kind == claimReset {
			d = &rst
		}
		fmt.Fprintf(d, "M%.1f %.1fl4 4l-4 4l-4 -4z", x, y(c.wait)-4)
		if c.observed >= 0 {
			fmt.Fprintf(&links, "M%.1f %.1fV%.1f", x, y(c.wait), y(c.observed))
			fmt.Fprintf(&obs, "M%.1f %.1fa3 3 0 1 0 0.01 0z", x-3, y(c.observed))
		}
	}
	out.Paths = append(out.Paths, shape{D: links.String(), Stroke: colorLink, Fill: "none"})
	if ra.Len() > 0 {
		out.Paths = append(out.Paths, shape{D: ra.String(), Fill: colorClaimRA, Title: "Retry-After"})
	}
	if rst.Len() > 0 {
		out.Paths = append(out.Paths, shape{D: rst.String(), Fill: colorClaimRst, Title: "rate-limit reset"})
	}
	out.Paths = append(out.Paths, shape{D: obs.String(), Fill: "none", Stroke: Accepted.Color(), Width: "1.5", Title: "first acceptance observed"})
	out.Legend = []swatch{{colorClaimRA, "Retry-After wait"}, {colorClaimRst, "reset wait"}, {Accepted.Color(), "first acceptance seen after the rejection"}}
	out.Caption = fmt.Sprintf("%s advertised a wait; for %d the first acceptance came more than 1s before it, for %d more than 1s after it (a client may simply not have asked earlier).",
		units.Count(len(cs), "rejection"), late, early)
	return out
}
