package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// FlushInterval is the longest a written record stays in a Writer's buffer:
// a background goroutine flushes the buffer this often while the Writer is
// open.
const FlushInterval = 100 * time.Millisecond

// FlushRecords is the most records a Writer buffers: it flushes when this
// many lines have been written since the last flush.
const FlushRecords = 256

// writeBufferSize is the Writer's buffer size in bytes. A line never
// straddles two writes to the underlying writer unless it is longer than
// this, so a killed process leaves whole lines behind.
const writeBufferSize = 128 << 10

// ErrClosed is returned by a Writer's or an Appender's methods after Close.
var ErrClosed = errors.New("record: writer is closed")

// Create creates the record file at path for writing, with permissions
// 0644. It refuses to replace an existing file unless force is set, so a run
// never overwrites an earlier one by accident; the error then wraps
// [fs.ErrExist] and tells the user what to do. The caller closes the file
// after closing the Writer that writes to it.
func Create(path string, force bool) (*os.File, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, &existsError{path: path, err: err}
		}
		return nil, fmt.Errorf("record: %w", err)
	}
	return f, nil
}

// existsError is Create's error for an existing file.
type existsError struct {
	path string
	err  error
}

func (e *existsError) Error() string {
	return fmt.Sprintf("record: %s exists; use --force or another --out", e.path)
}

func (e *existsError) Unwrap() error { return e.err }

// A Writer writes one record file: the Header line at once (NewWriter), then
// results, findings and inferences as they come, and the End line (Close).
//
// Lines are buffered and flushed at least every FlushInterval (by a
// goroutine that Close stops) and every FlushRecords lines, and a line is
// never split across two writes to the underlying writer (unless it is
// longer than the 128 KiB buffer), so a process killed at any moment leaves
// a file of whole lines that loses at most the last 100 ms or 256 records.
//
// A Writer is safe for concurrent use by multiple goroutines; each line is
// written whole, in the order the calls take the Writer's lock. The first
// error writing to the underlying writer is sticky: every later call returns
// it. The Writer neither closes nor syncs the underlying writer. Always call
// Close, which also releases the flushing goroutine.
type Writer struct {
	mu      sync.Mutex
	bw      *bufio.Writer
	pending int   // lines written since the last flush
	err     error // first write error, sticky
	closed  bool

	stop chan struct{} // closed by Close to stop the flusher
	done chan struct{} // closed by the flusher when it returns
}

// NewWriter writes the header line h to w, with Type set to TypeHeader,
// Format to FormatMajor and Start converted to UTC, flushes it, and returns
// a Writer for the rest of the file.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Type = TypeHeader
	h.Format = FormatMajor
	h.Start = h.Start.UTC()
	line, err := encodeLine(&h)
	if err != nil {
		return nil, fmt.Errorf("record: encode header: %w", err)
	}
	wr := &Writer{
		bw:   bufio.NewWriterSize(w, writeBufferSize),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	wr.writeLocked(line)
	wr.flushLocked()
	if wr.err != nil {
		return nil, wr.err
	}
	go wr.flusher()
	return wr, nil
}

// flusher flushes the buffer every FlushInterval until Close.
func (w *Writer) flusher() {
	defer close(w.done)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			if !w.closed && w.bw.Buffered() > 0 {
				w.flushLocked()
			}
			w.mu.Unlock()
		}
	}
}

// WriteResult writes r as a result line, with Type set to TypeResult. The
// line holds the bytes encoding/json would write for r (see appendResult),
// encoded without reflection and, in the steady state, without allocating.
func (w *Writer) WriteResult(r Result) error {
	r.Type = TypeResult
	bp := lineBufs.Get().(*[]byte)
	line := appendResult((*bp)[:0], &r)
	err := w.write(line)
	if cap(line) <= maxPooledLine {
		*bp = line
		lineBufs.Put(bp)
	}
	return err
}

// lineBufs holds the buffers WriteResult encodes into, as *[]byte so that
// putting one back does not allocate.
var lineBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// maxPooledLine is the largest buffer WriteResult keeps for reuse, so that
// one huge line does not pin its memory in the pool.
const maxPooledLine = 64 << 10

// WriteFinding writes doc, which must marshal to a JSON object, as a finding
// line: the object with a "type":"finding" member added first. A doc that
// already has a "type" member is written as is if its value is "finding",
// and refused otherwise.
func (w *Writer) WriteFinding(doc any) error {
	line, err := encodeDoc(TypeFinding, doc)
	if err != nil {
		return err
	}
	return w.write(line)
}

