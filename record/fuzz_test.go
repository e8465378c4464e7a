package record

import (
	"bytes"
	"math"
	"net/http"
	"reflect"
	"testing"
)

// FuzzRead checks that Read never panics and that whatever it accepts
// survives decode → encode → decode unchanged (warnings aside).
func FuzzRead(f *testing.F) {
	f.Add(writeRun(f, 12, &End{Reason: ReasonCompleted, Scheduled: 12, Sent: 10}))
	f.Add(writeRun(f, 3, nil))
	f.Add([]byte(file(hdr, res0, res1, end, `{"type":"finding","id":"x","evidence":{"refs":["a:0"]}}`)))
	f.Add([]byte(file(hdr, res0) + res1[:30]))
	f.Add([]byte(file(`{"type":"header","format":1,"start":"2025-03-01T13:00:00+01:00","plan":{ "a" : [1, 2] },"policy":null}`,
		`{"type":"result","seq":0,"sched":0,"outcome":"response","headers":{},"arrival":-5}`,
		`{"type":"inference","TYPE":"inference","x":null}`)))
	f.Add([]byte(file(`{"type":"header","format":2}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if _, err := run.WriteTo(&out); err != nil {
			t.Fatalf("Read accepted a file it cannot write back: %v\n%s", err, data)
		}
		again, err := Read(&out)
		if err != nil {
			t.Fatalf("Read(WriteTo(Read(data))) = %v\nwritten:\n%s", err, out.Bytes())
		}
		run.Warnings, again.Warnings = nil, nil
		if !reflect.DeepEqual(run, again) {
			t.Fatalf("decode → encode → decode differs:\n%+v\n%+v\nwritten:\n%s", run, again, out.Bytes())
		}
	})
}

// FuzzResultEncoder holds appendResult to json.Encoder with
// SetEscapeHTML(false), byte for byte, over results the fuzzer builds
// member by member. shape picks the pointers and the header map's form:
// bit 0 a non-nil map, bits 1–2 name hk1 with a nil or one-value slice,
// bits 3–4 name hk2 with an empty or two-value slice, bit 5 Arrival,
// bit 6 Decision.
func FuzzResultEncoder(f *testing.F) {
	for i := range int64(12) {
		r := sampleResult(i)
		f.Add(TypeResult, r.Agent, r.Client, r.Src, r.Method, r.URL, r.Phase, string(r.Outcome), r.Err, r.ErrMsg,
			r.Seq, r.Sched, r.Sent, r.Wrote, r.TTFB, r.Done, r.Status,
			"Retry-After", "1", "Ratelimit", `"default";r=0;t=1`, int64(300_000), i+1, uint8(i*11))
	}
	for i, s := range awkwardStrings {
		f.Add(s, s, s, s, s, s, s, s, s, s,
			int64(-i), int64(math.MinInt64), int64(math.MaxInt64), int64(1), int64(-1), int64(0), -i,
			s, s, s+"x", s, int64(i), int64(-i), uint8(0x7f))
	}
	f.Fuzz(func(t *testing.T, typ, agent, client, src, method, url, phase, outcome, errClass, errMsg string,
		seq, sched, sent, wrote, ttfb, done int64, status int,
		hk1, hv1, hk2, hv2 string, arrival, decision int64, shape uint8) {
		r := Result{
			Type: typ, Seq: seq, Agent: agent, Client: client, Src: src, Method: method, URL: url, Phase: phase,
			Sched: sched, Sent: sent, Wrote: wrote, TTFB: ttfb, Done: done,
			Outcome: Outcome(outcome), Status: status, Err: errClass, ErrMsg: errMsg,
		}
		if shape&1 != 0 {
			r.Headers = http.Header{}
			if shape&2 != 0 {
				var vs []string // nil
				if shape&4 != 0 {
					vs = []string{hv1}
				}
				r.Headers[hk1] = vs
			}
			if shape&8 != 0 {
				vs := []string{} // empty, not nil
				if shape&16 != 0 {
					vs = []string{hv1, hv2}
				}
				r.Headers[hk2] = vs
			}
		}
		if shape&32 != 0 {
			r.Arrival = &arrival
		}
		if shape&64 != 0 {
			r.Decision = &decision
		}
		checkSameBytes(t, "fuzzed result", &r)
	})
}
