package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// markdownMaxFindings bounds the findings listed in Markdown.
const markdownMaxFindings = 20

// Markdown writes a compact summary in GitHub-flavoured Markdown, fit for
// $GITHUB_STEP_SUMMARY: the latest verdict, every stored verdict with its
// policy and time, the findings (at most 20, the rest counted), the
// requests by status and the inferred model.
func Markdown(w io.Writer, in *Input) error {
	p := in.prepare()
	var b strings.Builder
	icon := map[string]string{verify.VerdictPass: "✅", verify.VerdictFail: "❌", verify.VerdictIncomplete: "⚠️"}[in.Verdict()]
	if icon == "" {
		icon = "ℹ️"
	}
	fmt.Fprintf(&b, "### %s rlprobe: %s\n\n%s\n", icon, in.VerdictWord(), mdEscape(in.VerdictLine()))
	mdVerdicts(&b, in)
	mdRequests(&b, in, p)
	for _, inf := range in.Inferences {
		fmt.Fprintf(&b, "\n**Inferred:** `%s` (fit %s, reproduced %s)", FamilyName(inf), inf.Fit, units.HumanNumber(inf.Reproduced))
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
		if inf.Note != "" {
			b.WriteString(". " + mdEscape(inf.Note))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n<sub>%s · %s</sub>\n", mdEscape("record files: "+strings.Join(in.Files, ", ")), mdEscape(in.tool()))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// mdVerdicts lists the stored verdicts, latest first, and their findings
// (the first markdownMaxFindings), each row naming its verdict when there
// are several.
func mdVerdicts(b *strings.Builder, in *Input) {
	if len(in.Verdicts) == 0 {
		return
	}
	b.WriteString("\n| verdict | time | policy | found |\n|---|---|---|---|\n")
	for i := range in.Verdicts {
		r := verdictRow(&in.Verdicts[i])
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r[0], mdEscape(r[1]), mdEscape(r[2]), mdEscape(r[3]))
	}
	n := len(in.Findings())
	if n == 0 {
		return
	}
	b.WriteString("\n| | verdict | severity | finding | check | endpoint | client | message |\n|---|---|---|---|---|---|---|---|\n")
	shown := 0
	for i := range in.Verdicts {
		v := &in.Verdicts[i]
		for j := range v.Report.Findings {
			if shown == markdownMaxFindings {
				break
			}
			shown++
			f := &v.Report.Findings[j]
			mark := "⚠️"
			if Fails(f) {
				mark = "❌"
			} else if f.Severity == verify.SeverityInfo {
				mark = "ℹ️"
			}
			fmt.Fprintf(b, "| %s | %d | %s (%s) | `%s` | %s | %s | %s | %s |\n", mark, i+1, f.Severity, f.Certainty, f.ID,
				mdEscape(f.Check), mdEscape(f.Endpoint), mdEscape(f.Client), mdEscape(f.Message))
		}
	}
	if n > markdownMaxFindings {
		fmt.Fprintf(b, "\n… and %d more findings.\n", n-markdownMaxFindings)
	}
}

// mdRequests writes the requests by outcome and status.
func mdRequests(b *strings.Builder, in *Input, p *prepared) {
	if len(in.Agents) == 0 {
		return
	}
	b.WriteString("\n**Requests**")
	if p.rule != nil {
		fmt.Fprintf(b, " (limit: %s)", mdEscape(p.rule.describe()))
	}
	b.WriteString("\n\n| outcome | status | count | p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range in.requestRows(p, false) {
		for i := range r {
			r[i] = mdEscape(r[i])
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}

// mdReplacer escapes what would break a table cell or start markup.
var mdReplacer = strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "`", "\\`", "\n", " ", "[", `\[`)

// mdEscape makes s safe in a Markdown table cell or line: pipes, HTML,
// asterisks, backquotes and brackets escaped, newlines joined.
// Underscores are left alone (GitHub does not emphasise inside words).
func mdEscape(s string) string { return mdReplacer.Replace(s) }
