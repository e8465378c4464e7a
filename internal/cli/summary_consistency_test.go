package cli

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestRunAndReportAgree: the run document `rlprobe run --json` prints and
// the one `rlprobe report --format json` rebuilds from the record file
// count the same requests the same way, list the clients in the same order,
// and give the same latency and pacing error, up to the precision of run's
// HDR histograms (three significant digits).
func TestRunAndReportAgree(t *testing.T) {
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.5, Capacity: 4}
	srv := refServer(t, "", bucket, func(_ *testserver.Config, p *testserver.Policy) { p.Key = "header:X-Key" })
	file := filepath.Join(t.TempDir(), "r.jsonl")
	_, raw := runJSON(t, "run", srv.URL()+"/", "--pattern", "burst", "--count", "7", "--clients", "3",
		"--client-header", "X-Key", "--out", file)
	var run runDocView
	if err := json.Unmarshal([]byte(raw), &run); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, nil, "report", file, "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d, %s", code, stderr)
	}
	var rep struct {
		Run runDocView `json:"run"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	a, b := run, rep.Run
	if a.Scheduled != 21 || a.Accepted != 12 || a.Rejected != 9 {
		t.Fatalf("run counted %d scheduled, %d accepted, %d rejected; want 21, 12, 9 (4 of 7 per client)\n%s", a.Scheduled, a.Accepted, a.Rejected, raw)
	}
	if a.Scheduled != b.Scheduled || a.Sent != b.Sent || a.Accepted != b.Accepted || a.Rejected != b.Rejected || a.Other != b.Other {
		t.Errorf("counts differ: run %+v, report %+v", a, b)
	}
	if len(a.Clients) != len(b.Clients) {
		t.Fatalf("clients: run %v, report %v", a.Clients, b.Clients)
	}
	for i := range a.Clients {
		if a.Clients[i] != b.Clients[i] {
			t.Errorf("client %d: run %+v, report %+v", i, a.Clients[i], b.Clients[i])
		}
	}
	near := func(what string, x, y float64) {
		if math.Abs(x-y) > 1+0.002*math.Max(x, y) {
			t.Errorf("%s: run %v µs, report %v µs", what, x, y)
		}
	}
	for code, d := range a.Latency {
		e, ok := b.Latency[code]
		if !ok || d.Count != e.Count {
			t.Errorf("latency of %s: run %+v, report %+v", code, d, e)
			continue
		}
		near("latency p50 of "+code, d.P50, e.P50)
		near("latency max of "+code, d.Max, e.Max)
	}
	if len(a.Latency) != len(b.Latency) {
		t.Errorf("latency statuses: run %v, report %v", a.Latency, b.Latency)
	}
	near("pacing error p50", a.Pacing.P50, b.Pacing.P50)
	near("pacing error max", a.Pacing.Max, b.Pacing.Max)
}

// runDocView is the part of an rlprobe.run/v1 document both producers fill.
type runDocView struct {
	Scheduled int `json:"scheduled"`
	Sent      int `json:"sent"`
	Accepted  int `json:"accepted"`
	Rejected  int `json:"rejected"`
	Other     int `json:"other"`
	Clients   []struct {
		Client   string `json:"client"`
		Sent     int    `json:"sent"`
		Accepted int    `json:"accepted"`
		Rejected int    `json:"rejected"`
	} `json:"clients"`
	Latency map[string]distView `json:"latency"`
	Pacing  distView            `json:"pacing_error"`
}

type distView struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	Max   float64 `json:"max_us"`
}
