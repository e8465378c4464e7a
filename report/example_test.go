package report_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/verify"
)

// A record file with three requests and a single finding line, rendered as
// a terminal table and as Markdown.
func Example() {
	var file bytes.Buffer
	w, _ := record.NewWriter(&file, record.Header{Tool: "rlprobe v1.0.0", Start: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Targets: []string{"http://127.0.0.1:8080/"}})
	for i, status := range []int{200, 200, 429} {
		sent := int64(i+1) * int64(time.Millisecond)
		w.WriteResult(record.Result{Seq: int64(i), Method: "GET", URL: "http://127.0.0.1:8080/", Sched: sent, Sent: sent,
			Wrote: sent + 1000, TTFB: sent + 500_000, Done: sent + 600_000, Outcome: record.OutcomeResponse, Status: status})
	}
	w.WriteFinding(verify.Finding{ID: "retry-after-missing", Severity: "warning", Certainty: "certain", Check: "retry-after",
		Endpoint: "/", Message: "1 rejection carried no Retry-After"})
	w.Close(record.End{Reason: record.ReasonCompleted, Scheduled: 3, Sent: 3})

	in, err := report.Read(report.Source{Name: "run.jsonl", R: &file})
	if err != nil {
		fmt.Println(err)
		return
	}
	in.Tool = "rlprobe v1.0.0"
	var table strings.Builder
	report.Table(&table, in, report.TableOptions{Width: 80})
	fmt.Println(strings.SplitN(table.String(), "\n", 2)[0])
	report.Markdown(os.Stdout, in)
	// Output:
	// PASS: no certain error · 1 warning · 3 requests (2 accepted, 1 rejected) in 3ms
	// ### ✅ rlprobe: PASS
	//
	// no certain error · 1 warning · 3 requests (2 accepted, 1 rejected) in 3ms
	//
	// | verdict | time | policy | found |
	// |---|---|---|---|
	// | PASS | time unknown | no policy | no certain error, 1 warning |
	//
	// | | verdict | severity | finding | check | endpoint | client | message |
	// |---|---|---|---|---|---|---|---|
	// | ⚠️ | 1 | warning (certain) | `retry-after-missing` | retry-after | / |  | 1 rejection carried no Retry-After |
	//
	// **Requests**
	//
	// | outcome | status | count | p50 | p99 | max |
	// |---|---:|---:|---:|---:|---:|
	// | accepted | 200 | 2 | 600µs | 600µs | 600µs |
	// | rejected | 429 | 1 | 600µs | 600µs | 600µs |
	//
	// <sub>record files: run.jsonl · rlprobe v1.0.0</sub>
}

// A command that has just run a check writes the HTML report of the runs
// in memory, with the document it has not appended to the file yet.
func ExampleFromMerged() {
	run := &record.Run{Header: record.Header{Start: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}}
	run.Results = append(run.Results, record.Result{Seq: 0, Method: "GET", URL: "http://h/", Sched: 1e6, Sent: 1e6,
		TTFB: 2e6, Done: 2e6, Outcome: record.OutcomeResponse, Status: 200})
	in := report.FromMerged(record.Merge(run), []string{"run.jsonl"})
	checkDoc := map[string]any{"schema": verify.SchemaCheck, "tool": "rlprobe v1.0.0", "verdict": "pass",
		"complete": true, "pass": true, "targets": []string{"http://h/"}, "policy": nil, "findings": []any{}}
	if err := in.AddDocument(checkDoc); err != nil {
		fmt.Println(err)
		return
	}
	var page bytes.Buffer
	if err := report.HTML(&page, in); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(in.Verdict(), strings.HasPrefix(page.String(), "<!DOCTYPE html>"))
	// Output: pass true
}
