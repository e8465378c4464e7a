package limitconf

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rlprobe/rlprobe/verify"
)

// WriteLint writes the lint document as text (policy lint without
// --json): the verdict, the findings, then the limits read.
func WriteLint(w io.Writer, d *LintDocument) error {
	var b strings.Builder
	certain := 0
	var ids []string
	for _, fd := range d.Findings {
		if fd.Certainty == verify.Certain && fd.Severity == verify.SeverityError {
			certain++
			if !slices.Contains(ids, fd.ID) {
				ids = append(ids, fd.ID)
			}
		}
	}
	if d.Pass {
		b.WriteString("PASS: no certain finding at or above --fail-on\n")
	} else {
		fmt.Fprintf(&b, "FAIL: %s (%d certain)\n", strings.Join(ids, ", "), certain)
	}
	for _, fd := range d.Findings {
		fmt.Fprintf(&b, "  %-7s %-8s %s: %s\n", fd.Severity, fd.Certainty, fd.ID, fd.Message)
		if fd.Hint != "" {
			fmt.Fprintf(&b, "          hint: %s\n", fd.Hint)
		}
	}
	noun := "limits"
	if len(d.Rules) == 1 {
		noun = "limit"
	}
	fmt.Fprintf(&b, "%s (%s): %d %s\n", d.File, d.Format, len(d.Rules), noun)
	for _, r := range d.Rules {
		where := r.Location
		if r.Server != "" {
			where += " (server " + r.Server + ")"
		}
		extra := ""
		if r.Status != 0 {
			extra = fmt.Sprintf(", rejects with %d", r.Status)
		}
		if r.Binding {
			extra += ", binding"
		}
		fmt.Fprintf(&b, "  %s: %s: %s%s\n", r.Source, where, r.Describe(), extra)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Warnings are the import's findings at or above min, one line each as
// a command prints them on stderr: "ID (severity, certainty): message".
func (im *Import) Warnings(min verify.Severity) []string {
	var out []string
	for _, fd := range im.Findings {
		if fd.Severity.AtLeast(min) {
			out = append(out, fmt.Sprintf("%s (%s, %s): %s", fd.ID, fd.Severity, fd.Certainty, fd.Message))
		}
	}
	return out
}
