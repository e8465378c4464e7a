package report

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// classColors are the classes' colours in the HTML report.
var classColors = [numClasses]string{"#1a9850", "#f4a11d", "#d7301f", "#7b61c4", "#222222", "#b8b8b8"}

// Color returns the class's colour in the HTML report, as "#rrggbb".
func (c Class) Color() string {
	if c < numClasses {
		return classColors[c]
	}
	return "#000000"
}

// Colours of the other marks.
const (
	colorEdge      = "#2b6cb0" // window edges
	colorRecovery  = "#e07b00" // detected boundaries: quota came back
	colorViolation = "#c51b7d" // counts above the limit
	colorCount     = "#5b9aa0" // counts within the limit
	colorFinding   = "#8b0000" // finding moments
	colorClaimRA   = "#2b6cb0" // Retry-After claims
	colorClaimRst  = "#6b46c1" // reset claims
)

// Drawing limits: whatever the run's size, the page stays small.
const (
	svgWidth     = 1000
	marginLeft   = 150
	marginRight  = 12
	plotWidth    = svgWidth - marginLeft - marginRight
	maxLanes     = 32  // lanes drawn; further clients share the last
	maxMoments   = 300 // findings drawn and listed
	maxEdges     = 200 // window edges drawn
	maxClientRow = 50  // rows of the clients table
)

// scale maps times to x coordinates over pixel-column bins.
type scale struct {
	t0, t1 int64
	bins   int
	binPx  int
}

func newScale(first, last int64, binPx int) scale {
	span := max(last-first, int64(time.Millisecond))
	pad := span / 50
	return scale{t0: first - pad, t1: last + pad, bins: plotWidth / binPx, binPx: binPx}
}

// x returns t's x coordinate, clamped to the plot.
func (s scale) x(t int64) float64 {
	f := float64(t-s.t0) / float64(s.t1-s.t0)
	return marginLeft + math.Min(math.Max(f, 0), 1)*float64(s.bins*s.binPx)
}

func (s scale) bin(t int64) int {
	b := int(float64(t-s.t0) / float64(s.t1-s.t0) * float64(s.bins))
	return min(max(b, 0), s.bins-1)
}

func (s scale) binX(b int) int { return marginLeft + b*s.binPx }

