package cli

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/report"
)

// outputOptions are the report files every command that judges or infers
// can write: --html FILE, --junit FILE, --markdown FILE ("-" is stdout).
// The zero value writes no file. With $GITHUB_STEP_SUMMARY set, write also
// appends the Markdown summary to that file, flags or not.
//
// Usage in a command:
//
//	o := &outputOptions{}
//	addOutputFlags(cmd, o)
//	...
//	in := report.FromMerged(merged, []string{recordPath}) // or report.ReadFiles(recordPath)
//	in.AddDocument(checkDoc)                              // documents not yet in the record file
//	if err := o.write(f, in); err != nil { return err }
type outputOptions struct {
	HTML     string // --html: the self-contained HTML report
	JUnit    string // --junit: JUnit XML, one test case per finding rule
	Markdown string // --markdown: a compact Markdown summary
}

// addOutputFlags adds --html, --junit and --markdown to cmd, filling o.
func addOutputFlags(cmd *cobra.Command, o *outputOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.HTML, "html", "", "write a self-contained HTML report (SVG timeline) to `FILE` (- for stdout)")
	fl.StringVar(&o.JUnit, "junit", "", "write JUnit XML, one test case per finding rule, to `FILE` (- for stdout)")
	fl.StringVar(&o.Markdown, "markdown", "", "write a Markdown summary to `FILE` (- for stdout); the summary also goes to $GITHUB_STEP_SUMMARY whenever that is set")
}

// stepSummaryEnv names the file GitHub Actions shows as a job's summary.
const stepSummaryEnv = "GITHUB_STEP_SUMMARY"

// wanted reports whether write would write anything, so that a command
// can skip building the report's input.
func (o *outputOptions) wanted(f *Factory) bool {
	return o.HTML != "" || o.JUnit != "" || o.Markdown != "" || f.Env(stepSummaryEnv) != ""
}

// write renders in to every requested file, then appends the Markdown
// summary to $GITHUB_STEP_SUMMARY when it is set (read through f.Getenv).
// It sets in.Tool from the factory's version when empty. A file that
// cannot be written is an input error (exit 2) naming its flag; a step
// summary that cannot be appended to is only warned about on stderr.
func (o *outputOptions) write(f *Factory, in *report.Input) error {
	if in.Tool == "" {
		in.Tool = "rlprobe " + f.Version
	}
	files := []struct {
		flag, path string
		render     func(*bytes.Buffer) error
	}{
		{"--html", o.HTML, func(b *bytes.Buffer) error { return report.HTML(b, in) }},
		{"--junit", o.JUnit, func(b *bytes.Buffer) error { return report.JUnit(b, in) }},
		{"--markdown", o.Markdown, func(b *bytes.Buffer) error { return report.Markdown(b, in) }},
	}
	for _, file := range files {
		if file.path == "" {
			continue
		}
		var b bytes.Buffer
		if err := file.render(&b); err != nil {
			return fmt.Errorf("%s: %w", file.flag, err)
		}
		if err := writeOutput(f, file.path, b.Bytes()); err != nil {
			return UsageErr(fmt.Errorf("%s: %w", file.flag, err))
		}
	}
	if path := f.Env(stepSummaryEnv); path != "" {
		b := bytes.NewBufferString("\n") // a heading must start a line
		if err := report.Markdown(b, in); err != nil {
			return fmt.Errorf("$%s: %w", stepSummaryEnv, err)
		}
		if err := appendFile(path, b.Bytes()); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: $%s: %v\n", stepSummaryEnv, err)
		}
	}
	return nil
}

// writeOutput writes data to path, or to stdout for "-".
func writeOutput(f *Factory, path string, data []byte) error {
	if path == "-" {
		_, err := f.IO.Out.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// appendFile appends data to the file at path, creating it if needed.
func appendFile(path string, data []byte) error {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}
