package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := sampleHeader("eu-1")
	h.Start = t0.In(time.FixedZone("CET", 3600)) // written and read in UTC
	h.Policy = json.RawMessage(`{"limit":10,"window":"1m"}`)
	h.ClockOffsetNS, h.ClockUncertaintyNS = -1500, 300
	w, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	var want Run
	want.Header = h
	want.Header.Type, want.Header.Format, want.Header.Start = TypeHeader, FormatMajor, t0
	for i := range int64(40) {
		r := sampleResult(i)
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
		r.Type = TypeResult
		want.Results = append(want.Results, r)
	}
	finding := struct {
		ID   string   `json:"id"`
		Refs []string `json:"refs"`
	}{"window-limit-exceeded", []string{"eu-1:3", "eu-1:4"}}
	if err := w.WriteFinding(finding); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteInference(map[string]any{"algorithm": "token-bucket", "note": "a<b&c"}); err != nil {
		t.Fatal(err)
	}
	end := End{Reason: ReasonCompleted, Scheduled: 40, Sent: 36}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	end.Type = TypeEnd
	want.End = &end
	want.Findings = []json.RawMessage{json.RawMessage(`{"type":"finding","id":"window-limit-exceeded","refs":["eu-1:3","eu-1:4"]}`)}
	want.Inferences = []json.RawMessage{json.RawMessage(`{"type":"inference","algorithm":"token-bucket","note":"a<b&c"}`)}

	got, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("Read(written) =\n%+v\nwant\n%+v", got, &want)
	}
	if l := lines(buf.Bytes())[0]; !strings.HasPrefix(l, `{"type":"header","format":1,`) ||
		!strings.Contains(l, `"start":"2025-03-01T12:00:00.123456789Z"`) || !strings.Contains(l, `x=<y>`) {
		t.Errorf("header line = %s; want type and format first, start in UTC with ns, no HTML escaping", l)
	}
	// Writing the run read back and reading it again gives the same run.
	var again bytes.Buffer
	n, err := got.WriteTo(&again)
	if err != nil || n != int64(again.Len()) {
		t.Fatalf("Run.WriteTo = %d, %v; want %d, nil", n, err, again.Len())
	}
	if got2, err := Read(&again); err != nil || !reflect.DeepEqual(got2, &want) {
		t.Errorf("Read(Run.WriteTo) = %+v, %v; want %+v", got2, err, &want)
	}
}

