package report

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// TableOptions configure Table. The zero value fits 100 columns, without
// colour.
type TableOptions struct {
	// Width is the terminal width in columns to fit; 0 means 100, and
	// less than 60 is taken as 60.
	Width int
	// Color adds ANSI colours (the caller decides: a terminal, --color,
	// NO_COLOR).
	Color bool
	// MaxRows bounds the rows of the findings and clients tables, the
	// rest counted in a last line; 0 means 50.
	MaxRows int
}

// ANSI colour codes.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
	ansiDim    = "\x1b[2m"
)

// Table writes the terminal report: the one-line verdict first, then the
// stored verdicts (latest first, each with its policy and time) and their
// findings, the requests by outcome and status with latencies, the
// clients, the inferred model, and the files and warnings — tables fitted
// to opt.Width, long cells wrapped.
func Table(w io.Writer, in *Input, opt TableOptions) error {
	t := &tableWriter{in: in, p: in.prepare(), width: max(cmp.Or(opt.Width, 100), 60),
		maxRows: opt.MaxRows, color: opt.Color}
	if t.maxRows <= 0 {
		t.maxRows = 50
	}
	code := map[string]string{verify.VerdictPass: ansiBold + ansiGreen, verify.VerdictFail: ansiBold + ansiRed,
		verify.VerdictIncomplete: ansiBold + ansiYellow}[in.Verdict()]
	t.para(t.paint(code, in.VerdictWord()+":")+" "+in.VerdictLine(), len(t.paint(code, "")))
	t.verdicts()
	t.requests()
	t.clients()
	t.inferences()
	t.b.WriteString("\n")
	t.para("record files: "+strings.Join(in.Files, ", "), 0)
	for _, wmsg := range in.Warnings {
		t.para(t.paint(ansiYellow, "warning:")+" "+wmsg, len(t.paint(ansiYellow, "")))
	}
	if _, err := w.Write(t.b.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// tableWriter accumulates the terminal report.
type tableWriter struct {
	b       bytes.Buffer
	in      *Input
	p       *prepared
	width   int
	maxRows int
	color   bool
}

// paint wraps s in an ANSI colour when colour is on.
func (t *tableWriter) paint(code, s string) string {
	if !t.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// para writes a paragraph wrapped to the width; invisible is the length
// of the ANSI codes it holds.
func (t *tableWriter) para(s string, invisible int) {
	t.b.WriteString(wrap(s, t.width, -invisible))
	t.b.WriteString("\n")
}

// verdicts lists the stored verdicts, latest first, then each one's
// findings under its own heading.
func (t *tableWriter) verdicts() {
	in := t.in
	if len(in.Verdicts) == 0 {
		return
	}
	fmt.Fprintf(&t.b, "\nVerdicts (%d, latest first)\n", len(in.Verdicts))
	var rows [][]string
	need := 0
	for i := range in.Verdicts {
		r := verdictRow(&in.Verdicts[i])
		rows = append(rows, r)
		need = max(need, 10+22+utf8.RuneCountInString(r[2])+2+20)
	}
	if need <= t.width {
		renderFitted(&t.b, []string{"verdict", "time", "policy", "found"}, rows, t.width, 3, "llll", nil)
	} else {
		for i, r := range rows {
			rows[i] = []string{r[0] + "\n" + r[1], r[2] + "\n" + r[3]}
		}
		renderFitted(&t.b, []string{"verdict", "policy and findings"}, rows, t.width, 1, "ll", nil)
	}
	for i := range in.Verdicts {
		fs := in.Verdicts[i].Report.Findings
		if len(fs) == 0 {
			continue
		}
		title := fmt.Sprintf("Findings (%d)", len(fs))
		if len(in.Verdicts) > 1 {
			title = fmt.Sprintf("Findings of %s (%d)", in.verdictTitle(i), len(fs))
		}
		t.b.WriteString("\n")
		t.para(title, 0)
		t.findings(fs)
	}
}

// findings writes one verdict's findings: four columns, or two on a
// narrow terminal.
func (t *tableWriter) findings(fs []verify.Finding) {
	shown := fs[:min(len(fs), t.maxRows)]
	sevCode := map[verify.Severity]string{verify.SeverityError: ansiRed, verify.SeverityWarning: ansiYellow, verify.SeverityInfo: ansiCyan}
	certainty := func(c string) string {
		if c == string(verify.Possible) {
			return t.paint(ansiDim, c)
		}
		return c
	}
	wide := 8 + 2 + 11 + 2 + 24 + 2
	for i := range shown {
		wide = max(wide, 8+2+len(shown[i].ID)+2+maxLineLen(whereOf(&shown[i]))+2+24)
	}
	var rows [][]string
	if wide <= t.width {
		for i := range shown {
			f := &shown[i]
			rows = append(rows, []string{string(f.Severity) + "\n" + string(f.Certainty), f.ID, whereOf(f), messageOf(f)})
		}
		renderFitted(&t.b, []string{"severity", "finding", "where", "message"}, rows, t.width, 3, "llll", func(row []string) []string {
			sev, cert, _ := strings.Cut(row[0], "\n")
			row[0] = t.paint(sevCode[verify.Severity(sev)], sev) + "\n" + certainty(cert)
			return row
		})
	} else {
		for i := range shown {
			f := &shown[i]
			rows = append(rows, []string{string(f.Severity) + " " + string(f.Certainty) + "\n" + f.ID + "\n" + whereOf(f), messageOf(f)})
		}
		renderFitted(&t.b, []string{"finding", "message"}, rows, t.width, 1, "ll", func(row []string) []string {
			first, rest, _ := strings.Cut(row[0], "\n")
			sev, cert, _ := strings.Cut(first, " ")
			row[0] = t.paint(sevCode[verify.Severity(sev)], sev) + " " + certainty(cert) + "\n" + rest
			return row
		})
	}
	if len(fs) > t.maxRows {
		fmt.Fprintf(&t.b, "… and %d more findings\n", len(fs)-t.maxRows)
	}
}

// requests writes the requests by outcome and status.
func (t *tableWriter) requests() {
	in, p := t.in, t.p
	if len(in.Agents) == 0 {
		return
	}
	s := p.sum
	title := "Requests"
	if p.rule != nil {
		title += " (limit: " + p.rule.describe() + ")"
	}
	t.b.WriteString("\n")
	t.para(title, 0)
	renderFitted(&t.b, []string{"outcome", "status", "count", "p50", "p90", "p99", "max"}, in.requestRows(p, true), t.width, -1, "llrrrrr", nil)
	if s.Delayed > 0 {
		t.para(fmt.Sprintf("%d of the accepted requests were delayed (latency ≥ %s)", s.Delayed,
			FormatMicros(int64(s.DelayedThresholdMS*1000))), 0)
	}
	t.para(fmt.Sprintf("%s sent in %s (%s); pacing error p50 %s, p99 %s", units.Count(s.Sent, "request"),
		fmtSeconds(s.DurationS), units.HumanRate(s.SentPerS), FormatMicros(s.Pacing.P50US), FormatMicros(s.Pacing.P99US)), 0)
}

// requestRows lists the requests by outcome and status: outcome, status,
// count, then the latency percentiles (p50, p90, p99, max; without p90
// unless all).
func (in *Input) requestRows(p *prepared, all bool) [][]string {
	s := &p.sum
	var rows [][]string
	for _, st := range sortedStatuses(s.Statuses) {
		d := s.Latency[st]
		row := []string{p.statusClass(st), st, strconv.Itoa(s.Statuses[st]), FormatMicros(d.P50US)}
		if all {
			row = append(row, FormatMicros(d.P90US))
		}
		rows = append(rows, append(row, FormatMicros(d.P99US), FormatMicros(d.MaxUS)))
	}
	blank := []string{"", "", "", ""}
	if !all {
		blank = blank[:3]
	}
	for _, k := range sortedKeys(s.ErrorClasses) {
		rows = append(rows, append([]string{"error", k, strconv.Itoa(s.ErrorClasses[k])}, blank...))
	}
	for _, k := range sortedKeys(s.NotSentReasons) {
		rows = append(rows, append([]string{"not-sent", k, strconv.Itoa(s.NotSentReasons[k])}, blank...))
	}
	return rows
}

// clients writes the clients table when there are several.
func (t *tableWriter) clients() {
	s := t.p.sum
	if len(s.Clients) <= 1 {
		return
	}
	fmt.Fprintf(&t.b, "\nClients (%d)\n", len(s.Clients))
	cs := topClients(s.Clients, t.maxRows)
	header, rows := clientColumns(cs, t.width)
	renderFitted(&t.b, header, rows, t.width, 0, "lrrrrrrr", nil)
	if len(s.Clients) > len(cs) {
		fmt.Fprintf(&t.b, "… and %d more clients\n", len(s.Clients)-len(cs))
	}
}

// inferences writes each inferred model with its parameters and
// alternatives.
func (t *tableWriter) inferences() {
	for _, inf := range t.in.Inferences {
		t.b.WriteString("\n")
		t.para(fmt.Sprintf("Inferred: %s (fit %s, reproduced %s, %s in %s)", t.paint(ansiBold, FamilyName(inf)), inf.Fit,
			units.HumanNumber(inf.Reproduced), units.Count(inf.Requests, "request"), fmtSeconds(inf.DurationS)), len(t.paint(ansiBold, "")))
		var rows [][]string
		for _, r := range estimateRows(inf) {
			rows = append(rows, r[:])
		}
		if len(rows) > 0 {
			renderFitted(&t.b, []string{"parameter", "value", "interval"}, rows, t.width, 1, "lll", nil)
		}
		if len(inf.Alternatives) > 0 {
			rows = rows[:0]
			for _, a := range inf.Alternatives {
				rows = append(rows, []string{string(a.Algorithm), units.HumanNumber(a.Reproduced), a.RuledOutBy})
			}
			renderFitted(&t.b, []string{"alternative", "reproduced", "ruled out by"}, rows, t.width, 2, "lrl", nil)
		}
		if inf.Note != "" {
			t.para(inf.Note, 0)
		}
		if !inf.Complete {
			t.para("the experiments did not finish: the result may be ambiguous", 0)
		}
	}
}

// whereOf is a finding's check, endpoint and client, one a line.
func whereOf(f *verify.Finding) string {
	var where []string
	for _, s := range []string{f.Check, f.Endpoint, f.Client} {
		if s != "" {
			where = append(where, s)
		}
	}
	return strings.Join(where, "\n")
}

// messageOf is a finding's message with its hint.
func messageOf(f *verify.Finding) string {
	if f.Hint != "" {
		return f.Message + "\n→ " + f.Hint
	}
	return f.Message
}

func maxLineLen(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

// clientColumns lays out the clients table: columns that are zero for
// every client are left out, and headers are abbreviated when the full
// ones do not fit.
func clientColumns(cs []record.ClientSummary, width int) ([]string, [][]string) {
	long := []string{"client", "sent", "accepted", "delayed", "rejected", "other", "errors", "not-sent"}
	short := []string{"client", "sent", "acc", "delay", "rej", "other", "err", "unsent"}
	vals := func(c record.ClientSummary) []int {
		return []int{c.Sent, c.Accepted, c.Delayed, c.Rejected, c.Other, c.Errors, c.NotSent}
	}
	keep := []int{0, 1, 2, 4} // client, sent, accepted, rejected always
	for _, col := range []int{3, 5, 6, 7} {
		for _, c := range cs {
			if vals(c)[col-1] != 0 {
				keep = append(keep, col)
				break
			}
		}
	}
	slices.Sort(keep)
	need := 0
	for _, col := range keep {
		cw := len(long[col])
		if col == 0 {
			for _, c := range cs {
				cw = max(cw, utf8.RuneCountInString(clientLabel(c.Client)))
			}
		}
		need += cw + 2
	}
	names := long
	if need > width {
		names = short
	}
	var header []string
	for _, col := range keep {
		header = append(header, names[col])
	}
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		v := vals(c)
		row := []string{truncate(clientLabel(c.Client), max(width/3, 12))}
		for _, col := range keep[1:] {
			row = append(row, strconv.Itoa(v[col-1]))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// statusClass names the outcome class of a status code (as a string) by
// record.Classify under the declared reject statuses.
func (p *prepared) statusClass(status string) string {
	code, _ := strconv.Atoi(status)
	q := request{outcome: outResponse, status: int16(code)}
	return (&Input{}).classOf(&q, p.declared).String()
}

func clientLabel(c string) string {
	if c == "" {
		return "(none)"
	}
	return c
}

// topClients returns at most n clients, those with the most requests,
// ties in their order.
func topClients(cs []record.ClientSummary, n int) []record.ClientSummary {
	if len(cs) <= n {
		return cs
	}
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b record.ClientSummary) int { return (b.Sent + b.NotSent) - (a.Sent + a.NotSent) })
	return out[:n]
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sortedStatuses orders status codes numerically.
func sortedStatuses(m map[string]int) []string {
	keys := sortedKeys(m)
	slices.SortFunc(keys, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return keys
}

// renderFitted writes a borderless table fitted to width: the column
// flexCol (−1: none) is word-wrapped into what the others leave; align
// has one letter per column, l (left) or r (right). style, when not nil,
// may decorate a row after its widths are measured (ANSI codes are not
// counted by the table).
func renderFitted(w io.Writer, header []string, rows [][]string, width, flexCol int, align string, style func([]string) []string) {
	const gap = 2 // padding between columns
	if flexCol >= 0 {
		others := 0
		for c := range header {
			if c == flexCol {
				continue
			}
			cw := utf8.RuneCountInString(header[c])
			for _, r := range rows {
				for _, line := range strings.Split(r[c], "\n") {
					cw = max(cw, utf8.RuneCountInString(line))
				}
			}
			others += cw + gap
		}
		flex := max(width-others-gap, 20)
		for _, r := range rows {
			r[flexCol] = strings.TrimRight(wrapCell(r[flexCol], flex), "\n")
		}
	}
	upper := make([]string, len(header))
	for i, h := range header {
		upper[i] = strings.ToUpper(h)
	}
	if style != nil {
		styled := make([][]string, len(rows))
		for i, r := range rows {
			styled[i] = style(slices.Clone(r))
		}
		rows = styled
	}
	WriteTable(w, upper, rows, align)
}

// WriteTable writes rows under header as a borderless table, the way every
// table of this package is drawn: no rules, columns two spaces apart, no
// padding at the start or end of a line. align has one letter per column,
// 'r' for right-aligned; any other letter, or none, aligns left. Cells are
// not wrapped (a cell's own line breaks are kept) and the header is
// written as given. ANSI colour codes in cells take no width.
func WriteTable(w io.Writer, header []string, rows [][]string, align string) {
	aligns := make([]tw.Align, len(header))
	for i := range aligns {
		aligns[i] = tw.AlignLeft
		if i < len(align) && align[i] == 'r' {
			aligns[i] = tw.AlignRight
		}
	}
	var buf bytes.Buffer
	tb := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: aligns}),
	)
	tb.Header(header)
	for _, r := range rows {
		_ = tb.Append(r)
	}
	_ = tb.Render()
	for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(strings.TrimPrefix(line, " "), " "))
	}
}

// wrapCell word-wraps each line of s to width runes (a word longer than
// width is cut).
func wrapCell(s string, width int) string {
	var b strings.Builder
	for _, para := range strings.Split(s, "\n") {
		b.WriteString(wrap(para, width, 0))
		b.WriteString("\n")
	}
	return b.String()
}

// wrap word-wraps s to width runes; adjust is added to the first line's
// counted length (for invisible ANSI codes, negative).
func wrap(s string, width, adjust int) string {
	words := strings.Fields(s)
	var b strings.Builder
	n := adjust
	for i, w := range words {
		wl := utf8.RuneCountInString(w)
		if i > 0 {
			if n+1+wl > width {
				b.WriteString("\n")
				n = 0
			} else {
				b.WriteString(" ")
				n++
			}
		}
		for wl > width && n == 0 {
			r := []rune(w)
			b.WriteString(string(r[:width]))
			b.WriteString("\n")
			w = string(r[width:])
			wl -= width
		}
		b.WriteString(w)
		n += wl
	}
	return b.String()
}
