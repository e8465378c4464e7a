package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// writeChunk is the most bytes the Writer hands the underlying writer in
// one Write: a line never straddles two writes unless it is longer than
// this, so a killed process leaves whole lines behind.
const writeChunk = 128 << 10

// MaxBacklog is a Writer's default bound on its backlog: the bytes of
// lines accepted but not yet written to the underlying writer. A write
// that would pass it waits for the file to catch up (see Writer.Stats).
const MaxBacklog = 64 << 20

// maxSpareBuffer is the largest buffer the Writer keeps for the next
// round once written: a stall's big buffer is let go when it is over.
const maxSpareBuffer = 1 << 20

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

// CreateFree creates a new record file at path, or, when one exists there,
// at the first free name of path with -2, -3… before its extension
// ("run.jsonl", "run-2.jsonl"), up to maxFreeNames tries; it returns the
// file and its path. It never replaces a file: two processes that chose
// the same default name at the same moment each get their own.
func CreateFree(path string) (*os.File, string, error) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	var err error
	for i := 1; i <= maxFreeNames; i++ {
		p := path
		if i > 1 {
			p = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		var f *os.File
		if f, err = Create(p, false); err == nil {
			return f, p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", err
}

// maxFreeNames bounds CreateFree's tries.
const maxFreeNames = 100

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
// Writing a line only copies it into the Writer's backlog; one background
// goroutine writes the backlog to the underlying writer, in order, at least
// every FlushInterval and every FlushRecords lines, so a slow disk never holds a caller while it writes. The
// backlog is bounded (MaxBacklog, or SetMaxBacklog): a line that would pass
// the bound waits until the file catches up — no line is ever dropped —
// and Stats reports how long writers waited and the largest backlog. A line
// never straddles two writes to the underlying writer unless it is longer
// than 128 KiB, so a process killed at any moment leaves a file of whole
// lines that loses at most the last 100 ms or 256 records (more only while
// the file is falling behind: the backlog).
//
// A Writer is safe for concurrent use by multiple goroutines; each line is
// written whole, in the order the calls take the Writer's lock. The first
// error writing to the underlying writer is sticky: every later call returns
// it. The Writer neither closes nor syncs the underlying writer. Always call
// Close, which also stops the background goroutine.
type Writer struct {
	w    io.Writer
	mu   sync.Mutex
	room *sync.Cond // broadcast when a write finishes or the Writer closes

	buf      []byte // lines accepted, not yet taken by the background writer
	lines    int    // lines in buf
	spare    []byte // a written buffer, for the next round
	inflight int    // bytes the background writer is writing now
	accepted int64  // bytes accepted since NewWriter (header excluded)
	written  int64  // bytes of those written or failed
	err      error  // first write error, sticky
	closed   bool

	maxBacklog int
	stall      time.Duration // total time writers waited for room
	backlogMax int           // largest backlog seen, in bytes

	kick chan struct{} // wakes the background writer (buffered, 1)
	stop chan struct{} // closed by Close to stop the background writer
	done chan struct{} // closed by the background writer when it returns
}

// WriterStats is a Writer's back-pressure so far.
type WriterStats struct {
	// Stall is the total time writes waited for room in the backlog.
	Stall time.Duration
	// BacklogMax is the largest backlog seen, in bytes: lines accepted and
	// not yet written to the underlying writer.
	BacklogMax int
}

// NewWriter writes the header line h to w, with Type set to TypeHeader,
// Format to FormatMajor and Start converted to UTC, and returns a Writer
// for the rest of the file. The header is written before NewWriter
// returns, so a file that cannot be written fails here.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Type = TypeHeader
	h.Format = FormatMajor
	h.Start = h.Start.UTC()
	line, err := encodeLine(&h)
	if err != nil {
		return nil, fmt.Errorf("record: encode header: %w", err)
	}
	if err := writeLines(w, line); err != nil {
		return nil, fmt.Errorf("record: write: %w", err)
	}
	wr := &Writer{
		w:          w,
		maxBacklog: MaxBacklog,
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	wr.room = sync.NewCond(&wr.mu)
	go wr.background()
	return wr, nil
}

// SetMaxBacklog sets the bound on the backlog to n bytes (at least one
// line is always accepted into an empty backlog, whatever its length).
// Call it before writing.
func (w *Writer) SetMaxBacklog(n int) {
	w.mu.Lock()
	w.maxBacklog = max(n, 1)
	w.mu.Unlock()
}

// Stats returns the Writer's back-pressure so far.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Stall: w.stall, BacklogMax: w.backlogMax}
}

// background writes the backlog to the underlying writer when kicked, every
// FlushInterval, and a last time when Close stops it.
func (w *Writer) background() {
	defer close(w.done)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		stopping := false
		select {
		case <-w.stop:
			stopping = true
		case <-w.kick:
		case <-t.C:
		}
		w.drain()
		if stopping {
			return
		}
	}
}

