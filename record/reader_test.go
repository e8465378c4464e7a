package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const (
	hdr  = `{"type":"header","format":1,"tool":"t","start":"2025-03-01T12:00:00Z","agent":"a"}`
	res0 = `{"type":"result","seq":0,"method":"GET","url":"u","sched":0,"outcome":"response","status":200}`
	res1 = `{"type":"result","seq":1,"method":"GET","url":"u","sched":5,"outcome":"response","status":429}`
	end  = `{"type":"end","reason":"completed","scheduled":2,"sent":2}`
)

func file(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestReadTolerates(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		results  []int64 // seqs read
		findings int
		ended    bool
		warnings []string // substrings, one per warning, in order
	}{
		{"complete file", file(hdr, res0, res1, end), []int64{0, 1}, 0, true, nil},
		{"truncated last line", file(hdr, res0) + res1[:40], []int64{0},
			0, false, []string{"line 3: truncated last line ignored", "no end line"}},
		{"truncated end line", file(hdr, res0, res1) + end[:10], []int64{0, 1},
			0, false, []string{"line 4: truncated last line ignored", "no end line"}},
		{"complete last line without newline", file(hdr, res0, res1) + end, []int64{0, 1}, 0, true, nil},
		{"no end line", file(hdr, res0), []int64{0}, 0, false, []string{"no end line: the run was cut short"}},
		{"header only", file(hdr), nil, 0, false, []string{"no end line"}},
		{"blank lines, CRLF and a BOM", "\ufeff" + hdr + "\r\n\r\n" + res0 + "\r\n  \n" + end + "\r\n", []int64{0}, 0, true, nil},
		{"findings and inferences after end", file(hdr, res0, end,
			`{"type":"finding","id":"x"}`, `{"type":"inference","algorithm":"none"}`, `{"type":"finding","id":"y"}`),
			[]int64{0}, 2, true, nil},
		{"unknown type skipped", file(hdr, res0, `{"type":"note","x":1}`, end), []int64{0},
			0, true, []string{`line 3: unknown type "note" skipped`}},
		{"result after end", file(hdr, res0, end, res1), []int64{0, 1}, 0, true, []string{"line 4: a result after the end line"}},
		{"second end", file(hdr, res0, end, end), []int64{0}, 0, true, []string{"line 4: a second end line"}},
		{"result type not first", file(hdr, `{"seq":7,"type":"result","method":"GET","url":"u","sched":0,"outcome":"response"}`, end),
			[]int64{7}, 0, true, nil},
		{"unknown fields ignored", file(`{"type":"header","format":1,"start":"2025-03-01T12:00:00Z","new":true}`,
			`{"type":"result","seq":3,"sched":0,"outcome":"response","tls":{"v":"1.3"}}`, end), []int64{3}, 0, true, nil},
		{"line longer than the read buffer", file(hdr,
			`{"type":"result","seq":0,"sched":0,"outcome":"error","err_msg":"`+strings.Repeat("e", 3*readBufferSize)+`"}`, end),
			[]int64{0}, 0, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time, so lines straddle every read.
			run, err := Read(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != nil {
				t.Fatalf("Read = %v, want no error", err)
			}
			var seqs []int64
			for _, r := range run.Results {
				seqs = append(seqs, r.Seq)
			}
			if !reflect.DeepEqual(seqs, tt.results) {
				t.Errorf("Read results have seqs %v, want %v", seqs, tt.results)
			}
			if len(run.Findings) != tt.findings {
				t.Errorf("Read has %d findings, want %d", len(run.Findings), tt.findings)
			}
			if (run.End != nil) != tt.ended {
				t.Errorf("Read End = %v, want present %v", run.End, tt.ended)
			}
			if len(run.Warnings) != len(tt.warnings) {
				t.Fatalf("Read warnings = %q, want %d like %q", run.Warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(run.Warnings[i], "record: ") || !strings.Contains(run.Warnings[i], w) {
					t.Errorf("Read warning %d = %q, want it to contain %q", i, run.Warnings[i], w)
				}
			}
		})
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string // the error's message
		line   int    // the *LineError's line, 0 when not a LineError
		format int    // the *FormatError's format, -1 when not a FormatError
	}{
		{"empty file", "", "record: empty file: no header", 0, -1},
		{"blank file", "\n\n", "record: empty file: no header", 0, -1},
		{"corrupt middle line", file(hdr, res0, `{"type":"result","seq":1,`, end),
			"record: line 3: unexpected end of JSON input", 3, -1},
		{"garbage middle line", file(hdr, res0, res1, "hello", end),
			"record: line 4: invalid character 'h' looking for beginning of value", 4, -1},
		{"wrong field type", file(hdr, `{"type":"result","seq":"one"}`, end),
			"record: line 2: json: cannot unmarshal string into Go struct field Result.seq of type int64", 2, -1},
		{"second header", file(hdr, res0, hdr), "record: line 3: a second header (were files concatenated? pass each file separately)", 3, -1},
		{"first line not a header", file(res0, end), "record: line 1: not a record file: the first line is not a header", 1, -1},
		{"not JSON at all", "GET / HTTP/1.1\nHost: x\n", "record: line 1: not a record file: the first line is not a header", 1, -1},
		{"truncated header", hdr[:30], "record: line 1: truncated header: the file holds no complete line", 1, -1},
		{"garbled header", file(`{"type":"header","format":1,"start":"yesterday"}`, end),
			`record: line 1: garbled header: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`, 1, -1},
		{"header start out of range", file(`{"type":"header","format":1,"start":"0000-01-01T00:00:00+01:00"}`),
			"record: line 1: header start -0001-12-31 23:00:00 +0000 UTC is out of range", 1, -1},
		{"unknown major format", file(`{"type":"header","format":2,"start":"2025-03-01T12:00:00Z"}`, res0),
			"record: format 2 is newer than this rlprobe reads (format 1); upgrade rlprobe", 0, 2},
		{"unknown major with another header shape", file(`{"type":"header","format":2,"start":{"unix":1}}`),
			"record: format 2 is newer than this rlprobe reads (format 1); upgrade rlprobe", 0, 2},
		{"no format", file(`{"type":"header","start":"2025-03-01T12:00:00Z"}`),
			"record: the header has no format; not a record file written by rlprobe", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := Read(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Read = %+v, nil; want error %q", run, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Read error = %q, want %q", err, tt.want)
			}
			var le *LineError
			if got := errors.As(err, &le); got != (tt.line > 0) || got && le.Line != tt.line {
				t.Errorf("Read error %#v: LineError %v, want line %d", err, got, tt.line)
			}
			var fe *FormatError
			if got := errors.As(err, &fe); got != (tt.format >= 0) || got && fe.Format != tt.format {
				t.Errorf("Read error %#v: FormatError %v, want format %d", err, got, tt.format)
			}
		})
	}
}

