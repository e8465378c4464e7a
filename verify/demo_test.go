package verify_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// TestDemoVerdict: the demo's nginx-like server (rate 1r/s, burst 3,
// nodelay, 503, no Retry-After) checked against "rate 1/s, burst 3, status
// 429" gives reject-status-mismatch and retry-after-missing, nothing else.
// It runs the demo on a loopback socket (a burst of 80 ms).
func TestDemoVerdict(t *testing.T) {
	zero := time.Now()
	res, err := scenario.Demo(context.Background(), scenario.DemoOptions{Zero: zero})
	if err != nil {
		t.Fatal(err)
	}
	run := &record.Run{Header: record.Header{Start: zero, Agent: "a1"}, Results: res.Results, End: &record.End{Reason: record.ReasonCompleted}}
	rep := verify.AnalyzeRun(run, verify.DemoPolicy(), verify.Options{Tool: "rlprobe test"})
	got := findingIDs(rep)
	if len(got) != 2 || got[verify.IDRejectStatusMismatch] != verify.Certain || got[verify.IDRetryAfterMissing] != verify.Certain {
		t.Errorf("demo verdict:%s\nwant reject-status-mismatch and retry-after-missing", describe(rep))
	}
	if rep.Verdict != verify.VerdictFail {
		t.Errorf("verdict %s, want fail (the status mismatch is a certain error)", rep.Verdict)
	}
}
