package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// An Appender adds finding and inference lines to the end of an existing
// record file, after its End line if it has one; that is how analyze, check
// and infer attach their documents to a recorded run. Each line goes to the
// file in a single write, unbuffered.
//
// An Appender is safe for concurrent use by multiple goroutines.
type Appender struct {
	mu       sync.Mutex
	f        *os.File
	closed   bool
	warnings []string
}

// Append opens the record file at path for appending. It first checks the
// file's header as Read does (a missing or garbled header is an error, an
// unknown major format a [*FormatError]). If the file ends in an incomplete
// line (its writer was killed mid-line), Append makes the file whole again:
// a tail that is a complete JSON value only lacked its newline and gets one;
// any other tail is unreadable, is removed, and Warnings says so.
func Append(path string) (*Appender, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	a := &Appender{f: f}
	if err := a.prepare(path); err != nil {
		f.Close()
		return nil, err
	}
	return a, nil
}

// prepare checks the header and repairs an incomplete last line.
func (a *Appender) prepare(path string) error {
	if _, err := NewReader(a.f).Next(); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("record: %s is empty: no header", path)
		}
		return err
	}
	fi, err := a.f.Stat()
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	size := fi.Size()
	nl, err := lastNewline(a.f, size)
	if err != nil {
		return fmt.Errorf("record: %s: %w", path, err)
	}
	if nl == size-1 {
		return nil
	}
	tailLen := size - (nl + 1)
	if tailLen <= MaxLineBytes {
		tail := make([]byte, tailLen)
		if _, err := a.f.ReadAt(tail, nl+1); err != nil {
			return fmt.Errorf("record: %s: %w", path, err)
		}
		if json.Valid(tail) {
			if _, err := a.f.Write([]byte{'\n'}); err != nil {
				return fmt.Errorf("record: %s: %w", path, err)
			}
			return nil
		}
	}
	if err := a.f.Truncate(nl + 1); err != nil {
		return fmt.Errorf("record: %s: %w", path, err)
	}
	a.warnings = append(a.warnings, fmt.Sprintf(
		"record: %s: removed an incomplete last line (%d bytes) before appending", path, tailLen))
	return nil
}

// lastNewline returns the offset of the last '\n' among the first size bytes
// of f, or -1.
func lastNewline(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i), nil
		}
		end = start
	}
	return -1, nil
}

// Warnings returns what Append repaired in the file, for the user to see.
func (a *Appender) Warnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.warnings...)
}

// WriteFinding appends doc as a finding line, as Writer.WriteFinding does.
func (a *Appender) WriteFinding(doc any) error {
	return a.write(TypeFinding, doc)
}

// WriteInference appends doc as an inference line, as
// Writer.WriteInference does.
func (a *Appender) WriteInference(doc any) error {
	return a.write(TypeInference, doc)
}

func (a *Appender) write(typ string, doc any) error {
	line, err := encodeDoc(typ, doc)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if _, err := a.f.Write(line); err != nil {
		return fmt.Errorf("record: append %s: %w", typ, err)
	}
	return nil
}

// Close closes the file. It returns ErrClosed when called again.
func (a *Appender) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	a.closed = true
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}