// WriteInference writes doc as an inference line, as WriteFinding does with
// "type":"inference".
func (w *Writer) WriteInference(doc any) error {
	line, err := encodeDoc(TypeInference, doc)
	if err != nil {
		return err
	}
	return w.write(line)
}

// Flush writes every buffered line to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.flushLocked()
	return w.err
}

// Close writes e as the end line (Type set to TypeEnd), flushes, and stops
// the flushing goroutine. It returns the first error the Writer met, and
// ErrClosed when called again.
func (w *Writer) Close(e End) error {
	e.Type = TypeEnd
	line, err := encodeLine(&e)
	if err != nil {
		return fmt.Errorf("record: encode end: %w", err)
	}
	return w.closeWith(line)
}

// closeWith writes the lines (if any), flushes and stops the flusher.
func (w *Writer) closeWith(lines ...[]byte) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	for _, l := range lines {
		w.writeLocked(l)
	}
	w.flushLocked()
	w.closed = true
	err := w.err
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	return err
}

// write writes one encoded line (with its newline), flushing every
// FlushRecords lines. The line is copied before write returns.
func (w *Writer) write(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.writeLocked(line)
	if w.pending >= FlushRecords {
		w.flushLocked()
	}
	return w.err
}

// writeLocked buffers line whole: it flushes first when the line does not
// fit in what is left of the buffer. The caller holds mu.
func (w *Writer) writeLocked(line []byte) {
	if w.err != nil {
		return
	}
	if len(line) > w.bw.Available() && w.bw.Buffered() > 0 {
		w.flushLocked()
		if w.err != nil {
			return
		}
	}
	if _, err := w.bw.Write(line); err != nil {
		w.err = fmt.Errorf("record: write: %w", err)
		return
	}
	w.pending++
}

// flushLocked flushes the buffer. The caller holds mu.
func (w *Writer) flushLocked() {
	if w.err != nil {
		return
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("record: write: %w", err)
	}
	w.pending = 0
}

// encoder is a pooled JSON encoder that writes into its own buffer, without
// HTML escaping so URLs stay readable. Headers, end lines and documents go
// through it; results through appendResult, which writes the same bytes.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// encodeLine returns v as one compact JSON line ending in '\n', in a new
// slice.
func encodeLine(v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// encodeDoc encodes a finding or inference document as one line with
// "type":typ added (see Writer.WriteFinding).
func encodeDoc(typ string, doc any) ([]byte, error) {
	line, err := encodeLine(doc)
	if err != nil {
		return nil, fmt.Errorf("record: encode %s: %w", typ, err)
	}
	obj := bytes.TrimSpace(line)
	if len(obj) == 0 || obj[0] != '{' {
		return nil, fmt.Errorf("record: %s document is %.20s…, want a JSON object", typ, obj)
	}
	// Which "type" a reader would see: encoding/json matches keys
	// case-insensitively and the last one wins, so ask it.
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(obj, &keys); err != nil {
		return nil, fmt.Errorf("record: %s document: %w", typ, err)
	}
	hasType := false
	for k := range keys {
		if strings.EqualFold(k, "type") {
			hasType = true
			break
		}
	}
	if hasType {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(obj, &t); err != nil || t.Type != typ {
			return nil, fmt.Errorf("record: %s document has its own \"type\" member", typ)
		}
		return line, nil
	}
	out := make([]byte, 0, len(line)+len(typ)+10)
	out = append(out, `{"type":"`...)
	out = append(out, typ...)
	out = append(out, '"')
	if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	out = append(out, obj[1:]...)
	return append(out, '\n'), nil
}

// WriteTo writes run as a record file to w: the header, the results, the
// end line when run has one, then the findings and inferences. It
// implements io.WriterTo; reading the output back gives an equal Run
// (warnings aside).
func (run *Run) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	wr, err := NewWriter(cw, run.Header)
	if err != nil {
		return cw.n, err
	}
	fail := func(err error) (int64, error) {
		wr.closeWith()
		return cw.n, err
	}
	for _, r := range run.Results {
		if err := wr.WriteResult(r); err != nil {
			return fail(err)
		}
	}
	var lines [][]byte
	if run.End != nil {
		e := *run.End
		e.Type = TypeEnd
		line, err := encodeLine(&e)
		if err != nil {
			return fail(fmt.Errorf("record: encode end: %w", err))
		}
		lines = append(lines, line)
	}
	for _, group := range []struct {
		typ  string
		docs []json.RawMessage
	}{{TypeFinding, run.Findings}, {TypeInference, run.Inferences}} {
		for _, d := range group.docs {
			line, err := encodeDoc(group.typ, d)
			if err != nil {
				return fail(err)
			}
			lines = append(lines, line)
		}
	}
	err = wr.closeWith(lines...)
	return cw.n, err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
