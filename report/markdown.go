package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// markdownMaxFindings bounds the findings listed in Markdown.
const markdownMaxFindings = 20

// Markdown writes a compact summary in GitHub-flavoured Markdown, fit for
// $GITHUB_STEP_SUMMARY: the verdict, the findings (at most 20, the rest
// counted), the requests by status and the inferred model.
func Markdown(w io.Writer, in *Input) error {
	p := in.prepare()
	var b strings.Builder
	icon := map[string]string{VerdictPass: "✅", VerdictFail: "❌", VerdictIncomplete: "⚠️"}[in.Verdict()]
	if icon == "" {
		icon = "ℹ️"
	}
	fmt.Fprintf(&b, "### %s rlprobe: %s\n\n%s\n", icon, in.VerdictWord(), mdEscape(in.VerdictLine()))

	fs := in.Findings()
	if len(fs) > 0 {
		b.WriteString("\n| | severity | finding | check | endpoint | client | message |\n|---|---|---|---|---|---|---|\n")
		for i := range fs[:min(len(fs), markdownMaxFindings)] {
			f := &fs[i]
			mark := "⚠️"
			if f.Fails() {
				mark = "❌"
			} else if f.Severity == SeverityInfo {
				mark = "ℹ️"
			}
			fmt.Fprintf(&b, "| %s | %s (%s) | `%s` | %s | %s | %s | %s |\n", mark, f.Severity, f.Certainty, f.ID,
				mdEscape(f.Check), mdEscape(f.Endpoint), mdEscape(f.Client), mdEscape(f.Message))
		}
		if len(fs) > markdownMaxFindings {
			fmt.Fprintf(&b, "\n… and %d more findings.\n", len(fs)-markdownMaxFindings)
		}
	}

	if len(in.Agents) > 0 {
		s := p.sum
		b.WriteString("\n**Requests**")
		if p.rule != nil {
			fmt.Fprintf(&b, " (limit: %s)", mdEscape(p.rule.describe()))
		}
		b.WriteString("\n\n| outcome | status | count | p50 | p99 |\n|---|---:|---:|---:|---:|\n")
		for _, st := range sortedStatuses(s.Statuses) {
			code, _ := strconv.Atoi(st)
			d := s.Latency[st]
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", statusClass(code, p.rejects), st, s.Statuses[st],
				FormatMicros(d.P50US), FormatMicros(d.P99US))
		}
		for _, k := range sortedKeys(s.ErrorClasses) {
			fmt.Fprintf(&b, "| error | %s | %d | | |\n", mdEscape(k), s.ErrorClasses[k])
		}
		for _, k := range sortedKeys(s.NotSentReasons) {
			fmt.Fprintf(&b, "| not-sent | %s | %d | | |\n", mdEscape(k), s.NotSentReasons[k])
		}
	}

	for i := range in.Inferences {
		inf := &in.Inferences[i]
		fmt.Fprintf(&b, "\n**Inferred:** `%s` (confidence %s)", inf.Algorithm, fmtNum(inf.Confidence))
		var parts []string
		for _, r := range estimateRows(inf) {
			s := "`" + r[0] + "` " + mdEscape(r[1])
			if r[2] != "" {
				s += " (" + mdEscape(r[2]) + ")"
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			b.WriteString(": " + strings.Join(parts, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n<sub>%s · %s</sub>\n", mdEscape("record files: "+strings.Join(in.Files, ", ")), mdEscape(in.tool()))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// mdReplacer escapes what would break a table cell or start markup.
var mdReplacer = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "`", "\\`", "\n", " ", "[", `\[`)

// mdEscape makes s safe in a Markdown table cell or line: pipes, HTML,
// asterisks, backquotes and brackets escaped, newlines joined.
// Underscores are left alone (GitHub does not emphasise inside words).
func mdEscape(s string) string { return mdReplacer.Replace(s) }
