package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/report"
)

// outputOptions are the report files every command that judges or infers
// can write (report.Files), as flags.
type outputOptions struct{ report.Files }

// addOutputFlags adds --html, --junit and --markdown to cmd, filling o.
func addOutputFlags(cmd *cobra.Command, o *outputOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.HTML, "html", "", "write a self-contained HTML report (SVG timeline) to `FILE` (- for stdout)")
	fl.StringVar(&o.JUnit, "junit", "", "write JUnit XML, one test case per finding rule, to `FILE` (- for stdout)")
	fl.StringVar(&o.Markdown, "markdown", "", "write a Markdown summary to `FILE` (- for stdout); the summary also goes to $GITHUB_STEP_SUMMARY whenever that is set")
}

// textOptions are the options of the plain-text summaries on stdout: in
// colour as --color, NO_COLOR and FORCE_COLOR decide for a terminal.
func textOptions(f *Factory, g *GlobalOptions) report.TextOptions {
	return report.TextOptions{Color: g.UseColor(f, f.IO.OutTTY)}
}

// wanted reports whether write would write anything.
func (o *outputOptions) wanted(f *Factory) bool { return o.Wanted(f.Env) }

// write writes the report files of in (a file that cannot be written is a
// usage error naming its flag); a step summary that cannot be appended to
// is only warned about.
func (o *outputOptions) write(f *Factory, in *report.Input) error {
	if in.Tool == "" {
		in.Tool = f.tool()
	}
	warn := func(msg string) { fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", msg) }
	return UsageErr(o.Write(in, f.IO.Out, f.Env, warn))
}
