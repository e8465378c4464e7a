package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Files are the report files a command writes beside its own output:
// HTML, JUnit and Markdown ("" none, "-" the given stdout). The zero value
// writes no file. With $GITHUB_STEP_SUMMARY set, Write also appends the
// Markdown summary to that file.
type Files struct {
	HTML     string
	JUnit    string
	Markdown string
}

// StepSummaryEnv names the file GitHub Actions shows as a job's summary.
const StepSummaryEnv = "GITHUB_STEP_SUMMARY"

// Wanted reports whether Write would write anything (getenv reads the
// environment), so that a caller can skip building the report's input.
func (o Files) Wanted(getenv func(string) string) bool {
	return o.HTML != "" || o.JUnit != "" || o.Markdown != "" || getenv(StepSummaryEnv) != ""
}

// Write renders in to every file asked for, then appends the Markdown
// summary to $GITHUB_STEP_SUMMARY when it is set. A file that cannot be
// rendered or written is an error naming its flag (--html, --junit,
// --markdown); a step summary that cannot be appended to is only passed
// to warn.
func (o Files) Write(in *Input, stdout io.Writer, getenv func(string) string, warn func(string)) error {
	files := []struct {
		flag, path string
		render     func(*bytes.Buffer) error
	}{
		{"--html", o.HTML, func(b *bytes.Buffer) error { return HTML(b, in) }},
		{"--junit", o.JUnit, func(b *bytes.Buffer) error { return JUnit(b, in) }},
		{"--markdown", o.Markdown, func(b *bytes.Buffer) error { return Markdown(b, in) }},
	}
	for _, file := range files {
		if file.path == "" {
			continue
		}
		var b bytes.Buffer
		if err := file.render(&b); err != nil {
			return fmt.Errorf("%s: %w", file.flag, err)
		}
		if err := writeOutput(file.path, stdout, b.Bytes()); err != nil {
			return fmt.Errorf("%s: %w", file.flag, err)
		}
	}
	if path := getenv(StepSummaryEnv); path != "" {
		b := bytes.NewBufferString("\n") // a heading must start a line
		if err := Markdown(b, in); err != nil {
			return fmt.Errorf("$%s: %w", StepSummaryEnv, err)
		}
		if err := appendFile(path, b.Bytes()); err != nil {
			warn(fmt.Sprintf("$%s: %v", StepSummaryEnv, err))
		}
	}
	return nil
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

// ReadNamed reads the record files names ("-" reads stdin, at most once),
// as Read does.
func ReadNamed(stdin io.Reader, names ...string) (*Input, error) {
	srcs := make([]Source, 0, len(names))
	defer func() {
		for _, s := range srcs {
			if c, ok := s.R.(*os.File); ok && s.Name != "-" {
				c.Close()
			}
		}
	}()
	dash := false
	for _, a := range names {
		if a == "-" {
			if dash {
				return nil, fmt.Errorf("- (stdin) can be read only once")
			}
			dash = true
			srcs = append(srcs, Source{Name: "-", R: stdin})
			continue
		}
		file, err := os.Open(a)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, Source{Name: a, R: file})
	}
	return Read(srcs...)
}
