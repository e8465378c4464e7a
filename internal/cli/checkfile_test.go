package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestCheckPolicyFileBaseURL: with --policy-file, check's target is a base
// URL and the preflight asks the first endpoint (BASE + path), so a server
// that has no route at its base (404) is still checked.
func TestCheckPolicyFileBaseURL(t *testing.T) {
	pol := testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 60 * time.Second},
		Status:   429,
		Dialects: []headers.Dialect{headers.Draft8},
	}
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "/api/items", Policy: pol}}, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("version: 1\nendpoints:\n  - path: /api/items\n    limit: 5\n    window: 60s\n    window_type: fixed\n    status: 429\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, rep, errOut := runCheckJSON(t, "check", srv.URL(), "--policy-file", file, "--only", "burst", "--json", "-q",
		"--out", filepath.Join(t.TempDir(), "c.jsonl"))
	if code != ExitOK || rep.Verdict != "pass" {
		t.Fatalf("check BASE --policy-file: exit %d, verdict %s, findings %v\n%s", code, rep.Verdict, errorFindings(rep), errOut)
	}
}

// TestCheckOtherRejectStatusIsNotOther: a 503 answered where 429 is
// declared is a rejection with the wrong status (reject-status-mismatch),
// not an "other" answer that aborts the run.
func TestCheckOtherRejectStatusIsNotOther(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	url := startServer(t, testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 4},
		Status:   503,
		Dialects: []headers.Dialect{headers.None},
	})
	code, rep, errOut := runCheckJSON(t, "check", url, "--rate", "1/s", "--burst", "3", "--status", "429", "--only", "burst",
		"--json", "-q", "--out", filepath.Join(t.TempDir(), "c.jsonl"))
	if code != ExitFindings || !hasFinding(rep, "reject-status-mismatch", "certain") {
		t.Errorf("exit %d, findings %v; want 1 and a certain reject-status-mismatch\n%s", code, errorFindings(rep), errOut)
	}
}