func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	f, err := Create(path, false)
	if err != nil {
		t.Fatalf("Create(new, false): %v", err)
	}
	f.WriteString("old\n")
	f.Close()

	if _, err := Create(path, false); err == nil {
		t.Fatal("Create(existing, false) succeeded, want an error")
	} else {
		if !errors.Is(err, fs.ErrExist) {
			t.Errorf("Create(existing, false) = %v, want it to wrap fs.ErrExist", err)
		}
		if want := "record: " + path + " exists; use --force or another --out"; err.Error() != want {
			t.Errorf("Create(existing, false) = %q, want %q", err, want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("refused Create changed the file to %q", b)
	}

	f, err = Create(path, true)
	if err != nil {
		t.Fatalf("Create(existing, true): %v", err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("Create(existing, true) left %q, want an empty file", b)
	}
	if _, err := Create(filepath.Join(path, "sub"), true); err == nil || !strings.HasPrefix(err.Error(), "record: ") {
		t.Errorf("Create(under a file) = %v, want a record: error", err)
	}
}

// TestCreateFree: a default record name already taken (another run in
// the same millisecond) gives the next free one, run-2.jsonl, run-3.jsonl,
// never touching the files there; concurrent callers each get a file of
// their own.
func TestCreateFree(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	for i, want := range []string{"run.jsonl", "run-2.jsonl", "run-3.jsonl"} {
		f, got, err := CreateFree(path)
		if err != nil {
			t.Fatalf("CreateFree #%d: %v", i+1, err)
		}
		fmt.Fprintf(f, "%d\n", i)
		f.Close()
		if got != filepath.Join(dir, want) {
			t.Errorf("CreateFree #%d = %s, want %s", i+1, got, want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "0\n" {
		t.Errorf("the first file now holds %q", b)
	}
	var wg sync.WaitGroup
	paths := make([]string, 8)
	for i := range paths {
		wg.Go(func() {
			f, p, err := CreateFree(filepath.Join(dir, "race.jsonl"))
			if err != nil {
				t.Error(err)
				return
			}
			f.Close()
			paths[i] = p
		})
	}
	wg.Wait()
	slices.Sort(paths)
	if len(slices.Compact(paths)) != 8 {
		t.Errorf("concurrent CreateFree shared names: %v", paths)
	}
	if _, _, err := CreateFree(filepath.Join(path, "sub.jsonl")); err == nil || errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateFree(under a file) = %v, want the error", err)
	}
}

// TestFlushInterval checks that a record reaches the file FlushInterval
// after it was written, not before.
func TestFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		w, err := NewWriter(&out, sampleHeader("a"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.String(), "\n"); n != 1 {
			t.Fatalf("after NewWriter the output has %d lines, want the header flushed", n)
		}
		w.WriteResult(sampleResult(0))
		time.Sleep(FlushInterval - time.Nanosecond)
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != 1 {
			t.Errorf("just before FlushInterval the output has %d lines, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != 2 {
			t.Errorf("at FlushInterval the output has %d lines, want 2", n)
		}
		// Idle ticks write nothing more; Close stops the flusher (or
		// synctest.Test would report it blocked).
		time.Sleep(10 * FlushInterval)
		if err := w.Close(End{Reason: ReasonCompleted}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.String(), "\n"); n != 3 {
			t.Errorf("after Close the output has %d lines, want 3", n)
		}
	})
}

// TestFlushRecords checks that the FlushRecords-th buffered record has the
// background writer write them all, with no time passing.
func TestFlushRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		w, err := NewWriter(&out, sampleHeader("a"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range int64(FlushRecords - 1) {
			w.WriteResult(sampleResult(i))
		}
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != 1 {
			t.Errorf("after %d results the output has %d lines, want 1", FlushRecords-1, n)
		}
		w.WriteResult(sampleResult(FlushRecords - 1))
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != FlushRecords+1 {
			t.Errorf("after %d results the output has %d lines, want %d", FlushRecords, n, FlushRecords+1)
		}
		w.Close(End{})
	})
}

// chunkWriter records every Write it gets.
type chunkWriter struct{ chunks [][]byte }

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.chunks = append(c.chunks, bytes.Clone(p))
	return len(p), nil
}

func TestWriterWritesWholeLines(t *testing.T) {
	var out chunkWriter
	w, err := NewWriter(&out, sampleHeader("a"))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3000) // ~44 results fill the buffer
	huge := strings.Repeat("y", writeChunk+1)
	for i := range int64(600) {
		r := sampleResult(i)
		r.ErrMsg = big
		if i == 300 {
			r.ErrMsg = huge
		}
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close(End{})
	if len(out.chunks) < 10 {
		t.Fatalf("got %d writes, want the buffer to fill many times", len(out.chunks))
	}
	for i, c := range out.chunks {
		if c[len(c)-1] != '\n' {
			t.Errorf("write %d of %d bytes ends in %q, want a whole line", i, len(c), c[len(c)-1])
		}
	}
}

func TestConcurrentWriters(t *testing.T) {
	const goroutines, each = 8, 400
	var out syncBuffer
	w, err := NewWriter(&out, sampleHeader("a"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range int64(goroutines) {
		wg.Go(func() {
			for i := range int64(each) {
				if err := w.WriteResult(sampleResult(g*each + i)); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					w.Flush()
					w.WriteFinding(map[string]int64{"g": g, "i": i})
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(End{Reason: ReasonCompleted, Scheduled: goroutines * each}); err != nil {
		t.Fatal(err)
	}
	run, err := Read(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != goroutines*each || len(run.Findings) != goroutines*each/100 {
		t.Fatalf("read %d results and %d findings, want %d and %d",
			len(run.Results), len(run.Findings), goroutines*each, goroutines*each/100)
	}
	seen := make(map[int64]bool)
	for _, r := range run.Results {
		want := sampleResult(r.Seq)
		want.Type = TypeResult
		if seen[r.Seq] || !reflect.DeepEqual(r, want) {
			t.Fatalf("result %+v is a duplicate or differs from %+v", r, want)
		}
		seen[r.Seq] = true
	}
}

// failWriter accepts ok writes, then fails.
type failWriter struct{ ok int }

var errDisk = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.ok == 0 {
		return 0, errDisk
	}
	f.ok--
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	if _, err := NewWriter(&failWriter{}, sampleHeader("a")); !errors.Is(err, errDisk) {
		t.Errorf("NewWriter(failing) = %v, want %v", err, errDisk)
	}

	w, err := NewWriter(&failWriter{ok: 1}, sampleHeader("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteResult(sampleResult(0)); err != nil {
		t.Fatalf("a buffered WriteResult = %v, want nil", err)
	}
	if err := w.Flush(); !errors.Is(err, errDisk) || !strings.HasPrefix(err.Error(), "record: write: ") {
		t.Errorf("Flush = %v, want record: write: %v", err, errDisk)
	}
	if err := w.WriteResult(sampleResult(1)); !errors.Is(err, errDisk) {
		t.Errorf("WriteResult after a failed flush = %v, want the sticky %v", err, errDisk)
	}
	if err := w.Close(End{}); !errors.Is(err, errDisk) {
		t.Errorf("Close = %v, want the sticky %v", err, errDisk)
	}
	for name, err := range map[string]error{
		"WriteResult":    w.WriteResult(sampleResult(2)),
		"WriteFinding":   w.WriteFinding(map[string]int{}),
		"WriteInference": w.WriteInference(map[string]int{}),
		"Flush":          w.Flush(),
		"Close":          w.Close(End{}),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestEncodeDoc(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		doc  any
		want string // "" when refused
	}{
		{"struct gets a type first", TypeFinding, struct {
			ID string `json:"id"`
		}{"x"}, `{"type":"finding","id":"x"}`},
		{"map keys sorted", TypeInference, map[string]int{"b": 2, "a": 1}, `{"type":"inference","a":1,"b":2}`},
		{"empty object", TypeFinding, map[string]int{}, `{"type":"finding"}`},
		{"raw is compacted", TypeFinding, json.RawMessage("{ \"id\" :\n \"x\" }"), `{"type":"finding","id":"x"}`},
		{"own matching type kept", TypeFinding, json.RawMessage(`{"id":"x","type":"finding"}`), `{"id":"x","type":"finding"}`},
		{"type matched like encoding/json", TypeFinding, json.RawMessage(`{"Type":"finding"}`), `{"Type":"finding"}`},
		{"last type wins", TypeFinding, json.RawMessage(`{"type":"finding","TYPE":"result"}`), ""},
		{"other type refused", TypeInference, json.RawMessage(`{"type":"finding"}`), ""},
		{"null type refused", TypeFinding, json.RawMessage(`{"type":null}`), ""},
		{"array refused", TypeFinding, []int{1}, ""},
		{"string refused", TypeFinding, "x", ""},
		{"nil refused", TypeFinding, nil, ""},
		{"bytes refused", TypeFinding, []byte(`{}`), ""},
		{"unmarshalable refused", TypeFinding, map[string]any{"f": func() {}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeDoc(tt.typ, tt.doc)
			if tt.want == "" {
				if err == nil || !strings.HasPrefix(err.Error(), "record: ") {
					t.Errorf("encodeDoc(%q, %v) = %s, %v; want a record: error", tt.typ, tt.doc, got, err)
				}
				return
			}
			if err != nil || string(got) != tt.want+"\n" {
				t.Errorf("encodeDoc(%q, %v) = %q, %v; want %q", tt.typ, tt.doc, got, err, tt.want+"\n")
			}
		})
	}
}

// gateWriter passes its first write (the header) and blocks every later
// one until gate is closed; then it writes to out.
type gateWriter struct {
	gate  chan struct{}
	calls int
	out   syncBuffer
}

func (g *gateWriter) Write(p []byte) (int, error) {
	if g.calls++; g.calls > 1 {
		<-g.gate
	}
	return g.out.Write(p)
}

// TestWriterBacklogBound: while the file does not take writes, the backlog
// grows to its bound and no further; the producer then waits (Stats
// counts the wait), and once the file takes writes again every line is
// written, in order: none is dropped.
func TestWriterBacklogBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateWriter{gate: make(chan struct{})}
		w, err := NewWriter(g, sampleHeader("a"))
		if err != nil {
			t.Fatal(err)
		}
		lineLen := len(appendResult(nil, &Result{Type: TypeResult, Seq: 5}))
		bound := 8 * lineLen
		w.SetMaxBacklog(bound)
		const n = 300
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range int64(n) {
				if err := w.WriteResult(Result{Seq: i}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		const blocked = 2 * time.Second
		time.Sleep(blocked) // the file blocks the whole time
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the producer wrote every line while the file took none")
		default:
		}
		if st := w.Stats(); st.BacklogMax > bound || st.BacklogMax < bound-2*lineLen {
			t.Errorf("largest backlog %d bytes, want at most the bound %d and near it", st.BacklogMax, bound)
		}
		close(g.gate)
		<-done
		if err := w.Close(End{Reason: ReasonCompleted}); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.Stall < blocked {
			t.Errorf("stall %v, want at least the %v the file blocked", st.Stall, blocked)
		}
		run, err := Read(strings.NewReader(g.out.String()))
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Results) != n {
			t.Fatalf("read %d results, want %d", len(run.Results), n)
		}
		for i, r := range run.Results {
			if r.Seq != int64(i) {
				t.Fatalf("result %d has seq %d: order lost", i, r.Seq)
			}
		}
	})
}

// TestWriterUnblocksOnError: a failing file releases a producer waiting
// for room with the error, not a hang.
func TestWriterUnblocksOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw := &failAfter{n: 1, gate: make(chan struct{})}
		w, err := NewWriter(fw, sampleHeader("a"))
		if err != nil {
			t.Fatal(err)
		}
		w.SetMaxBacklog(1)
		errs := make(chan error, 1)
		go func() {
			var err error
			for i := int64(0); err == nil && i < 100; i++ {
				err = w.WriteResult(Result{Seq: i})
			}
			errs <- err
		}()
		synctest.Wait()
		close(fw.gate)
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("producer got %v, want the write error", err)
		}
		if err := w.Close(End{}); err == nil {
			t.Error("Close returned nil after a write error")
		}
	})
}

// failAfter passes n writes, then fails every write once gate is closed.
type failAfter struct {
	n    int
	gate chan struct{}
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return len(p), nil
	}
	<-f.gate
	return 0, errors.New("disk full")
}
