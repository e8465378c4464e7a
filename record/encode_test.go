package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// jsonLine is the specification appendResult is held to: r as a
// json.Encoder with HTML escaping off writes it.
func jsonLine(t testing.TB, r *Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatalf("json.Encoder: %v", err)
	}
	return buf.Bytes()
}

// checkSameBytes fails unless appendResult writes exactly jsonLine's bytes
// for r, after whatever dst already holds.
func checkSameBytes(t testing.TB, name string, r *Result) {
	t.Helper()
	want := jsonLine(t, r)
	prefix := []byte("prefix")
	got := appendResult(prefix, r)
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("%s: appendResult overwrote what dst held: %q", name, got)
	}
	if got = got[len("prefix"):]; !bytes.Equal(got, want) {
		t.Fatalf("%s:\nappendResult %q\njson         %q", name, got, want)
	}
}

// awkwardStrings hold every byte and character whose encoding is a special
// case of encoding/json's string escaping.
var awkwardStrings = func() []string {
	var controls strings.Builder
	for b := range 0x20 {
		controls.WriteByte(byte(b))
	}
	controls.WriteByte(0x7f)
	return []string{
		"",
		"plain",
		"<script>&amp;</script>",           // HTML escaping is off: as is
		"a\u2028b\u2029c",                  // escaped even with HTML escaping off
		"\u2028", "\u2029", "\u2027\u202a", // their neighbours are not
		controls.String(),
		"\b\f\n\r\t",
		`"quoted" \ back\\slash \u0041 \"`,
		"\xff", "\xc3", "a\xe2\x80", "\xe2\x80\xa8\xe2\x80", // invalid or truncated UTF-8
		"\xed\xa0\x80",     // an encoded surrogate: invalid
		"\xf4\x90\x80\x80", // above U+10FFFF: invalid
		"\xc0\xaf",         // overlong '/': invalid
		"\ufffd",           // the replacement character itself, valid
		"é 日本 😀 \U0010ffff",
		"mixed \x00<\u2028>\xff\"&\\\x7f end",
	}
}()

// fullResult is a result with every member set.
func fullResult() Result {
	arrival, decision := int64(-300_000), int64(17)
	return Result{
		Type: TypeResult, Seq: 42, Agent: "a1", Client: "k1", Src: "127.0.0.1:40000",
		Method: "GET", URL: "http://127.0.0.1:8080/api?q=1&x=<y>", Phase: "burst",
		Sched: 1_000, Sent: 1_010, Wrote: 1_020, TTFB: 2_000, Done: 3_000,
		Outcome: OutcomeResponse, Status: 429, Err: ErrOther, ErrMsg: "boom",
		Headers: http.Header{
			"Retry-After": {"1"},
			"Ratelimit":   {`"default";r=0;t=1`, "second line"},
			"ratelimit":   {"lower case, as HTTP/2 spells it"},
		},
		Arrival: &arrival, Decision: &decision,
	}
}

