package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// demoRowRE matches a row of the demo table: "#  +arrival  status  outcome".
var demoRowRE = regexp.MustCompile(`(?m)^\s*(\d+)\s+\+(\d+\.\d)ms\s+(\d{3})\s+(\w+)$`)

func TestDemo(t *testing.T) {
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
		t.Errorf("demo rows in arrival order = %v, want four 200s then four 503s\n%s", got, stdout)
	}
	for _, w := range []string{"4 accepted, 4 rejected", "burst=3 nodelay", "limit_req", "capacity 4 (nginx burst 3)"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("demo output lacks %q:\n%s", w, stdout)
		}
	}
}

func TestDemoJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, nil, "demo", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc demoDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if doc.Schema != "rlprobe.demo/v1" || doc.Counts["accepted"] != 4 || doc.Counts["rejected"] != 4 || len(doc.Requests) != 8 {
		t.Errorf("document %+v", doc)
	}
	for i, r := range doc.Requests {
		wantStatus := 200
		if i >= 4 {
			wantStatus = 503
		}
		if r.Status != wantStatus || (i > 0 && r.ArrivalMS < doc.Requests[i-1].ArrivalMS) {
			t.Errorf("request %d in arrival order: %+v, want status %d and arrivals ascending", i, r, wantStatus)
		}
	}
}
