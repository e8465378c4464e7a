package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// html.tmpl is the page: its markup, its stylesheet and the drawing of
// the SVG panels whose geometry svg.go computes. Every text reaches it
// through html/template, which escapes it for where it lands (text,
// attribute, URL fragment): nothing from the record files, which a remote
// server partly wrote, is pasted into markup by hand.
//
//go:embed html.tmpl
var htmlTemplateText string

var htmlTemplate = template.Must(template.New("html.tmpl").Parse(htmlTemplateText))

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
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, in.htmlPage()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// htmlPage is what html.tmpl draws: plain data, every text unescaped.
type htmlPage struct {
	Verdict      string // the latest verdict ("pass", "fail", …), for its CSS class
	VerdictWord  string
	VerdictLine  string
	Targets      string
	Meta         string
	Charts       *charts // nil without requests
	Summary      *htmlSummary
	Verdicts     []htmlVerdict
	Findings     int // findings of every verdict
	MoreFindings int // findings beyond maxMoments, not listed
	Models       []htmlModel
}

type htmlSummary struct {
	Requests    [][]string // outcome, status, then the numbers
	Caption     string
	Clients     int // clients in all; the table only when several
	ClientRows  []htmlClient
	MoreClients int
	Runs        []htmlRun
	Warnings    []string
}

type htmlClient struct {
	Label string
	record.ClientSummary
}

type htmlRun struct {
	Agent, File, Start string
	Results            int
	End                string
}

type htmlVerdict struct {
	Verdict                   string // for its CSS class
	Word, Time, Policy, Found string
	Start                     int // number of its first finding
	Listed                    []htmlFinding
}

type htmlFinding struct {
	N                       int // 1-based over every verdict
	Possible                bool
	Severity, Certainty, ID string
	Where, Message, Hint    string
	Moment                  bool // linked to its moment on the timeline
	From, To                string
	Evidence                string // count and bound
	Refs, Headers           string
}

type htmlModel struct {
	Algorithm, Fit, Reproduced, Requests, Duration, Note string
	Estimates                                            [][3]string
	Alternatives                                         [][3]string
}

// htmlPage gathers the page's data; the charts come from drawCharts.
func (in *Input) htmlPage() *htmlPage {
	p := in.prepare()
	pg := &htmlPage{Verdict: in.Verdict(), VerdictWord: in.VerdictWord(), VerdictLine: in.VerdictLine(),
		Targets: strings.Join(in.Targets(), ", ")}
	meta := "record files: " + strings.Join(in.Files, ", ")
	if !in.Start.IsZero() {
		meta += " · start " + in.Start.UTC().Format(time.RFC3339Nano)
	}
	if p.rule != nil {
		meta += " · limit " + p.rule.describe()
	}
	pg.Meta = meta + " · " + in.tool()
	if len(in.reqs) > 0 {
		pg.Charts = drawCharts(in, p)
	}
	if len(in.Agents) > 0 {
		pg.Summary = in.htmlSummary(p)
	}
	pg.Findings = len(in.Findings())
	pg.MoreFindings = max(pg.Findings-maxMoments, 0)
	in.htmlVerdicts(pg)
	for _, inf := range in.Inferences {
		m := htmlModel{Algorithm: FamilyName(inf), Fit: string(inf.Fit), Reproduced: units.HumanNumber(inf.Reproduced),
			Requests: units.Count(inf.Requests, "request"), Duration: fmtSeconds(inf.DurationS), Note: inf.Note,
			Estimates: estimateRows(inf)}
		for _, a := range inf.Alternatives {
			m.Alternatives = append(m.Alternatives, [3]string{string(a.Algorithm), units.HumanNumber(a.Reproduced), a.RuledOutBy})
		}
		pg.Models = append(pg.Models, m)
	}
	return pg
}

// htmlSummary is the tables below the charts.
func (in *Input) htmlSummary(p *prepared) *htmlSummary {
	s := p.sum
	out := &htmlSummary{Requests: in.requestRows(p, true), Clients: len(s.Clients)}
	out.Caption = fmt.Sprintf("%s sent in %s (%s); %s delayed; pacing error p50 %s, p99 %s.",
		units.Count(s.Sent, "request"), fmtSeconds(s.DurationS), units.HumanRate(s.SentPerS), units.Count(s.Delayed, "accepted request"),
		FormatMicros(s.Pacing.P50US), FormatMicros(s.Pacing.P99US))
	if len(s.Clients) > 1 {
		cs := topClients(s.Clients, maxClientRow)
		for _, c := range cs {
			out.ClientRows = append(out.ClientRows, htmlClient{clientLabel(c.Client), c})
		}
		out.MoreClients = len(s.Clients) - len(cs)
	}
	for _, a := range in.Agents {
		end := "cut short"
		if a.End != nil {
			end = a.End.Reason
		}
		out.Runs = append(out.Runs, htmlRun{Agent: a.Name, File: a.File, Start: a.Header.Start.UTC().Format(time.RFC3339Nano),
			Results: a.Results, End: end})
	}
	out.Warnings = in.Warnings[:min(len(in.Warnings), 100)]
	return out
}

// htmlVerdicts lists the stored verdicts, latest first, each with its
// findings (at most maxMoments over all), every finding linked to its
// moment on the timeline.
func (in *Input) htmlVerdicts(pg *htmlPage) {
	shifts := in.findingShifts()
	n := 0 // findings so far, across verdicts
	for i := range in.Verdicts {
		v := &in.Verdicts[i]
		r := verdictRow(v)
		hv := htmlVerdict{Verdict: v.Report.Verdict, Word: r[0], Time: r[1], Policy: r[2], Found: r[3], Start: n + 1}
		for j := range v.Report.Findings {
			if n < maxMoments {
				hv.Listed = append(hv.Listed, in.htmlFinding(&v.Report.Findings[j], n, shifts[n]))
			}
			n++
		}
		pg.Verdicts = append(pg.Verdicts, hv)
	}
}

// htmlFinding is the i-th finding (0-based over every verdict); shift puts
// its times on the timeline.
func (in *Input) htmlFinding(f *verify.Finding, i int, shift int64) htmlFinding {
	e := &f.Evidence
	out := htmlFinding{N: i + 1, Possible: f.Certainty == verify.Possible,
		Severity: string(f.Severity), Certainty: string(f.Certainty), ID: f.ID,
		Where: strings.ReplaceAll(whereOf(f), "\n", " · "), Message: f.Message, Hint: f.Hint,
		Moment: hasMoment(f) && len(in.reqs) > 0, From: fmtOffset(e.StartNS + shift), To: fmtOffset(e.EndNS + shift),
		Evidence: fmt.Sprintf(" count %d", e.Count), Refs: strings.Join(e.Refs, " ")}
	if e.Bound != nil {
		out.Evidence += ", bound " + strconv.FormatInt(*e.Bound, 10)
	}
	if len(e.Headers) > 0 {
		out.Headers = headersJSON(e.Headers)
	}
	return out
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

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
