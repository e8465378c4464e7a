package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes is the longest line a reader accepts, in bytes; a longer
// line is reported as corrupt.
const MaxLineBytes = 64 << 20

// readBufferSize is the reader's buffer size; longer lines are assembled in
// a growing buffer.
const readBufferSize = 256 << 10

// FormatError reports a record file whose header names a major format this
// package does not read. The CLI maps it to exit code 2.
type FormatError struct {
	Format int // the header's format; 0 when absent
}

// Error says which format the file has and what to do about it.
func (e *FormatError) Error() string {
	switch {
	case e.Format == 0:
		return "record: the header has no format; not a record file written by rlprobe"
	case e.Format > FormatMajor:
		return fmt.Sprintf("record: format %d is newer than this rlprobe reads (format %d); upgrade rlprobe", e.Format, FormatMajor)
	default:
		return fmt.Sprintf("record: format %d is not one this rlprobe reads (format %d)", e.Format, FormatMajor)
	}
}

// LineError reports a line of a record file that cannot be read. Its
// message names the line: "record: line 17: ...".
type LineError struct {
	Line int   // 1-based line number
	Err  error // what is wrong with it
}

// Error returns "record: line N: " and the cause.
func (e *LineError) Error() string { return fmt.Sprintf("record: line %d: %v", e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// Line is one record read by a Reader.
type Line struct {
	Number int    // 1-based line number in the file
	Type   string // TypeHeader, TypeResult, TypeEnd, TypeFinding or TypeInference
	// Value is the decoded line: a Header, Result or End value for those
	// types, and for findings and inferences the line's JSON object,
	// compacted, "type" member included, as a json.RawMessage the caller
	// owns.
	Value any
}

// Run is a whole record file as Read returns it.
type Run struct {
	Header  Header
	Results []Result // in file order (completion order)
	// Findings and Inferences are the finding and inference lines, in file
	// order, compacted, each with its "type" member.
	Findings   []json.RawMessage
	Inferences []json.RawMessage
	End        *End     // nil when the file has no end line (cut short)
	Warnings   []string // what the reader tolerated, one sentence each
}

// Read reads a whole record file (see Reader for what it tolerates). It
// fails on a missing or garbled header, an unknown major format
// ([*FormatError]), a corrupt line other than the last ([*LineError]), and
// a read error.
func Read(r io.Reader) (*Run, error) {
	rd := NewReader(r)
	run := new(Run)
	// Results are decoded into chunks, then copied once into one slice:
	// growing a single slice would allocate and copy about five times the
	// final size.
	var chunks [][]Result
	chunk := make([]Result, 0, 256)
	total := 0
	for {
		if len(chunk) == cap(chunk) {
			chunks = append(chunks, chunk)
			chunk = make([]Result, 0, min(2*cap(chunk), 64<<10))
		}
		chunk = chunk[:len(chunk)+1]
		l, err := rd.next(&chunk[len(chunk)-1])
		if l.Type != TypeResult || err != nil {
			chunk = chunk[:len(chunk)-1]
		} else {
			total++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch v := l.Value.(type) {
		case Header:
			run.Header = v
		case End:
			run.End = &v
		case json.RawMessage:
			if l.Type == TypeFinding {
				run.Findings = append(run.Findings, v)
			} else {
				run.Inferences = append(run.Inferences, v)
			}
		}
	}
	if total > 0 {
		run.Results = make([]Result, 0, total)
		for _, c := range append(chunks, chunk) {
			run.Results = append(run.Results, c...)
		}
	}
	run.Warnings = rd.Warnings()
	return run, nil
}

// A Reader reads a record file line by line, for files too large to hold
// as a Run. Lines may be of any length up to MaxLineBytes.
//
// It tolerates what a killed or older-minor writer leaves: blank lines, a
// truncated last line, lines of an unknown type (skipped), results after the
// end line and a missing end line; each is noted in Warnings. It refuses a
// missing or garbled header and an unknown major format. A Reader is not
// safe for concurrent use.
type Reader struct {
	br       *bufio.Reader
	maxLine  int    // MaxLineBytes; smaller in tests
	n        int    // number of the last line read
	buf      []byte // assembles lines longer than the bufio buffer
	header   bool   // the header was read
	ended    bool   // an end line was read
	err      error  // terminal error, returned by every later Next
	warnings []string
	fast     fastDecoder
}

// NewReader returns a Reader of the record file r.
func NewReader(r io.Reader) *Reader {
	return &Reader{
		br:      bufio.NewReaderSize(r, readBufferSize),
		maxLine: MaxLineBytes,
		fast:    fastDecoder{intern: make(interner)},
	}
}

// Warnings returns what the Reader has tolerated so far, one sentence per
// event, each naming its line.
func (r *Reader) Warnings() []string { return append([]string(nil), r.warnings...) }

// Next returns the next line; the first is always the header. At the end
// of the file it returns io.EOF. A corrupt line gives a [*LineError] and the
// caller may call Next again to skip it; a missing or garbled header, a
// [*FormatError] and read errors are final: Next returns them again.
func (r *Reader) Next() (Line, error) {
	return r.next(nil)
}

// next is Next, decoding a result into dst when dst is not nil (then
// Line.Value is nil for a result).
func (r *Reader) next(dst *Result) (Line, error) {
	if r.err != nil {
		return Line{}, r.err
	}
	for {
		raw, terminated, err := r.readLine()
		var le *LineError
		if errors.As(err, &le) {
			return Line{}, le
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if !r.header {
					err = errors.New("record: empty file: no header")
				}
				r.finish()
			}
			r.err = err
			return Line{}, err
		}
		raw = bytes.TrimSpace(raw)
		if r.n == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\ufeff")) // a BOM some editors add
		}
		if len(raw) == 0 {
			continue
		}
		if !r.header {
			l, err := r.readHeader(raw, terminated)
			if err != nil {
				r.err = err
			}
			return l, err
		}
		l, err := r.decode(raw, dst)
		if err != nil {
			if !terminated && !json.Valid(raw) {
				r.warnings = append(r.warnings, fmt.Sprintf(
					"record: line %d: truncated last line ignored (its writer was probably killed)", r.n))
				r.finish()
				r.err = io.EOF
				return Line{}, io.EOF
			}
			return Line{}, &LineError{Line: r.n, Err: err}
		}
		if l.Type == "" {
			continue // an unknown type, noted
		}
		return l, nil
	}
}

// finish notes what a complete file would have had.
func (r *Reader) finish() {
	if r.header && !r.ended {
		r.warnings = append(r.warnings, "record: no end line: the run was cut short")
	}
}

// errLineTooLong is the error of a line longer than MaxLineBytes.
var errLineTooLong = fmt.Errorf("line longer than %d MiB", MaxLineBytes>>20)

// readLine reads the next line and increments r.n. It returns the line
// (valid until the next call) and whether it ended in a newline, io.EOF at
// the end of the input, a *LineError for an overlong line, or a read error.
func (r *Reader) readLine() (line []byte, terminated bool, err error) {
	r.buf = r.buf[:0]
	tooLong := false
	for {
		b, err := r.br.ReadSlice('\n')
		if !tooLong && len(r.buf)+len(b) > r.maxLine+len("\r\n") {
			tooLong = true
			r.buf = r.buf[:0]
		}
		switch {
		case err == nil:
			r.n++
			if !tooLong && len(r.buf)+len(bytes.TrimRight(b, "\r\n")) > r.maxLine {
				tooLong = true
			}
			if tooLong {
				return nil, true, &LineError{Line: r.n, Err: errLineTooLong}
			}
			if len(r.buf) == 0 {
				return b, true, nil
			}
			r.buf = append(r.buf, b...)
			return r.buf, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong {
				r.buf = append(r.buf, b...)
			}
		case errors.Is(err, io.EOF):
			if tooLong || len(r.buf)+len(b) > r.maxLine {
				r.n++
				return nil, false, &LineError{Line: r.n, Err: errLineTooLong}
			}
			r.buf = append(r.buf, b...)
			if len(r.buf) == 0 {
				return nil, false, io.EOF
			}
			r.n++
			return r.buf, false, nil
		default:
			return nil, false, fmt.Errorf("record: read: %w", err)
		}
	}
}

// readHeader decodes the first non-blank line, which must be a header of a
// known format.
func (r *Reader) readHeader(raw []byte, terminated bool) (Line, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.Type != TypeHeader {
		if !terminated && !json.Valid(raw) {
			return Line{}, &LineError{Line: r.n, Err: errors.New("truncated header: the file holds no complete line")}
		}
		return Line{}, &LineError{Line: r.n, Err: errors.New("not a record file: the first line is not a header")}
	}
	var h Header
	if err := json.Unmarshal(raw, &h); err != nil {
		// Tell a format we do not know from a header we cannot read.
		var f struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(raw, &f) == nil && f.Format != FormatMajor {
			return Line{}, &FormatError{Format: f.Format}
		}
		return Line{}, &LineError{Line: r.n, Err: fmt.Errorf("garbled header: %w", err)}
	}
	if h.Format != FormatMajor {
		return Line{}, &FormatError{Format: h.Format}
	}
	h.Start = h.Start.UTC()
	if y := h.Start.Year(); y < 0 || y > 9999 {
		return Line{}, &LineError{Line: r.n, Err: fmt.Errorf("header start %v is out of range", h.Start)}
	}
	var err error
	if h.Plan, err = compactRaw(h.Plan); err != nil {
		return Line{}, &LineError{Line: r.n, Err: err}
	}
	if h.Policy, err = compactRaw(h.Policy); err != nil {
		return Line{}, &LineError{Line: r.n, Err: err}
	}
	r.header = true
	return Line{Number: r.n, Type: TypeHeader, Value: h}, nil
}

// resultPrefix starts every result line this package writes.
var resultPrefix = []byte(`{"type":"result"`)

// decode decodes a line after the header. It returns a Line with an empty
// Type for a line of an unknown type (noting it), and the decoding error of
// a corrupt line.
func (r *Reader) decode(raw []byte, dst *Result) (Line, error) {
	if bytes.HasPrefix(raw, resultPrefix) {
		// The fast path: lines as this package writes them.
		res := dst
		if res == nil {
			res = new(Result)
		}
		*res = Result{}
		if r.fast.decodeResult(raw, res) && res.Type == TypeResult {
			return r.result(res, dst == nil), nil
		}
		*res = Result{}
		err := json.Unmarshal(raw, res)
		if err != nil {
			return Line{}, err
		}
		if res.Type == TypeResult {
			return r.result(res, dst == nil), nil
		}
	}
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Line{}, err
	}
	switch t.Type {
	case TypeResult:
		res := dst
		if res == nil {
			res = new(Result)
		}
		*res = Result{}
		if err := json.Unmarshal(raw, res); err != nil {
			return Line{}, err
		}
		return r.result(res, dst == nil), nil
	case TypeEnd:
		var e End
		if err := json.Unmarshal(raw, &e); err != nil {
			return Line{}, err
		}
		if r.ended {
			r.warnings = append(r.warnings, fmt.Sprintf("record: line %d: a second end line", r.n))
		}
		r.ended = true
		return Line{Number: r.n, Type: TypeEnd, Value: e}, nil
	case TypeFinding, TypeInference:
		doc, err := compactRaw(raw)
		if err != nil {
			return Line{}, err
		}
		return Line{Number: r.n, Type: t.Type, Value: doc}, nil
	case TypeHeader:
		return Line{}, errors.New("a second header (were files concatenated? pass each file separately)")
	default:
		r.warnings = append(r.warnings, fmt.Sprintf("record: line %d: unknown type %q skipped", r.n, t.Type))
		return Line{}, nil
	}
}

// result finishes a decoded result: it normalises it and, when boxed, puts
// it in Line.Value.
func (r *Reader) result(res *Result, boxed bool) Line {
	if len(res.Headers) == 0 {
		res.Headers = nil
	}
	if r.ended {
		r.warnings = append(r.warnings, fmt.Sprintf("record: line %d: a result after the end line", r.n))
	}
	l := Line{Number: r.n, Type: TypeResult}
	if boxed {
		l.Value = *res
	}
	return l
}

// compactRaw returns a compacted copy of raw, and nil for nil or a JSON
// null.
func compactRaw(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
