package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"

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
		Use:   "report FILE... [--format table|json|junit|markdown|html] [-o FILE]",
		Short: "Render stored runs with their findings and inferences, without re-running anything",
		Long: `Render record files — the requests, and the findings and inferences that
check, analyze and infer appended to them — without sending anything.
Several files are put on one timeline (by their start and clock offset);
"-" reads a file from stdin.

Formats:
  table     the verdict on one line, then findings, requests, clients and
            the inferred model as tables fitted to the terminal (default)
  json      the report document (schema rlprobe.report/v1): the verdict,
            the run summary, and the stored check/analyze/infer documents
  junit     JUnit XML: one test case per finding rule, grouped by endpoint
            and check; failures carry the evidence
  markdown  a compact summary
  html      one self-contained page: an SVG timeline of every request by
            client and outcome, window edges, the count against the limit,
            latency, Retry-After claims against recovery, the findings
            linked to their moments, and the inferred model

--html, --junit and --markdown write further renderings in the same run;
with $GITHUB_STEP_SUMMARY set, the Markdown summary is also appended to it.
The verdict comes from the stored documents; a file without them gets
"no verdict" (run rlprobe analyze FILE with a policy). The exit code is 0
whenever the report is written, whatever the verdict.`,
		Example: `  rlprobe report rlprobe-check-20250301T120000Z.jsonl
  rlprobe report run.jsonl --format html -o report.html
  rlprobe report agent1.jsonl agent2.jsonl --format junit -o rlprobe.xml
  rlprobe report run.jsonl --json | jq .verdict
  rlprobe report run.jsonl --html report.html --junit rlprobe.xml --markdown summary.md`,
		Args: cobra.MinimumNArgs(1),
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
	in, err := readReportInput(f, args)
	if err != nil {
		return err
	}
	in.Tool = f.tool()
	if format != report.FormatTable && !g.Quiet {
		for _, w := range in.Warnings {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", w)
		}
	}
	toStdout := o.Out == "" || o.Out == "-"
	var b bytes.Buffer
	opt := report.TableOptions{Width: f.IO.Width, Color: g.UseColor(f, toStdout && f.IO.OutTTY)}
	if err := report.Render(&b, format, in, opt); err != nil {
		return err
	}
	if toStdout {
		if _, err := f.IO.Out.Write(b.Bytes()); err != nil {
			return err
		}
	} else if err := os.WriteFile(o.Out, b.Bytes(), 0o644); err != nil {
		return UsageErr(fmt.Errorf("-o: %w", err))
	}
	return o.Reports.write(f, in)
}

// readReportInput reads the record files named by args ("-" is stdin,
// at most once). Unreadable files are input errors.
func readReportInput(f *Factory, args []string) (*report.Input, error) {
	srcs := make([]report.Source, 0, len(args))
	stdin := false
	for _, a := range args {
		if a == "-" {
			if stdin {
				return nil, Usagef("- (stdin) can be read only once")
			}
			stdin = true
			srcs = append(srcs, report.Source{Name: "-", R: f.IO.In})
			continue
		}
		file, err := os.Open(a)
		if err != nil {
			closeSources(srcs)
			return nil, UsageErr(err)
		}
		srcs = append(srcs, report.Source{Name: a, R: file})
	}
	defer closeSources(srcs)
	in, err := report.Read(srcs...)
	if err != nil {
		return nil, UsageErr(err) // unreadable, not a record file, or an unknown format
	}
	return in, nil
}

func closeSources(srcs []report.Source) {
	for _, s := range srcs {
		if c, ok := s.R.(*os.File); ok && s.Name != "-" {
			c.Close()
		}
	}
}
