package verify_test

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

func ExampleParseDraftPolicy() {
	rules, err := verify.ParseDraftPolicy(`"api";q=100;w=60, "daily";q=1000;w=86400`)
	if err != nil {
		panic(err)
	}
	p := verify.Policy{Version: verify.PolicyVersion, Endpoints: rules}.Normalize()
	for _, e := range p.Endpoints {
		fmt.Println(e.String())
	}
	// Output:
	// 100 in any 1m0s
	// 1000 in any 24h0m0s
}

// Arrivals are known only within [lo, hi]: six requests answered within
// 10 ms each, the last 1.99 s after the first.
func ExampleMaxInWindow() {
	ms := int64(time.Millisecond)
	iv := []verify.Interval{{0, 10 * ms}, {1 * ms, 11 * ms}, {2 * ms, 12 * ms}, {3 * ms, 13 * ms}, {4 * ms, 14 * ms}, {1990 * ms, 2000 * ms}}
	certain, possible := verify.MaxInWindow(iv, int64(2*time.Second))
	fmt.Println("certainly within 2s:", certain.Count)
	fmt.Println("possibly within 2s:", possible.Count)
	// Output:
	// certainly within 2s: 5
	// possibly within 2s: 6
}

func ExampleAnalyze() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := &record.Run{Header: record.Header{Start: start, Agent: "a1"}, End: &record.End{Reason: record.ReasonCompleted}}
	for i := range 6 { // six accepted, 100 ms apart
		at := int64(i) * int64(100*time.Millisecond)
		run.Results = append(run.Results, record.Result{Seq: int64(i), Agent: "a1", Method: "GET", URL: "http://api.example/x",
			Sched: at, Sent: at, Wrote: at, TTFB: at + 1e6, Done: at + 1e6, Outcome: record.OutcomeResponse, Status: 200})
	}
	p, err := verify.ParsePolicyFile([]byte("version: 1\nendpoints: [{limit: 5, window: 2s, headers: none}]\n"), "policy.yaml")
	if err != nil {
		panic(err)
	}
	rep := verify.Analyze(record.Merge(run), p, verify.Options{Tool: "rlprobe example"})
	fmt.Println(rep.Verdict)
	for _, f := range rep.Findings {
		fmt.Println(f.Severity, f.Certainty, f.ID, f.Evidence.Refs)
	}
	// Output:
	// fail
	// error certain window-limit-exceeded [a1:0 a1:1 a1:2 a1:3 a1:4 a1:5]
}