// drain writes buffers until the backlog is empty or a write failed.
func (w *Writer) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.buf) > 0 && w.err == nil {
		out := w.buf
		w.buf, w.spare, w.lines, w.inflight = w.spare[:0], nil, 0, len(out)
		w.mu.Unlock()
		err := writeLines(w.w, out)
		w.mu.Lock()
		w.written += int64(len(out))
		w.inflight = 0
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("record: write: %w", err)
		}
		if cap(out) <= maxSpareBuffer {
			w.spare = out[:0]
		}
		w.room.Broadcast()
	}
	if w.err != nil && len(w.buf) > 0 { // never written: count it done
		w.written += int64(len(w.buf))
		w.buf, w.lines = w.buf[:0], 0
	}
	w.room.Broadcast()
}

// writeLines writes b, whole lines, in writes of at most writeChunk bytes
// that each end at a line's end (a longer line goes in one write).
func writeLines(w io.Writer, b []byte) error {
	for len(b) > 0 {
		n := len(b)
		if n > writeChunk {
			if n = bytes.LastIndexByte(b[:writeChunk], '\n') + 1; n == 0 {
				if n = bytes.IndexByte(b, '\n') + 1; n == 0 {
					n = len(b)
				}
			}
		}
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
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

// Flush writes every line accepted so far to the underlying writer and
// returns once it is written.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.waitWrittenLocked(w.accepted)
	return w.err
}

// waitWrittenLocked wakes the background writer and waits until the first
// n accepted bytes are written (or failed). The caller holds mu.
func (w *Writer) waitWrittenLocked(n int64) {
	for w.written < n && w.err == nil {
		w.wake()
		w.room.Wait()
	}
}

// wake kicks the background writer without waiting.
func (w *Writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Close writes e as the end line (Type set to TypeEnd), writes the
// backlog out, and stops the background goroutine. It returns the first
// error the Writer met, and ErrClosed when called again.
func (w *Writer) Close(e End) error {
	e.Type = TypeEnd
	line, err := encodeLine(&e)
	if err != nil {
		return fmt.Errorf("record: encode end: %w", err)
	}
	return w.closeWith(line)
}

// closeWith accepts the lines (if any), writes the backlog out and stops
// the background writer.
func (w *Writer) closeWith(lines ...[]byte) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	for _, l := range lines {
		w.acceptLocked(l)
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	w.room.Broadcast() // writers waiting for room see closed
	return w.err
}

// write accepts one encoded line (with its newline), waiting for room in
// the backlog first when it is full. The line is copied before write
// returns.
func (w *Writer) write(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.err == nil && w.backlog() > 0 && w.backlog()+len(line) > w.maxBacklog {
		start := time.Now()
		for w.err == nil && !w.closed && w.backlog() > 0 && w.backlog()+len(line) > w.maxBacklog {
			w.wake()
			w.room.Wait()
		}
		w.stall += time.Since(start)
		if w.closed {
			return ErrClosed
		}
	}
	w.acceptLocked(line)
	return w.err
}

// backlog is the bytes accepted and not yet written. The caller holds mu.
func (w *Writer) backlog() int { return len(w.buf) + w.inflight }

// acceptLocked appends line to the backlog and wakes the background writer
// every FlushRecords lines. After a write error nothing
// more is accepted. The caller holds mu.
func (w *Writer) acceptLocked(line []byte) {
	if w.err != nil {
		return
	}
	w.buf = append(w.buf, line...)
	w.lines++
	w.accepted += int64(len(line))
	w.backlogMax = max(w.backlogMax, w.backlog())
	if w.lines >= FlushRecords {
		w.wake()
	}
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
