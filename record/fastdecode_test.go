package record

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// TestFastDecoderTakesWrittenResults checks that every result this package
// writes takes the fast path and decodes as encoding/json decodes it.
func TestFastDecoderTakesWrittenResults(t *testing.T) {
	odd := Result{
		Seq: -1, Agent: "ü", Method: "POST", URL: "http://h/?a=<b>&c", Sched: 0,
		Outcome: OutcomeError, Err: ErrOther, ErrMsg: "quote \" backslash \\ tab \t newline \n slash /",
		Headers: http.Header{"Ratelimit": {`"default";r=0;t=1`, ""}, "X-Empty": {}, "": nil},
		Arrival: new(int64), Decision: new(int64),
	}
	in := []Result{odd, {}}
	for i := range int64(30) {
		in = append(in, sampleResult(i))
	}
	d := fastDecoder{intern: make(interner)}
	for _, r := range in {
		r.Type = TypeResult
		line, err := encodeLine(&r)
		if err != nil {
			t.Fatal(err)
		}
		var fast, slow Result
		if !d.decodeResult(line, &fast) {
			t.Errorf("fast decoder refused %s", line)
			continue
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) || !reflect.DeepEqual(fast, r) {
			t.Errorf("fast decoder read %s as\n%#v\nwant\n%#v", line, fast, slow)
		}
	}
}

func TestFastDecoderDefers(t *testing.T) {
	// Valid JSON that encoding/json must decide, and invalid JSON.
	for _, line := range []string{
		`{"type":"result","Seq":1}`,                    // case-insensitive key
		`{"type":"result","seq":1,"seq":2}`,            // duplicate key
		`{"type":"result","x":1}`,                      // unknown key
		`{"type":"result","url":"\u0041"}`,             // \u escape
		`{"type":"result","url":"` + "\xff" + `"}`,     // invalid UTF-8
		`{"type":"result","seq":1.0}`,                  // fraction
		`{"type":"result","seq":1e2}`,                  // exponent
		`{"type":"result","seq":01}`,                   // leading zero
		`{"type":"result","seq":99999999999999999999}`, // overflow
		`{"type":"result","headers":{"A":[null]}}`,     // null element
		`{"type":"result","seq":"1"}`,                  // wrong type
		`{"type":"result",}`,                           // trailing comma
		`{"type":"result"} x`,                          // trailing data
		`{"type":"result"`,                             // truncated
		`{"type":"result","url":"a` + "\t" + `"}`,      // raw control character
	} {
		var r Result
		d := fastDecoder{intern: make(interner)}
		if d.decodeResult([]byte(line), &r) {
			t.Errorf("fast decoder accepted %s as %+v, want it to defer", line, r)
		}
	}
}

// FuzzDecodeResult checks that whatever the fast decoder accepts,
// encoding/json accepts and decodes the same way.
func FuzzDecodeResult(f *testing.F) {
	for i := range int64(12) {
		r := sampleResult(i)
		r.Type = TypeResult
		line, _ := encodeLine(&r)
		f.Add(line)
	}
	f.Add([]byte(`{"type":"result","seq":-0,"headers":null,"arrival":null,"status":null,"url":null}`))
	f.Add([]byte(` { "type" : "result" , "headers" : { "A" : [ ] , "A" : [ "x\/y" ] } } `))
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast, slow Result
		d := fastDecoder{intern: make(interner)}
		if !d.decodeResult(line, &fast) {
			return
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast decoder accepted %q, encoding/json says %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoding %q:\nfast %#v\njson %#v", line, fast, slow)
		}
	})
}
