package report

import (
	"bytes"
	"io"
	"os"
)

// OutputError is an error writing a report to its file (WriteOutput,
// Files.Write): the file could not be created or written. Its text is
// the underlying error's, so that a caller can name the flag or setting
// that chose the file.
type OutputError struct {
	// Path is the file that could not be written.
	Path string
	// Err is why.
	Err error
}

// Error returns Err's text, without the path.
func (e *OutputError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *OutputError) Unwrap() error { return e.Err }

// WriteOutput renders in in format f completely, then writes it to the
// file at path, or to stdout when path is "" or "-": a report that does
// not render leaves no file behind, and a file is never half a report
// because rendering failed. An error creating or writing the file is an
// *OutputError; an error writing stdout or rendering is returned as is.
func WriteOutput(path string, stdout io.Writer, f Format, in *Input, opt TableOptions) error {
	var b bytes.Buffer
	if err := Render(&b, f, in, opt); err != nil {
		return err
	}
	return writeOutput(path, stdout, b.Bytes())
}

// writeOutput writes data to the file at path, or to stdout when path is
// "" or "-".
func writeOutput(path string, stdout io.Writer, data []byte) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return &OutputError{Path: path, Err: err}
	}
	return nil
}