// HTML writes the report as one self-contained HTML page: no scripts and
// no external resources (every link is a #fragment). An SVG timeline shows
// each request as a mark at its send time, one lane per client (at most
// 32; further clients share the last lane), coloured by class, with the
// window edges of a fixed-window limit, the moments quota was seen to come
// back, and each finding's moment linked to its entry in the list beside.
// Below it: the count judged against the limit (trailing window or bucket
// fill) with the points above it highlighted, latency over time, and the
// waits that Retry-After and reset headers advertised against the recovery
// observed; then the inferred model and the summary tables.
//
// Marks are drawn per pixel column (requests of one column stacked in
// proportion to their classes), so the page stays under a few megabytes
// whatever the run's size; every count shown is computed from every
// request.
func HTML(w io.Writer, in *Input) error {
	p := in.prepare()
	var b bytes.Buffer
	h := &htmlWriter{b: &b, in: in, p: p}
	h.page()
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

type htmlWriter struct {
	b  *bytes.Buffer
	in *Input
	p  *prepared
}

func (h *htmlWriter) f(format string, a ...any) { fmt.Fprintf(h.b, format, a...) }
func (h *htmlWriter) s(s string)                { h.b.WriteString(s) }

// esc escapes text for HTML and SVG content and attributes.
func esc(s string) string { return html.EscapeString(s) }

const css = `*{box-sizing:border-box}
body{margin:16px;font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;background:#fff}
h1{font-size:16px;font-weight:600;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}h3{font-size:14px;margin:10px 0 4px}
.verdict{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:700;margin-right:8px}
.v-pass{background:#1a7f37}.v-fail{background:#b42318}.v-incomplete{background:#b26b00}.v-none{background:#57606a}
.meta{color:#57606a;font-size:12px;margin:2px 0}
.layout{display:grid;grid-template-columns:minmax(0,1fr) 340px;gap:20px;align-items:start}
svg{width:100%;height:auto;display:block;font:11px system-ui,sans-serif}
.legend{display:flex;flex-wrap:wrap;gap:12px;font-size:12px;margin:2px 0 4px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
.caption{font-size:12px;color:#57606a;margin:2px 0}
aside{overflow-wrap:anywhere;min-width:0}aside ol{padding-left:22px;margin:0}aside li{margin:0 0 10px}
aside li:target{background:#fff4d6;outline:2px solid #e0a800}
.sev{font-size:11px;padding:0 5px;border-radius:3px;color:#fff}
.sev-error{background:#b42318}.sev-warning{background:#b26b00}.sev-info{background:#57606a}
.possible{opacity:.75}.hint{color:#57606a;font-size:12px;margin:2px 0}
.where{font-size:12px;color:#57606a}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
th,td{padding:2px 8px;border-bottom:1px solid #e5e5e5;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-all;font-size:11px;background:#f6f8fa;padding:4px;margin:2px 0}
a{color:#0b5cad}
.moment:target rect{stroke-width:3}
`

func (h *htmlWriter) page() {
	in, p := h.in, h.p
	v := in.Verdict()
	h.s("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	h.f("<title>rlprobe report: %s</title>\n", esc(in.VerdictWord()))
	h.s("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>\n" + css + "</style>\n</head>\n<body>\n")
	h.f("<header>\n<h1><span class=\"verdict v-%s\">%s</span>%s</h1>\n", esc(v), esc(in.VerdictWord()), esc(in.VerdictLine()))
	if t := in.Targets(); len(t) > 0 {
		h.f("<p class=\"meta\">targets: %s</p>\n", esc(strings.Join(t, ", ")))
	}
	meta := "record files: " + strings.Join(in.Files, ", ")
	if !in.Start.IsZero() {
		meta += " · start " + in.Start.UTC().Format(time.RFC3339Nano)
	}
	if p.rule != nil {
		meta += " · limit " + p.rule.describe()
	}
	h.f("<p class=\"meta\">%s · %s</p>\n</header>\n", esc(meta), esc(in.tool()))
	h.s("<div class=\"layout\">\n<main>\n")
	if len(in.reqs) == 0 {
		h.s("<p>No requests recorded.</p>\n")
	} else {
		h.charts()
	}
	h.summary()
	h.s("</main>\n<aside>\n")
	h.findings()
	h.model()
	h.s("</aside>\n</div>\n</body>\n</html>\n")
}

// timeline is the layout of the timeline panel: one lane per client in
// order of its first request (at most maxLanes; further clients share the
// last), over pixel-column bins.
type timeline struct {
	sc          scale
	order       []uint32 // lanes in order of their first request
	rowOf       []int    // lane → row
	rows        int
	laneH       int
	top, bottom int
	height      int
}

// charts draws the four SVG panels sharing one time axis.
func (h *htmlWriter) charts() {
	acc := h.in.acceptedByGroup(h.p)
	tl := h.layout()
	h.s("<section id=\"timeline\">\n<h2>Timeline</h2>\n<div class=\"legend\">")
	for c := Class(0); c < numClasses; c++ {
		h.f("<span><i style=\"background:%s\"></i>%s</span>", c.Color(), c)
	}
	h.f("<span><i style=\"background:%s\"></i>window edge</span>", colorEdge)
	h.f("<span><i style=\"background:%s\"></i>quota came back</span>", colorRecovery)
	h.f("<span><i style=\"background:%s\"></i>finding</span></div>\n", colorFinding)
	h.f("<svg viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"requests by send time, one lane per client\">\n", svgWidth, tl.height)
	h.axis(tl.sc, tl.top, tl.bottom, true)
	h.marks(tl)
	h.laneLabels(tl)
	edgesDrawn := h.edges(tl, acc)
	h.recoveries(tl)
	h.moments(tl)
	h.s("</svg>\n")
	h.timelineCaption(tl, edgesDrawn)
	h.windowPanel(tl.sc, acc)
	h.latencyPanel(tl.sc)
	h.claimsPanel(tl.sc, acc)
}

// layout places the lanes and the scale of the timeline.
func (h *htmlWriter) layout() timeline {
	in, p := h.in, h.p
	var tl timeline
	seen := make([]bool, len(in.lanes))
	for i := range in.reqs {
		if l := in.reqs[i].lane; !seen[l] {
			seen[l] = true
			tl.order = append(tl.order, l)
		}
	}
	tl.rows = min(len(tl.order), maxLanes)
	tl.rowOf = make([]int, len(in.lanes))
	for i, l := range tl.order {
		tl.rowOf[l] = min(i, maxLanes-1)
	}
	binPx, laneH := 2, 16
	if tl.rows > 16 {
		binPx, laneH = 3, 10
	}
	tl.sc = newScale(p.first, p.lastSend, binPx)
	tl.laneH = laneH
	tl.top = 26
	tl.height = tl.top + tl.rows*(laneH+2) + 6
	tl.bottom = tl.height - 6
	return tl
}

// marks draws the requests: per lane and pixel column, counts per class,
// stacked; runs of columns holding one class are merged.
func (h *htmlWriter) marks(tl timeline) {
	in, sc := h.in, tl.sc
	counts := make([]int32, tl.rows*sc.bins*int(numClasses))
	for i := range in.reqs {
		q := &in.reqs[i]
		k := (tl.rowOf[q.lane]*sc.bins+sc.bin(q.t))*int(numClasses) + int(q.class)
		counts[k]++
	}
	var paths [numClasses]strings.Builder
	for r := 0; r < tl.rows; r++ {
		y0 := tl.top + r*(tl.laneH+2) + 1
		laneMarks(&paths, counts[r*sc.bins*int(numClasses):][:sc.bins*int(numClasses)], sc, y0, tl.laneH)
	}
	h.s("<g shape-rendering=\"crispEdges\">\n")
	for c := range paths {
		if paths[c].Len() > 0 {
			h.f("<path fill=\"%s\" d=\"%s\"><title>%s</title></path>\n", Class(c).Color(), paths[c].String(), Class(c))
		}
	}
	h.s("</g>\n")
}

// laneMarks adds one lane's marks to the class paths: counts holds, per
// column, the requests per class.
func laneMarks(paths *[numClasses]strings.Builder, counts []int32, sc scale, y0, laneH int) {
	run := struct {
		class      Class
		start, end int
	}{start: -1}
	flush := func() {
		if run.start >= 0 {
			w := (run.end - run.start + 1) * sc.binPx
			fmt.Fprintf(&paths[run.class], "M%d %dh%dv%dh-%dz", sc.binX(run.start), y0, w, laneH, w)
			run.start = -1
		}
	}
	for bn := 0; bn < sc.bins; bn++ {
		cs := counts[bn*int(numClasses):][:numClasses]
		total, only, kinds := int32(0), Class(0), 0
		for c, n := range cs {
			if n > 0 {
				total += n
				only = Class(c)
				kinds++
			}
		}
		switch {
		case total == 0:
			flush()
		case kinds == 1 && run.start >= 0 && run.class == only && run.end == bn-1:
			run.end = bn
		case kinds == 1:
			flush()
			run.class, run.start, run.end = only, bn, bn
		default:
			flush()
			y := y0
			for c, hh := range stackHeights(cs, laneH) {
				if hh > 0 {
					fmt.Fprintf(&paths[c], "M%d %dh%dv%dh-%dz", sc.binX(bn), y, sc.binPx, hh, sc.binPx)
					y += hh
				}
			}
		}
	}
	flush()
}

// laneLabels draws the lanes' backgrounds and labels.
func (h *htmlWriter) laneLabels(tl timeline) {
	in, p := h.in, h.p
	for r := 0; r < tl.rows; r++ {
		y0 := tl.top + r*(tl.laneH+2) + 1
		label := clientLabel(in.lanes[tl.order[r]])
		n := p.laneN[tl.order[r]]
		if r == maxLanes-1 && len(tl.order) > maxLanes {
			label = fmt.Sprintf("%d more clients", len(tl.order)-maxLanes+1)
			n = 0
			for _, l := range tl.order[maxLanes-1:] {
				n += p.laneN[l]
			}
		}
		h.f("<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f6f8fa\"/>", marginLeft, y0, tl.sc.bins*tl.sc.binPx, tl.laneH)
		h.f("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s<title>%s: %s</title></text>\n", marginLeft-6, y0+tl.laneH-3,
			esc(truncate(label, 22)), esc(label), esc(plural(n, "request")))
	}
}

// edges draws the window edges of a fixed window; false when they are too
// dense to draw.
func (h *htmlWriter) edges(tl timeline, acc map[uint32][]int64) bool {
	p := h.p
	edges, ok := h.in.windowEdges(p, acc, tl.sc.t0, tl.sc.t1, maxEdges)
	if len(edges) > 0 {
		var d strings.Builder
		for _, e := range edges {
			fmt.Fprintf(&d, "M%.1f %dV%d", tl.sc.x(e), tl.top, tl.bottom)
		}
		what := "declared"
		if p.edges.inferred {
			what = "inferred"
		}
		h.f("<path d=\"%s\" stroke=\"%s\" stroke-dasharray=\"3 3\" fill=\"none\"><title>%s window edges every %s (%s)</title></path>\n",
			d.String(), colorEdge, what, units.HumanDuration(p.edges.Window), esc(p.edges.align()))
	}
	return ok
}

// recoveries marks where quota was seen to come back, one triangle per
// column.
func (h *htmlWriter) recoveries(tl timeline) {
	recs := h.in.recoveries(h.p)
	if len(recs) == 0 {
		return
	}
	var d strings.Builder
	last := -1
	for _, t := range recs {
		if bn := tl.sc.bin(t); bn != last {
			last = bn
			fmt.Fprintf(&d, "M%.1f %dl-3 -6h6z", tl.sc.x(t), tl.top)
		}
	}
	h.f("<path d=\"%s\" fill=\"%s\"><title>%s: accepted, sent after a rejection had been answered</title></path>\n",
		d.String(), colorRecovery, plural(len(recs), "recovery"))
}

// moments marks each finding's interval, linked both ways with the list.
func (h *htmlWriter) moments(tl timeline) {
	fs := h.in.Findings()
	shifts := h.in.findingShifts()
	for i := range fs[:min(len(fs), maxMoments)] {
		f := &fs[i]
		if !hasMoment(f) {
			continue
		}
		x0, x1 := tl.sc.x(f.Evidence.StartNS+shifts[i]), tl.sc.x(f.Evidence.EndNS+shifts[i])
		x1 = math.Max(x1, x0+2)
		h.f("<a href=\"#finding-%d\" id=\"moment-%d\" class=\"moment\"><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"none\" stroke=\"%s\" stroke-dasharray=\"4 2\"/>",
			i+1, i+1, x0, tl.top, x1-x0, tl.bottom-tl.top, colorFinding)
		h.f("<circle cx=\"%.1f\" cy=\"%d\" r=\"7\" fill=\"%s\"/><text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#fff\" font-size=\"9\">%d</text><title>%s: %s</title></a>\n",
			x0, tl.top-14, colorFinding, x0, tl.top-11, i+1, esc(f.ID), esc(f.Message))
	}
}

// timelineCaption says what the timeline shows.
func (h *htmlWriter) timelineCaption(tl timeline, edgesDrawn bool) {
	in, p := h.in, h.p
	caption := fmt.Sprintf("%s sent from %s to %s after the start (answers until %s), %s", plural(len(in.reqs), "request"),
		fmtOffset(p.first), fmtOffset(p.lastSend), fmtOffset(p.last), plural(len(tl.order), "client"))
	if len(tl.order) > maxLanes {
		caption += fmt.Sprintf(" (the last lane gathers %d)", len(tl.order)-maxLanes+1)
	}
	if !edgesDrawn {
		caption += fmt.Sprintf("; window edges every %s not drawn (too dense)", units.HumanDuration(p.edges.Window))
	}
	if p.threshold > 0 {
		caption += "; delayed: accepted with latency ≥ " + units.HumanDuration(time.Duration(p.threshold))
	}
	h.f("<p class=\"caption\">%s. Each column stacks its requests by class.</p>\n</section>\n", esc(caption))
}

// findingShifts returns, per finding of Findings, the shift that puts its
// times on the Input's timeline.
func (in *Input) findingShifts() []int64 {
	var out []int64
	for _, v := range in.Verdicts {
		for range v.Report.Findings {
			out = append(out, v.shiftNS)
		}
	}
	return out
}

func hasMoment(f *verify.Finding) bool {
	return f.Evidence.StartNS != 0 || f.Evidence.EndNS != 0 || len(f.Evidence.Refs) > 0
}

// stackHeights shares height pixels among the classes in proportion to
// their counts, at least one pixel each (largest remainders).
func stackHeights(cs []int32, height int) [numClasses]int {
	var out [numClasses]int
	var total int32
	nonzero := 0
	for _, n := range cs {
		total += n
		if n > 0 {
			nonzero++
		}
	}
	left := height - nonzero
	rem := [numClasses]float64{}
	used := 0
	for c, n := range cs {
		if n == 0 {
			continue
		}
		share := float64(left) * float64(n) / float64(total)
		out[c] = 1 + int(share)
		rem[c] = share - math.Floor(share)
		used += out[c]
	}
	for used < height {
		best := -1
		for c := range cs {
			if cs[c] > 0 && (best < 0 || rem[c] > rem[best]) {
				best = c
			}
		}
		out[best]++
		rem[best] = -1
		used++
	}
	return out
}

// axis draws the time grid and labels between top and bottom.
func (h *htmlWriter) axis(sc scale, top, bottom int, labels bool) {
	step := niceStep(sc.t1 - sc.t0)
	var d strings.Builder
	var texts strings.Builder
	for t := (sc.t0/step + 1) * step; t <= sc.t1; t += step {
		if t < sc.t0 {
			continue
		}
		x := sc.x(t)
		fmt.Fprintf(&d, "M%.1f %dV%d", x, top, bottom)
		if labels {
			fmt.Fprintf(&texts, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#57606a\">%s</text>", x, top-4, esc(fmtTick(t)))
		}
	}
	h.f("<path d=\"%s\" stroke=\"#e1e4e8\" fill=\"none\"/>%s\n", d.String(), texts.String())
}

// niceStep returns a 1-2-5 step giving about eight ticks over span ns.
func niceStep(span int64) int64 {
	raw := float64(span) / 8
	e := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= raw {
			return max(int64(m*e), 1)
		}
	}
	return max(int64(10*e), 1)
}

// fmtTick labels a tick at t ns after the start.
func fmtTick(t int64) string {
	if t == 0 {
		return "0"
	}
	return units.HumanDuration(time.Duration(t))
}

// windowPanel draws the count judged against the limit.
func (h *htmlWriter) windowPanel(sc scale, acc map[uint32][]int64) {
	in, p := h.in, h.p
	s := in.trailingCounts(p, acc)
	h.s("<section id=\"window\">\n<h2>Accepted against the limit</h2>\n")
	if len(s.points) == 0 {
		h.s("<p class=\"caption\">No accepted request to count.</p>\n</section>\n")
		return
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
	const height, y0, y1 = 150, 12, 130
	y := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	h.f("<svg viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n", svgWidth, height, esc(s.label))
	h.axis(sc, y0, y1, false)
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
	h.f("<g shape-rendering=\"crispEdges\"><path fill=\"%s\" d=\"%s\"/>", colorCount, ok.String())
	if over.Len() > 0 {
		h.f("<path fill=\"%s\" d=\"%s\"><title>above the limit</title></path>", colorViolation, over.String())
	}
	h.s("</g>\n")
	h.f("<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#8c959f\"/>", marginLeft, marginLeft+sc.bins*sc.binPx, y1, y1)
	if s.limit == 0 || y(s.limit) < y1-10 {
		h.f("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", marginLeft-6, y1)
	}
	if s.limit > 0 {
		h.f("<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#1d1d1f\" stroke-dasharray=\"6 3\"/>", marginLeft, marginLeft+sc.bins*sc.binPx, y(s.limit), y(s.limit))
		h.f("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">limit %s</text>", marginLeft-6, y(s.limit)+4, units.HumanNumber(s.limit))
	}
	if peak := top / 1.1; s.limit == 0 || math.Abs(y(peak)-y(s.limit)) > 10 {
		h.f("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>", marginLeft-6, y(peak)+4, units.HumanNumber(peak))
	}
	h.s("\n")
	h.s("</svg>\n")
	caption := s.label + "."
	if s.limit > 0 {
		if s.violations > 0 {
			caption += fmt.Sprintf(" %s above the limit, the first at %s (drawn at send times; findings judge arrival bounds).",
				plural(s.violations, "accepted request"), fmtOffset(s.first))
		} else {
			caption += " Never above the limit at send times."
		}
	}
	h.f("<p class=\"caption\">%s</p>\n</section>\n", esc(caption))
}

// latencyPanel draws each column's fastest and slowest answer per class,
// on a log scale.
func (h *htmlWriter) latencyPanel(sc scale) {
	in, p := h.in, h.p
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := range in.reqs {
		if q := &in.reqs[i]; q.lat >= 0 && q.outcome == outResponse {
			lo, hi = min(lo, q.lat), max(hi, q.lat)
		}
	}
	h.s("<section id=\"latency\">\n<h2>Latency</h2>\n")
	if hi == 0 {
		h.s("<p class=\"caption\">No answer with a latency.</p>\n</section>\n")
		return
	}
	dlo := math.Floor(math.Log10(float64(max(lo, 1000))))
	dhi := math.Ceil(math.Log10(float64(max(hi, 1000)) * 1.01))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	const height, y0, y1 = 150, 10, 136
	y := func(ns int64) float64 {
		return y1 - (math.Log10(float64(max(ns, 1)))-dlo)/(dhi-dlo)*(y1-y0)
	}
	type mm struct{ lo, hi int64 }
	n := sc.bins * int(numClasses)
	cols := make([]mm, n)
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
	h.f("<svg viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"latency over time\">\n", svgWidth, height)
	h.axis(sc, y0, y1, false)
	for e := dlo; e <= dhi; e++ {
		yy := y(int64(math.Pow(10, e)))
		h.f("<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e1e4e8\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			marginLeft, marginLeft+sc.bins*sc.binPx, yy, yy, marginLeft-6, yy+4, esc(units.HumanDuration(time.Duration(math.Pow(10, e)))))
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
	h.s("<g shape-rendering=\"crispEdges\">")
	for c := range paths {
		if paths[c].Len() > 0 {
			h.f("<path fill=\"%s\" d=\"%s\"><title>%s</title></path>", Class(c).Color(), paths[c].String(), Class(c))
		}
	}
	h.s("</g>\n")
	if p.threshold > 0 {
		yy := y(p.threshold)
		h.f("<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"4 3\"><title>delayed from %s</title></line>\n",
			marginLeft, marginLeft+sc.bins*sc.binPx, yy, yy, Delayed.Color(), esc(units.HumanDuration(time.Duration(p.threshold))))
	}
	h.s("</svg>\n<p class=\"caption\">Fastest and slowest answer of each class per column (time to first byte after the request was written), log scale.</p>\n</section>\n")
}

// claimsPanel draws the waits advertised by rejections against the first
// acceptance observed after them.
func (h *htmlWriter) claimsPanel(sc scale, acc map[uint32][]int64) {
	cs := h.in.claims(h.p, acc)
	h.s("<section id=\"claims\">\n<h2>Retry-After and reset against recovery</h2>\n")
	if len(cs) == 0 {
		h.s("<p class=\"caption\">No rejection advertised a wait (Retry-After or a rate-limit reset).</p>\n</section>\n")
		return
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
	const height, y0, y1 = 150, 10, 136
	y := func(ns int64) float64 { return y1 - float64(ns)/float64(top)*(y1-y0) }
	h.f("<svg viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"advertised waits against observed recovery\">\n", svgWidth, height)
	h.axis(sc, y0, y1, false)
	step := niceStep(top)
	for v := int64(0); v <= top; v += step {
		h.f("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>", marginLeft-6, y(v)+4, esc(fmtTick(v)))
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
	h.f("<path d=\"%s\" stroke=\"#8c959f\" fill=\"none\"/>", links.String())
	if ra.Len() > 0 {
		h.f("<path d=\"%s\" fill=\"%s\"><title>Retry-After</title></path>", ra.String(), colorClaimRA)
	}
	if rst.Len() > 0 {
		h.f("<path d=\"%s\" fill=\"%s\"><title>rate-limit reset</title></path>", rst.String(), colorClaimRst)
	}
	h.f("<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"><title>first acceptance observed</title></path>\n</svg>\n", obs.String(), Accepted.Color())
	h.f("<div class=\"legend\"><span><i style=\"background:%s\"></i>Retry-After wait</span><span><i style=\"background:%s\"></i>reset wait</span><span><i style=\"background:%s\"></i>first acceptance seen after the rejection</span></div>\n",
		colorClaimRA, colorClaimRst, Accepted.Color())
	h.f("<p class=\"caption\">%s advertised a wait; for %d the first acceptance came more than 1s before it, for %d more than 1s after it (a client may simply not have asked earlier).</p>\n</section>\n",
		esc(plural(len(cs), "rejection")), late, early)
}

// summary writes the tables below the charts.
func (h *htmlWriter) summary() {
	in, p := h.in, h.p
	if len(in.Agents) == 0 {
		return
	}
	s := p.sum
	h.s("<section id=\"summary\">\n<h2>Requests</h2>\n<table><tr><th>outcome</th><th>status</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>\n")
	for _, r := range in.requestRows(p, true) {
		h.f("<tr><td>%s</td><td>%s</td>", esc(r[0]), esc(r[1]))
		for _, c := range r[2:] {
			h.f("<td class=\"n\">%s</td>", esc(c))
		}
		h.s("</tr>\n")
	}
	h.s("</table>\n")
	h.f("<p class=\"caption\">%s sent in %s (%s); %s delayed; pacing error p50 %s, p99 %s.</p>\n",
		esc(plural(s.Sent, "request")), esc(fmtSeconds(s.DurationS)), esc(units.HumanRate(s.SentPerS)), esc(plural(s.Delayed, "accepted request")),
		FormatMicros(s.Pacing.P50US), FormatMicros(s.Pacing.P99US))
	h.clientTable(s.Clients)
	h.s("<h2>Runs</h2>\n<table><tr><th>agent</th><th>file</th><th>start</th><th>results</th><th>end</th></tr>\n")
	for _, a := range in.Agents {
		end := "cut short"
		if a.End != nil {
			end = a.End.Reason
		}
		h.f("<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"n\">%d</td><td>%s</td></tr>\n", esc(a.Name), esc(a.File),
			esc(a.Header.Start.UTC().Format(time.RFC3339Nano)), a.Results, esc(end))
	}
	h.s("</table>\n")
	if len(in.Warnings) > 0 {
		h.s("<h2>Warnings</h2>\n<ul>\n")
		for _, w := range in.Warnings[:min(len(in.Warnings), 100)] {
			h.f("<li>%s</li>\n", esc(w))
		}
		h.s("</ul>\n")
	}
	h.s("</section>\n")
}

// clientTable writes the clients table when there are several.
func (h *htmlWriter) clientTable(clients []record.ClientSummary) {
	if len(clients) <= 1 {
		return
	}
	cs := topClients(clients, maxClientRow)
	h.f("<h2>Clients (%d)</h2>\n<table><tr><th>client</th><th>sent</th><th>accepted</th><th>delayed</th><th>rejected</th><th>other</th><th>errors</th><th>not-sent</th></tr>\n", len(clients))
	for _, c := range cs {
		h.f("<tr><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td></tr>\n",
			esc(clientLabel(c.Client)), c.Sent, c.Accepted, c.Delayed, c.Rejected, c.Other, c.Errors, c.NotSent)
	}
	h.s("</table>\n")
	if len(clients) > len(cs) {
		h.f("<p class=\"caption\">… and %d more clients.</p>\n", len(clients)-len(cs))
	}
}

// findings lists the stored verdicts, latest first, each with its policy
// and time and its findings, every finding linked to its moment on the
// timeline.
func (h *htmlWriter) findings() {
	in := h.in
	fs := in.Findings()
	h.f("<section id=\"findings\">\n<h2>Verdicts (%d) and findings (%d)</h2>\n", len(in.Verdicts), len(fs))
	if len(in.Verdicts) == 0 {
		h.s("<p class=\"caption\">No check or analyze document in the record files: run <code>rlprobe analyze FILE</code> with a policy to judge this run.</p>\n")
	}
	shifts := in.findingShifts()
	n := 0 // findings listed so far, across verdicts
	for i := range in.Verdicts {
		v := &in.Verdicts[i]
		r := verdictRow(v)
		h.f("<h3><span class=\"verdict v-%s\">%s</span>%s</h3><p class=\"meta\">policy: %s · %s</p>\n",
			esc(v.Report.Verdict), esc(r[0]), esc(r[1]), esc(r[2]), esc(r[3]))
		if len(v.Report.Findings) == 0 {
			continue
		}
		h.f("<ol start=\"%d\">\n", n+1)
		for j := range v.Report.Findings {
			if n < maxMoments {
				h.finding(&v.Report.Findings[j], n, shifts[n])
			}
			n++
		}
		h.s("</ol>\n")
	}
	if len(fs) > maxMoments {
		h.f("<p class=\"caption\">… and %d more findings (see the JSON report).</p>\n", len(fs)-maxMoments)
	}
	h.s("</section>\n")
}

// finding writes the i-th finding (0-based over every verdict) as a list
// item; shift puts its times on the timeline.
func (h *htmlWriter) finding(f *verify.Finding, i int, shift int64) {
	cls := ""
	if f.Certainty == verify.Possible {
		cls = " class=\"possible\""
	}
	sev, cert := string(f.Severity), string(f.Certainty)
	h.f("<li id=\"finding-%d\"%s><span class=\"sev sev-%s\">%s · %s</span> <b>%s</b>", i+1, cls, esc(sev), esc(sev), esc(cert), esc(f.ID))
	if where := whereOf(f); where != "" {
		h.f("<div class=\"where\">%s</div>", esc(strings.ReplaceAll(where, "\n", " · ")))
	}
	h.f("<div>%s</div>", esc(f.Message))
	if f.Hint != "" {
		h.f("<p class=\"hint\">%s</p>", esc(f.Hint))
	}
	e := &f.Evidence
	if hasMoment(f) && len(h.in.reqs) > 0 {
		h.f("<a href=\"#moment-%d\">at %s–%s</a>", i+1, fmtOffset(e.StartNS+shift), fmtOffset(e.EndNS+shift))
	}
	ev := fmt.Sprintf(" count %d", e.Count)
	if e.Bound != nil {
		ev += ", bound " + strconv.FormatInt(*e.Bound, 10)
	}
	h.s(esc(ev))
	if len(e.Refs) > 0 || len(e.Headers) > 0 {
		h.s("<details><summary>evidence</summary>")
		if len(e.Refs) > 0 {
			h.f("<div class=\"where\">refs: %s</div>", esc(strings.Join(e.Refs, " ")))
		}
		if len(e.Headers) > 0 {
			h.f("<pre>%s</pre>", esc(headersJSON(e.Headers)))
		}
		h.s("</details>")
	}
	h.s("</li>\n")
}

// model describes the inferred models.
func (h *htmlWriter) model() {
	infs := h.in.Inferences
	h.s("<section id=\"model\">\n<h2>Inferred model</h2>\n")
	if len(infs) == 0 {
		h.s("<p class=\"caption\">No infer document in the record files.</p>\n")
	}
	for _, inf := range infs {
		h.f("<h3>%s</h3><p class=\"caption\">confidence %s · %s in %s</p>\n", esc(string(inf.Algorithm)), units.HumanNumber(inf.Reproduced),
			esc(plural(inf.Requests, "request")), esc(fmtSeconds(inf.DurationS)))
		if inf.Note != "" {
			h.f("<p class=\"caption\">%s</p>\n", esc(inf.Note))
		}
		rows := estimateRows(inf)
		if len(rows) > 0 {
			h.s("<table><tr><th>parameter</th><th>value</th><th>interval</th></tr>\n")
			for _, r := range rows {
				h.f("<tr><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n", esc(r[0]), esc(r[1]), esc(r[2]))
			}
			h.s("</table>\n")
		}
		if len(inf.Alternatives) > 0 {
			h.s("<table><tr><th>alternative</th><th>confidence</th><th>ruled out by</th></tr>\n")
			for _, a := range inf.Alternatives {
				h.f("<tr><td>%s</td><td class=\"n\">%s</td><td>%s</td></tr>\n", esc(string(a.Algorithm)), units.HumanNumber(a.Reproduced), esc(a.RuledOutBy))
			}
			h.s("</table>\n")
		}
	}
	h.s("</section>\n")
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
