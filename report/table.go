package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
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
// findings, the requests by outcome and status with latencies, the
// clients, the inferred model, and the files and warnings — tables fitted
// to opt.Width, long cells wrapped.
func Table(w io.Writer, in *Input, opt TableOptions) error {
	width := opt.Width
	if width == 0 {
		width = 100
	}
	width = max(width, 60)
	maxRows := opt.MaxRows
	if maxRows <= 0 {
		maxRows = 50
	}
	paint := func(code, s string) string {
		if !opt.Color || code == "" {
			return s
		}
		return code + s + ansiReset
	}
	p := in.prepare()
	var b bytes.Buffer
	// para writes a paragraph wrapped to the width; invisible is the
	// length of the ANSI codes it holds.
	para := func(s string, invisible int) {
		b.WriteString(wrap(s, width, -invisible))
		b.WriteString("\n")
	}
	code := map[string]string{VerdictPass: ansiBold + ansiGreen, VerdictFail: ansiBold + ansiRed,
		VerdictIncomplete: ansiBold + ansiYellow}[in.Verdict()]
	para(paint(code, in.VerdictWord()+":")+" "+in.VerdictLine(), len(paint(code, "")))

	// Findings: four columns, or two on a narrow terminal.
	fs := in.Findings()
	if len(fs) > 0 {
		fmt.Fprintf(&b, "\nFindings (%d)\n", len(fs))
		shown := fs[:min(len(fs), maxRows)]
		sevCode := map[string]string{SeverityError: ansiRed, SeverityWarning: ansiYellow, SeverityInfo: ansiCyan}
		certainty := func(c string) string {
			if c == Possible {
				return paint(ansiDim, c)
			}
			return c
		}
		wide := 8 + 2 + 11 + 2 + 24 + 2
		for i := range shown {
			wide = max(wide, 8+2+len(shown[i].ID)+2+maxLineLen(whereOf(&shown[i]))+2+24)
		}
		var rows [][]string
		if wide <= width {
			for i := range shown {
				f := &shown[i]
				rows = append(rows, []string{f.Severity + "\n" + f.Certainty, f.ID, whereOf(f), messageOf(f)})
			}
			renderFitted(&b, []string{"severity", "finding", "where", "message"}, rows, width, 3, "llll", func(row []string) []string {
				sev, cert, _ := strings.Cut(row[0], "\n")
				row[0] = paint(sevCode[sev], sev) + "\n" + certainty(cert)
				return row
			})
		} else {
			for i := range shown {
				f := &shown[i]
				rows = append(rows, []string{f.Severity + " " + f.Certainty + "\n" + f.ID + "\n" + whereOf(f), messageOf(f)})
			}
			renderFitted(&b, []string{"finding", "message"}, rows, width, 1, "ll", func(row []string) []string {
				first, rest, _ := strings.Cut(row[0], "\n")
				sev, cert, _ := strings.Cut(first, " ")
				row[0] = paint(sevCode[sev], sev) + " " + certainty(cert) + "\n" + rest
				return row
			})
		}
		if len(fs) > maxRows {
			fmt.Fprintf(&b, "… and %d more findings\n", len(fs)-maxRows)
		}
	}

	// Requests.
	s := p.sum
	if len(in.Agents) > 0 {
		title := "Requests"
		if p.rule != nil {
			title += " (limit: " + p.rule.describe() + ")"
		}
		b.WriteString("\n")
		para(title, 0)
		var rows [][]string
		for _, st := range sortedStatuses(s.Statuses) {
			code, _ := strconv.Atoi(st)
			d := s.Latency[st]
			rows = append(rows, []string{statusClass(code, p.rejects), st, strconv.Itoa(s.Statuses[st]),
				FormatMicros(d.P50US), FormatMicros(d.P90US), FormatMicros(d.P99US), FormatMicros(d.MaxUS)})
		}
		for _, k := range sortedKeys(s.ErrorClasses) {
			rows = append(rows, []string{"error", k, strconv.Itoa(s.ErrorClasses[k]), "", "", "", ""})
		}
		for _, k := range sortedKeys(s.NotSentReasons) {
			rows = append(rows, []string{"not-sent", k, strconv.Itoa(s.NotSentReasons[k]), "", "", "", ""})
		}
		renderFitted(&b, []string{"outcome", "status", "count", "p50", "p90", "p99", "max"}, rows, width, -1, "llrrrrr", nil)
		if s.Delayed > 0 {
			para(fmt.Sprintf("%d of the accepted requests were delayed (latency ≥ %s)", s.Delayed,
				FormatMicros(int64(s.DelayedThresholdMS*1000))), 0)
		}
		para(fmt.Sprintf("%s sent in %s (%s/s); pacing error p50 %s, p99 %s", plural(s.Sent, "request"),
			fmtSeconds(s.DurationS), fmtNum(s.SentPerS), FormatMicros(s.Pacing.P50US), FormatMicros(s.Pacing.P99US)), 0)
	}
	if len(s.Clients) > 1 {
		fmt.Fprintf(&b, "\nClients (%d)\n", len(s.Clients))
		cs := topClients(s.Clients, maxRows)
		header, rows := clientColumns(cs, width)
		renderFitted(&b, header, rows, width, 0, "lrrrrrrr", nil)
		if len(s.Clients) > len(cs) {
			fmt.Fprintf(&b, "… and %d more clients\n", len(s.Clients)-len(cs))
		}
	}

	// Inferences.
	for i := range in.Inferences {
		inf := &in.Inferences[i]
		b.WriteString("\n")
		para(fmt.Sprintf("Inferred: %s (confidence %s, %s in %s)", paint(ansiBold, inf.Algorithm),
			fmtNum(inf.Confidence), plural(inf.Requests, "request"), fmtSeconds(inf.DurationS)), len(paint(ansiBold, "")))
		var rows [][]string
		for _, r := range estimateRows(inf) {
			rows = append(rows, r[:])
		}
		if len(rows) > 0 {
			renderFitted(&b, []string{"parameter", "value", "interval"}, rows, width, 1, "lll", nil)
		}
		if len(inf.Alternatives) > 0 {
			rows = rows[:0]
			for _, a := range inf.Alternatives {
				rows = append(rows, []string{a.Algorithm, fmtNum(a.Confidence), a.RuledOutBy})
			}
			renderFitted(&b, []string{"alternative", "confidence", "ruled out by"}, rows, width, 2, "lrl", nil)
		}
		if inf.Complete != nil && !*inf.Complete {
			para("the experiments did not finish: the result may be ambiguous", 0)
		}
	}

	b.WriteString("\n")
	para("record files: "+strings.Join(in.Files, ", "), 0)
	for _, wmsg := range in.Warnings {
		para(paint(ansiYellow, "warning:")+" "+wmsg, len(paint(ansiYellow, "")))
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// whereOf is a finding's check, endpoint and client, one a line.
func whereOf(f *Finding) string {
	var where []string
	for _, s := range []string{f.Check, f.Endpoint, f.Client} {
		if s != "" {
			where = append(where, s)
		}
	}
	return strings.Join(where, "\n")
}

// messageOf is a finding's message with its hint.
func messageOf(f *Finding) string {
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
func clientColumns(cs []ClientSummary, width int) ([]string, [][]string) {
	long := []string{"client", "sent", "accepted", "delayed", "rejected", "other", "errors", "not-sent"}
	short := []string{"client", "sent", "acc", "delay", "rej", "other", "err", "unsent"}
	vals := func(c ClientSummary) []int {
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

// statusClass names the outcome class of an HTTP status.
func statusClass(code int, rejects []int) string {
	switch {
	case code >= 200 && code <= 299:
		return "accepted"
	case slices.Contains(rejects, code):
		return "rejected"
	}
	return "other"
}

func clientLabel(c string) string {
	if c == "" {
		return "(none)"
	}
	return c
}

// topClients returns at most n clients, those with the most requests,
// ties in their order.
func topClients(cs []ClientSummary, n int) []ClientSummary {
	if len(cs) <= n {
		return cs
	}
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b ClientSummary) int { return (b.Sent + b.NotSent) - (a.Sent + a.NotSent) })
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
