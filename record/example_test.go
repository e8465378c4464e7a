package record_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

func ExampleWriter() {
	var file bytes.Buffer // in a real run: f, err := record.Create(path, force)
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	w, err := record.NewWriter(&file, record.Header{
		Tool: "rlprobe v1.0.0", Start: start, Agent: "a1",
		Targets: []string{"http://127.0.0.1:8080/"},
	})
	if err != nil {
		panic(err)
	}
	// Many goroutines may call WriteResult at once.
	w.WriteResult(record.Result{
		Seq: 0, Method: "GET", URL: "http://127.0.0.1:8080/",
		Sched: 1_000_000, Sent: 1_050_000, Wrote: 1_060_000, TTFB: 2_000_000, Done: 2_100_000,
		Outcome: record.OutcomeResponse, Status: 429,
		Headers: http.Header{"Retry-After": {"1"}},
	})
	w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: 1, Sent: 1})
	fmt.Print(file.String())
	// Output:
	// {"type":"header","format":1,"tool":"rlprobe v1.0.0","go":"","start":"2025-03-01T12:00:00Z","agent":"a1","host":"","targets":["http://127.0.0.1:8080/"],"seed":0,"clock_offset_ns":0,"clock_uncertainty_ns":0,"captured":null}
	// {"type":"result","seq":0,"method":"GET","url":"http://127.0.0.1:8080/","sched":1000000,"sent":1050000,"wrote":1060000,"ttfb":2000000,"done":2100000,"outcome":"response","status":429,"headers":{"Retry-After":["1"]}}
	// {"type":"end","reason":"completed","scheduled":1,"sent":1}
}

func ExampleRead() {
	// A file whose writer was killed mid-line.
	file := `{"type":"header","format":1,"start":"2025-03-01T12:00:00Z","agent":"a1"}
{"type":"result","seq":0,"method":"GET","url":"http://h/","sched":0,"sent":10,"outcome":"response","status":200}
{"type":"result","seq":1,"method":"GET","url":"http://h/","sched":500,"sent":510,"outcome":"response","status":429}
{"type":"result","seq":2,"meth`
	run, err := record.Read(strings.NewReader(file))
	if err != nil {
		panic(err)
	}
	for _, r := range run.Results {
		fmt.Println(record.Ref(r), r.Status, "sent at", run.Header.Start.Add(time.Duration(r.Sent)).Format(time.RFC3339Nano))
	}
	for _, w := range run.Warnings {
		fmt.Println(w)
	}
	// Output:
	// :0 200 sent at 2025-03-01T12:00:00.00000001Z
	// :1 429 sent at 2025-03-01T12:00:00.00000051Z
	// record: line 4: truncated last line ignored (its writer was probably killed)
	// record: no end line: the run was cut short
}

func ExampleMerge() {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// Agent eu's clock is 3 ms ahead of the target's; us's is exact.
	eu := &record.Run{
		Header:  record.Header{Agent: "eu", Start: start, ClockOffsetNS: 3e6, ClockUncertaintyNS: 5e5},
		Results: []record.Result{{Seq: 0, Sent: 5e6}, {Seq: 1, Sent: 9e6}},
	}
	us := &record.Run{
		Header:  record.Header{Agent: "us", Start: start},
		Results: []record.Result{{Seq: 0, Sent: 4e6}},
	}
	m := record.Merge(eu, us)
	fmt.Println("start", m.Start.Format(time.RFC3339Nano))
	for _, r := range m.Results {
		fmt.Printf("%s sent %v after start, ±%v\n", record.Ref(r), time.Duration(r.Sent), time.Duration(m.Uncertainty[r.Agent]))
	}
	// Output:
	// start 2025-03-01T11:59:59.997Z
	// eu:0 sent 5ms after start, ±500µs
	// us:0 sent 7ms after start, ±0s
	// eu:1 sent 9ms after start, ±500µs
}

func ExampleRedactor() {
	r := record.NewRedactor([]string{"X-Tenant-Key"}, []string{"sig"})
	fmt.Println(r.URL("https://api.example.com/v1?page=2&sig=0a1b2c"))
	h := r.Header(http.Header{"Authorization": {"Bearer secret"}, "Accept": {"*/*"}})
	fmt.Println(h.Get("Authorization"), h.Get("Accept"))
	// Output:
	// https://api.example.com/v1?page=2&sig=redacted:sha256:c6cb1e1a
	// redacted:sha256:bffde204 */*
}
