package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/report"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdReport(f, g, nil) })
}

// ReportOptions are the flags of `rlprobe report`.
type ReportOptions struct {
	f         *Factory
	g         *GlobalOptions
	Files     []string
	Format    string
	FormatSet bool
	Out       string
	Reports   outputOptions
}

// NewCmdReport builds `rlprobe report`; runF (nil: the real one) runs it.
func NewCmdReport(f *Factory, g *GlobalOptions, runF func(context.Context, *ReportOptions) error) *cobra.Command {
	o := &ReportOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "report FILE... [--format table|json|junit|markdown|html] [-o FILE]",
		Short:   "Render stored runs with their findings and inferences, without re-running anything",
		Long:    helpLong("report"),
		Example: helpExample("report"),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files, o.FormatSet = args, cmd.Flags().Changed("format")
			return runOr(runF, reportRun)(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Format, "format", "table", "`FORMAT` of the report: table, json, junit, markdown or html")
	fl.StringVarP(&o.Out, "output", "o", "", "write the report to `FILE` instead of stdout")
	addOutputFlags(cmd, &o.Reports)
	return cmd
}

func reportRun(_ context.Context, o *ReportOptions) error {
	f, g, args, formatSet := o.f, o.g, o.Files, o.FormatSet
	format, err := report.ParseFormat(o.Format)
	if err != nil {
		return UsageErr(err)
	}
	if g.JSON {
		if formatSet && format != report.FormatJSON {
			return Usagef("--json and --format %s disagree: choose one", format)
		}
		format = report.FormatJSON
	}
	in, err := report.ReadNamed(f.IO.In, args...)
	if err != nil {
		return UsageErr(err) // unreadable, not a record file, or an unknown format
	}
	in.Tool = f.tool()
	if format != report.FormatTable && !g.Quiet {
		for _, w := range in.Warnings {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", w)
		}
	}
	toStdout := o.Out == "" || o.Out == "-"
	opt := report.TableOptions{Width: f.IO.Width, Color: g.UseColor(f, toStdout && f.IO.OutTTY)}
	var oerr *report.OutputError
	if err := report.WriteOutput(o.Out, f.IO.Out, format, in, opt); err != nil {
		if errors.As(err, &oerr) {
			return UsageErr(fmt.Errorf("-o: %w", oerr.Err))
		}
		return err
	}
	return o.Reports.write(f, in)
}
