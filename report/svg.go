package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// The geometry of the HTML report's SVG panels, in one place: drawCharts
// turns an Input into plain structs (coordinates, path data, colours and
// the words beside them) that html.tmpl draws without computing anything.
// Nothing here writes markup or escapes text: the template engine does.

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
	colorGrid      = "#e1e4e8" // time grid and decade lines
	colorLabel     = "#57606a" // time labels
	colorLink      = "#8c959f" // baselines, claim-to-recovery links
	colorLane      = "#f6f8fa" // lane backgrounds
	colorLimit     = "#1d1d1f" // the limit line
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
	panelHeight  = 150 // height of the panels below the timeline
)

// px is an SVG coordinate; it prints with at most one decimal.
type px float64

func (v px) String() string {
	r := math.Round(float64(v)*10) / 10
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// The shapes the template draws. Empty strings leave an attribute out.
type (
	shape struct { // a <path>
		D, Fill, Stroke, Dash, Width, Title string
	}
	line struct {
		X1, X2, Y1, Y2      px
		Stroke, Dash, Title string
	}
	rect struct {
		X, Y, W, H         px
		Fill, Stroke, Dash string
	}
	label struct { // a <text>
		X, Y                     px
		Anchor, Fill, Size, Text string
		Title                    string
	}
	swatch struct{ Color, Label string }
	// axis is a panel's time grid, with its tick labels on the timeline.
	axis struct {
		Grid   shape
		Labels []label
	}
)

// charts are the four SVG panels, sharing one time axis.
type charts struct {
	Width    int
	Timeline timelinePanel
	Window   windowPanel
	Latency  latencyPanel
	Claims   claimsPanel
}

// timelinePanel shows every request at its send time, one lane per client.
type timelinePanel struct {
	Height     int
	Legend     []swatch
	Axis       axis
	Marks      []shape // requests, one path per class
	Lanes      []lane
	Edges      *shape // window edges
	Recoveries *shape // where quota came back
	Moments    []moment
	Caption    string
}

// lane is one client's row of the timeline: its background, drawn
// beneath the marks, and its label.
type lane struct {
	Back  rect
	Label label
}

// moment is a finding's interval on the timeline, linked to the list.
type moment struct {
	N      int // 1-based over every verdict's findings
	Box    rect
	CX, CY px // the numbered disc
	Color  string
	Num    label
	Title  string
}

// windowPanel shows the count judged against the limit (Label says
// which); Drawn is false when there is nothing to count.
type windowPanel struct {
	Drawn   bool
	Label   string
	Height  int
	Axis    axis
	Bars    []shape
	Lines   []line
	Labels  []label
	Caption string
}

// latencyPanel shows each column's fastest and slowest answer per class;
// Drawn is false without any latency.
type latencyPanel struct {
	Drawn     bool
	Height    int
	Axis      axis
	Grid      []line
	Labels    []label
	Marks     []shape
	Threshold *line
}

// claimsPanel shows advertised waits against the recovery observed; Drawn
// is false when no rejection advertised a wait.
type claimsPanel struct {
	Drawn   bool
	Height  int
	Axis    axis
	Labels  []label
	Paths   []shape
	Legend  []swatch
	Caption string
}

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

// right is the plot's right edge.
func (s scale) right() px { return px(marginLeft + s.bins*s.binPx) }

// drawCharts computes every panel of a run with requests.
func drawCharts(in *Input, p *prepared) *charts {
	acc := in.acceptedByGroup(p)
	tl, sc := drawTimeline(in, p, acc)
	return &charts{
		Width:    svgWidth,
		Timeline: tl,
		Window:   drawWindow(in, p, sc, acc),
		Latency:  drawLatency(in, p, sc),
		Claims:   drawClaims(in, p, sc, acc),
	}
}

// lanes is the layout of the timeline: one lane per client in order of
// its first request (at most maxLanes; further clients share the last),
// over pixel-column bins.
type lanes struct {
	sc          scale
	order       []uint32 // lanes in order of their first request
	rowOf       []int    // lane → row
	rows        int
	laneH       int
	top, bottom int
	height      int
}

// y0 is row r's top.
func (l *lanes) y0(r int) int { return l.top + r*(l.laneH+2) + 1 }

// layout places the lanes and the scale of the timeline.
func layout(in *Input, p *prepared) lanes {
	var tl lanes
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

// drawTimeline lays out the timeline panel and returns its scale, which
// the other panels share.
func drawTimeline(in *Input, p *prepared, acc map[uint32][]int64) (timelinePanel, scale) {
	tl := layout(in, p)
	out := timelinePanel{Height: tl.height, Axis: timeAxis(tl.sc, tl.top, tl.bottom, true)}
	for c := Class(0); c < numClasses; c++ {
		out.Legend = append(out.Legend, swatch{c.Color(), c.String()})
	}
	out.Legend = append(out.Legend, swatch{colorEdge, "window edge"}, swatch{colorRecovery, "quota came back"}, swatch{colorFinding, "finding"})
	out.Marks = marks(in, tl)
	for r := 0; r < tl.rows; r++ {
		y0 := tl.y0(r)
		name := clientLabel(in.lanes[tl.order[r]])
		n := p.laneN[tl.order[r]]
		if r == maxLanes-1 && len(tl.order) > maxLanes {
			name = fmt.Sprintf("%d more clients", len(tl.order)-maxLanes+1)
			n = 0
			for _, l := range tl.order[maxLanes-1:] {
				n += p.laneN[l]
			}
		}
		out.Lanes = append(out.Lanes, lane{
			Back: rect{X: marginLeft, Y: px(y0), W: px(tl.sc.bins * tl.sc.binPx), H: px(tl.laneH), Fill: colorLane},
			Label: label{X: marginLeft - 6, Y: px(y0 + tl.laneH - 3), Anchor: "end",
				Text: truncate(name, 22), Title: name + ": " + units.Count(n, "request")},
		})
	}
	edges, edgesDrawn := in.windowEdges(p, acc, tl.sc.t0, tl.sc.t1, maxEdges)
	if len(edges) > 0 {
		var d strings.Builder
		for _, e := range edges {
			fmt.Fprintf(&d, "M%.1f %dV%d", tl.sc.x(e), tl.top, tl.bottom)
		}
		what := "declared"
		if p.edges.inferred {
			what = "inferred"
		}
		out.Edges = &shape{D: d.String(), Stroke: colorEdge, Dash: "3 3", Fill: "none",
			Title: fmt.Sprintf("%s window edges every %s (%s)", what, units.HumanDuration(p.edges.Window), p.edges.align())}
	}
	if recs := in.recoveries(p); len(recs) > 0 {
		var d strings.Builder
		last := -1
		for _, t := range recs {
			if bn := tl.sc.bin(t); bn != last {
				last = bn
				fmt.Fprintf(&d, "M%.1f %dl-3 -6h6z", tl.sc.x(t), tl.top)
			}
		}
		out.Recoveries = &shape{D: d.String(), Fill: colorRecovery,
			Title: units.Count(len(recs), "recovery") + ": accepted, sent after a rejection had been answered"}
	}
	out.Moments = moments(in, tl)
	out.Caption = timelineCaption(in, p, tl, edgesDrawn)
	return out, tl.sc
}

// marks draws the requests: per lane and pixel column, counts per class,
// stacked; runs of columns holding one class are merged.
func marks(in *Input, tl lanes) []shape {
	sc := tl.sc
	counts := make([]int32, tl.rows*sc.bins*int(numClasses))
	for i := range in.reqs {
		q := &in.reqs[i]
		k := (tl.rowOf[q.lane]*sc.bins+sc.bin(q.t))*int(numClasses) + int(q.class)
		counts[k]++
	}
	var paths [numClasses]strings.Builder
	for r := 0; r < tl.rows; r++ {
		laneMarks(&paths, counts[r*sc.bins*int(numClasses):][:sc.bins*int(numClasses)], sc, tl.y0(r), tl.laneH)
	}
	return classShapes(&paths)
}

// classShapes returns the non-empty class paths, filled with the class's
// colour and titled with its name.
func classShapes(paths *[numClasses]strings.Builder) []shape {
	var out []shape
	for c := range paths {
		if paths[c].Len() > 0 {
			out = append(out, shape{D: paths[c].String(), Fill: Class(c).Color(), Title: Class(c).String()})
		}
	}
	return out
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

// moments marks each finding's interval, linked both ways with the list.
func moments(in *Input, tl lanes) []moment {
	var out []moment
	fs := in.Findings()
	shifts := in.findingShifts()
	for i := range fs[:min(len(fs), maxMoments)] {
		f := &fs[i]
		if !hasMoment(f) {
			continue
		}
		x0, x1 := tl.sc.x(f.Evidence.StartNS+shifts[i]), tl.sc.x(f.Evidence.EndNS+shifts[i])
		x1 = math.Max(x1, x0+2)
		out = append(out, moment{N: i + 1,
			Box: rect{X: px(x0), Y: px(tl.top), W: px(x1 - x0), H: px(tl.bottom - tl.top), Fill: "none", Stroke: colorFinding, Dash: "4 2"},
			CX:  px(x0), CY: px(tl.top - 14), Color: colorFinding,
			Num:   label{X: px(x0), Y: px(tl.top - 11), Anchor: "middle", Fill: "#fff", Size: "9", Text: strconv.Itoa(i + 1)},
			Title: f.ID + ": " + f.Message,
		})
	}
	return out
}

// timelineCaption says what the timeline shows.
func timelineCaption(in *Input, p *prepared, tl lanes, edgesDrawn bool) string {
	caption := fmt.Sprintf("%s sent from %s to %s after the start (answers until %s), %s", units.Count(len(in.reqs), "request"),
		fmtOffset(p.first), fmtOffset(p.lastSend), fmtOffset(p.last), units.Count(len(tl.order), "client"))
	if len(tl.order) > maxLanes {
		caption += fmt.Sprintf(" (the last lane gathers %d)", len(tl.order)-maxLanes+1)
	}
	if !edgesDrawn {
		caption += fmt.Sprintf("; window edges every %s not drawn (too dense)", units.HumanDuration(p.edges.Window))
	}
	if p.threshold > 0 {
		caption += "; delayed: accepted with latency ≥ " + units.HumanDuration(time.Duration(p.threshold))
	}
	return caption + ". Each column stacks its requests by class."
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

// timeAxis is the time grid between top and bottom, with tick labels
// above it when labels is set.
func timeAxis(sc scale, top, bottom int, labels bool) axis {
	step := niceStep(sc.t1 - sc.t0)
	var d strings.Builder
	var a axis
	for t := (sc.t0/step + 1) * step; t <= sc.t1; t += step {
		if t < sc.t0 {
			continue
		}
		x := sc.x(t)
		fmt.Fprintf(&d, "M%.1f %dV%d", x, top, bottom)
		if labels {
			a.Labels = append(a.Labels, label{X: px(x), Y: px(top - 4), Anchor: "middle", Fill: colorLabel, Text: fmtTick(t)})
		}
	}
	a.Grid = shape{D: d.String(), Stroke: colorGrid, Fill: "none"}
	return a
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

// yLabel is a value's label left of a panel's plot.
func yLabel(y float64, text string) label {
	return label{X: marginLeft - 6, Y: px(y), Anchor: "end", Text: text}
}