func TestReaderSkipsCorruptLines(t *testing.T) {
	in := file(hdr, res0, "{oops", res1, end, `{"type":"finding","id":"x"}`)
	rd := NewReader(strings.NewReader(in))
	type step struct {
		typ  string
		line int
		err  string
	}
	want := []step{
		{TypeHeader, 1, ""},
		{TypeResult, 2, ""},
		{"", 0, "record: line 3: invalid character 'o' looking for beginning of object key string"},
		{TypeResult, 4, ""},
		{TypeEnd, 5, ""},
		{TypeFinding, 6, ""},
		{"", 0, "EOF"},
		{"", 0, "EOF"}, // again
	}
	for i, w := range want {
		l, err := rd.Next()
		got := step{l.Type, l.Number, ""}
		if err != nil {
			got.err = err.Error()
		}
		if got != w {
			t.Errorf("Next #%d = %+v, want %+v", i+1, got, w)
		}
	}
}

func TestReaderValues(t *testing.T) {
	in := file(hdr, res1, end, `{ "type" : "finding", "id" : "x" }`)
	rd := NewReader(strings.NewReader(in))
	var got []any
	for {
		l, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l.Value)
	}
	if len(got) != 4 {
		t.Fatalf("read %d values, want 4", len(got))
	}
	if h, ok := got[0].(Header); !ok || h.Agent != "a" || h.Format != 1 {
		t.Errorf("header value = %#v", got[0])
	}
	if r, ok := got[1].(Result); !ok || r.Seq != 1 || r.Status != 429 || r.Type != TypeResult {
		t.Errorf("result value = %#v", got[1])
	}
	if e, ok := got[2].(End); !ok || e.Reason != ReasonCompleted || e.Scheduled != 2 {
		t.Errorf("end value = %#v", got[2])
	}
	if f, ok := got[3].(json.RawMessage); !ok || string(f) != `{"type":"finding","id":"x"}` {
		t.Errorf("finding value = %#v, want compacted raw JSON", got[3])
	}
}

// errReader fails after its data.
type errReader struct{ r io.Reader }

var errBroken = errors.New("broken pipe")

func (e errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errBroken
	}
	return n, err
}

func TestReadErrors(t *testing.T) {
	_, err := Read(errReader{strings.NewReader(file(hdr, res0))})
	if !errors.Is(err, errBroken) || !strings.HasPrefix(err.Error(), "record: read: ") {
		t.Errorf("Read(failing) = %v, want record: read: %v", err, errBroken)
	}
	const max = 3*readBufferSize + 10
	finding := func(n int) string {
		s := `{"type":"finding","x":"`
		return s + strings.Repeat("x", n-len(s)-2) + `"}`
	}
	long := file(hdr, finding(max), res0, finding(max+1), end) + finding(max+1)
	rd := NewReader(strings.NewReader(long))
	rd.maxLine = max
	var errs []string
	n := 0
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
		n++
	}
	want := []string{"record: line 4: line longer than 64 MiB", "record: line 6: line longer than 64 MiB"}
	if !reflect.DeepEqual(errs, want) || n != 6 {
		t.Errorf("reading overlong lines: %d steps, errors %q; want 6 steps, errors %q", n, errs, want)
	}
}

func TestReadNormalises(t *testing.T) {
	in := file(`{"type":"header","format":1,"start":"2025-03-01T13:00:00+01:00","plan":{ "a" : [1, 2] },"policy":null}`,
		`{"type":"result","seq":0,"sched":0,"outcome":"response","headers":{}}`)
	run, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	h := run.Header
	if h.Start.Location() != time.UTC || !h.Start.Equal(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("Start = %v, want 12:00 UTC", h.Start)
	}
	if string(h.Plan) != `{"a":[1,2]}` || h.Policy != nil {
		t.Errorf("Plan, Policy = %s, %q; want compacted and nil", h.Plan, h.Policy)
	}
	if run.Results[0].Headers != nil {
		t.Errorf("empty headers read as %#v, want nil", run.Results[0].Headers)
	}
	if !bytes.Equal(writeRun(t, 0, &End{}), writeRun(t, 0, &End{})) {
		t.Error("writing is not deterministic")
	}
}
