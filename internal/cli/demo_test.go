package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/internal/scenario"
)

// demoRowRE matches a row of the demo table: "#  +arrival  status  outcome".
var demoRowRE = regexp.MustCompile(`(?m)^\s*(\d+)\s+\+(\d+\.\d)ms\s+(\d{3})\s+(\w+)$`)

func TestDemo(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	code, stdout, stderr := runCLI(t, nil, "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := demoRowRE.FindAllStringSubmatch(stdout, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[3]+" "+r[4])
	}
	want := []string{"200 accepted", "200 accepted", "200 accepted", "200 accepted",
		"503 rejected", "503 rejected", "503 rejected", "503 rejected"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("demo rows in decision order = %v, want four 200s then four 503s\n%s", got, stdout)
	}
	for _, w := range []string{"4 accepted, 4 rejected (in the order the server decided them)", "burst=3 nodelay", "limit_req", "capacity 4 (nginx burst 3)",
		// the verdict against "rate 1/s, burst 3, 429"
		"FAIL: reject-status-mismatch", "retry-after-missing",
		// the inference
		"algorithm: token-bucket", "capacity: 4", "reject status: 503", "Retry-After: not sent"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("demo output lacks %q:\n%s", w, stdout)
		}
	}
}

func TestDemoJSON(t *testing.T) {
	html := filepath.Join(t.TempDir(), "demo.html")
	code, stdout, stderr := runCLI(t, nil, "demo", "--json", "--no-infer", "--html", html)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc scenario.DemoDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if doc.Schema != "rlprobe.demo/v1" || doc.Counts["accepted"] != 4 || doc.Counts["rejected"] != 4 || len(doc.Requests) != 8 {
		t.Errorf("document %+v", doc)
	}
	var ids []string
	for _, fd := range doc.Verdict.Findings {
		ids = append(ids, fd.ID+"/"+string(fd.Severity))
	}
	if got := strings.Join(ids, ","); got != "reject-status-mismatch/error,retry-after-missing/warning" {
		t.Errorf("demo verdict findings = %s, want reject-status-mismatch (error) and retry-after-missing (warning)", got)
	}
	if doc.Inference != nil {
		t.Errorf("--no-infer: the document has an inference")
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "reject-status-mismatch") {
		t.Errorf("--html: %v; the page does not name the finding", err)
	}
	for i, r := range doc.Requests {
		wantStatus := 200
		if i >= 4 {
			wantStatus = 503
		}
		// In decision order, arrivals need not ascend: a burst bunched up
		// by a loaded machine is not decided in arrival order.
		if r.Status != wantStatus || r.ArrivalMS < 0 {
			t.Errorf("request %d in decision order: %+v, want status %d and an arrival at or after the first", i, r, wantStatus)
		}
	}
}
