package report

import (
	"fmt"
	"io"
	"strings"
)

// Format names a rendering of a report.
type Format string

// Formats, as `rlprobe report --format` takes them.
const (
	FormatTable    Format = "table"
	FormatJSON     Format = "json"
	FormatJUnit    Format = "junit"
	FormatMarkdown Format = "markdown"
	FormatHTML     Format = "html"
)

// Formats lists every format.
var Formats = []Format{FormatTable, FormatJSON, FormatJUnit, FormatMarkdown, FormatHTML}

// ParseFormat parses a format name (case-insensitive; "md" is markdown,
// "xml" junit).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatTable, FormatJSON, FormatJUnit, FormatMarkdown, FormatHTML:
		return f, nil
	case "md":
		return FormatMarkdown, nil
	case "xml":
		return FormatJUnit, nil
	}
	return "", fmt.Errorf("report: format must be table, json, junit, markdown or html, not %q", s)
}

// Render writes in in the format; opt applies to the table only.
func Render(w io.Writer, f Format, in *Input, opt TableOptions) error {
	switch f {
	case FormatTable:
		return Table(w, in, opt)
	case FormatJSON:
		return JSON(w, in)
	case FormatJUnit:
		return JUnit(w, in)
	case FormatMarkdown:
		return Markdown(w, in)
	case FormatHTML:
		return HTML(w, in)
	}
	return fmt.Errorf("report: unknown format %q", f)
}
