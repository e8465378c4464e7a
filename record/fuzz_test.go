package record

import (
	"bytes"
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