// resultCorpus is every case TestResultEncoderMatchesJSON compares.
func resultCorpus() []struct {
	name string
	r    Result
} {
	type tc = struct {
		name string
		r    Result
	}
	var cs []tc
	add := func(name string, edit func(*Result)) {
		r := fullResult()
		edit(&r)
		cs = append(cs, tc{name, r})
	}
	add("every member set", func(*Result) {})
	add("only the required members", func(r *Result) { *r = Result{} })
	for i := range int64(12) {
		cs = append(cs, tc{fmt.Sprintf("sample %d", i), sampleResult(i)})
	}

	// Each optional member left out on its own.
	add("no agent", func(r *Result) { r.Agent = "" })
	add("no client", func(r *Result) { r.Client = "" })
	add("no src", func(r *Result) { r.Src = "" })
	add("no phase", func(r *Result) { r.Phase = "" })
	add("no sent", func(r *Result) { r.Sent = 0 })
	add("no wrote", func(r *Result) { r.Wrote = 0 })
	add("no ttfb", func(r *Result) { r.TTFB = 0 })
	add("no done", func(r *Result) { r.Done = 0 })
	add("no status", func(r *Result) { r.Status = 0 })
	add("no err", func(r *Result) { r.Err = "" })
	add("no err_msg", func(r *Result) { r.ErrMsg = "" })
	add("no headers (nil)", func(r *Result) { r.Headers = nil })
	add("no headers (empty map)", func(r *Result) { r.Headers = http.Header{} })
	add("no arrival", func(r *Result) { r.Arrival = nil })
	add("no decision", func(r *Result) { r.Decision = nil })
	// Required members at their zero value are still written.
	add("empty required strings", func(r *Result) { r.Type, r.Method, r.URL, r.Outcome = "", "", "", "" })
	add("zero seq and sched", func(r *Result) { r.Seq, r.Sched = 0, 0 })
	add("pointers to zero", func(r *Result) { r.Arrival, r.Decision = new(int64), new(int64) })

	// Header shapes.
	add("nil value slice", func(r *Result) { r.Headers = http.Header{"X": nil} })
	add("empty value slice", func(r *Result) { r.Headers = http.Header{"X": {}} })
	add("nil, empty and full", func(r *Result) { r.Headers = http.Header{"B": nil, "A": {}, "C": {"1", "", "3"}} })
	add("empty name", func(r *Result) { r.Headers = http.Header{"": {"v"}} })
	add("names in byte order", func(r *Result) {
		r.Headers = http.Header{"b": {"1"}, "B": {"2"}, "a": {"3"}, "A-": {"4"}, "A": {"5"}, "\xff": {"6"}, "é": {"7"}, "\u2028": {"8"}}
	})
	add("more names than the stack holds", func(r *Result) {
		r.Headers = http.Header{}
		for i := range 3 * maxStackHeaders {
			r.Headers[fmt.Sprintf("X-%03d", (i*37)%(3*maxStackHeaders))] = []string{fmt.Sprint(i)}
		}
	})

	// Integers at their extremes.
	extremes := []int64{-1, 1, math.MinInt64, math.MaxInt64, -9_007_199_254_740_993, 1 << 53}
	for _, n := range extremes {
		add(fmt.Sprintf("int64s %d", n), func(r *Result) {
			r.Seq, r.Sched, r.Sent, r.Wrote, r.TTFB, r.Done = n, n, n, n, n, n
			r.Arrival, r.Decision = &n, &n
		})
	}
	for _, n := range []int{-1, math.MinInt, math.MaxInt, 999} {
		add(fmt.Sprintf("status %d", n), func(r *Result) { r.Status = n })
	}

	// Every awkward string in every string the line holds.
	for i, s := range awkwardStrings {
		for _, f := range []struct {
			name string
			set  func(*Result)
		}{
			{"type", func(r *Result) { r.Type = s }},
			{"agent", func(r *Result) { r.Agent = s }},
			{"client", func(r *Result) { r.Client = s }},
			{"src", func(r *Result) { r.Src = s }},
			{"method", func(r *Result) { r.Method = s }},
			{"url", func(r *Result) { r.URL = "http://127.0.0.1/" + s + "?q=" + s }},
			{"phase", func(r *Result) { r.Phase = s }},
			{"outcome", func(r *Result) { r.Outcome = Outcome(s) }},
			{"err", func(r *Result) { r.Err = s }},
			{"err_msg", func(r *Result) { r.ErrMsg = s }},
			{"header name", func(r *Result) { r.Headers[s] = []string{"v"} }},
			{"header value", func(r *Result) { r.Headers["X-Awkward"] = []string{s, "<>&", s} }},
		} {
			add(fmt.Sprintf("awkward string %d in %s", i, f.name), f.set)
		}
	}
	return cs
}

// TestResultEncoderMatchesJSON holds appendResult to json.Encoder with
// SetEscapeHTML(false), byte for byte, over a corpus with every optional
// member set and unset and every special case of string escaping.
func TestResultEncoderMatchesJSON(t *testing.T) {
	for _, c := range resultCorpus() {
		checkSameBytes(t, c.name, &c.r)
	}
}

// TestResultEncoderKnowsEveryField fills every field of Result by
// reflection, so that a field added to Result without a line in
// appendResult fails here, whatever the corpus holds.
func TestResultEncoderKnowsEveryField(t *testing.T) {
	var r Result
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			p.Elem().SetInt(int64(i + 1))
			f.Set(p)
		case reflect.Map:
			f.Set(reflect.ValueOf(http.Header{"K": {"v"}}))
		default:
			t.Fatalf("Result.%s is a %s, which this test (and appendResult?) does not know", v.Type().Field(i).Name, f.Kind())
		}
	}
	checkSameBytes(t, "every field filled by reflection", &r)
}

// TestAppendString states the escaping rules directly, so the corpus test
// is not the only reader of them.
func TestAppendString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{`<a href="x">&`, `"<a href=\"x\">&"`},
		{`C:\dir`, `"C:\\dir"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"a\xffb", `"a\ufffdb"`},
		{"\xe2\x80", `"\ufffd\ufffd"`},
		{"\ufffd", "\"\ufffd\""},
		{"日本", `"日本"`},
	} {
		if got := string(appendString(nil, c.in)); got != c.want {
			t.Errorf("appendString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// TestAppendResultAllocs: appending into a buffer with room allocates
// nothing, headers (up to maxStackHeaders names) included.
func TestAppendResultAllocs(t *testing.T) {
	r := fullResult()
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = appendResult(buf[:0], &r) }); n != 0 {
		t.Errorf("appendResult allocates %v times per line into a reused buffer, want 0", n)
	}
}
