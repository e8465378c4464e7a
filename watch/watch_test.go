package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// blocked declares block:d on e.
func blocked(e verify.Endpoint, d time.Duration) verify.Endpoint {
	e.Penalty.Kind, e.Penalty.Duration = "block", d
	return e
}

func TestPlanBudget(t *testing.T) {
	window := verify.Endpoint{Limit: 100, Window: time.Minute}
	small := verify.Endpoint{Limit: 10, Window: time.Minute}
	tenPer10s := verify.Endpoint{Limit: 10, Window: 10 * time.Second}
	bucket := verify.Endpoint{Rate: 10, Capacity: 50}
	twenty := verify.Endpoint{Rate: 20, Capacity: 20}
	for _, tc := range []struct {
		name      string
		e         verify.Endpoint
		share     float64
		every     time.Duration
		mode      Mode
		perCycle  int
		perPeriod int
		exhaust   int
		wantErr   string
		fixes     []string
	}{
		{"2% of 100 per minute, every 5m", window, 0.02, 5 * time.Minute, ModeHeaders, 2, 2, 0, "", nil},
		{"cycles within one window share it", window, 0.02, 30 * time.Second, ModeHeaders, 1, 2, 0, "", nil},
		{"one request per period when 2% of 10 is less", small, 0.02, 5 * time.Minute, ModeHeaders, 1, 1, 0, "", nil},
		{"20/s capacity 20 at the defaults", twenty, DefaultShare, DefaultEvery, ModeHeaders, 1, 1, 0, "", nil},
		{"2% of what 10 per minute admits in 1m cannot fit", small, 0.02, time.Minute, ModeHeaders, 0, 0, 0, "0.2 request(s) per --every 1m0s",
			[]string{"--budget 10%", "--every 5m0s"}},
		{"cycles within the period cannot split one request", tenPer10s, 0.1, time.Second, ModeHeaders, 0, 0, 0, "shared by the 10 cycles",
			[]string{"--budget 100%", "--every 10s"}},
		{"1% of a 20/s bucket over 1s cannot fit", twenty, 0.01, time.Second, ModeHeaders, 0, 0, 0, "0.4 request(s) per --every 1s",
			[]string{"--budget 2.5%", "--every 4s"}},
		{"bucket period is capacity/rate", bucket, 0.1, time.Minute, ModeSample, 5, 5, 0, "", nil},
		{"exhaust finds up to 4x", small, 0.1, time.Minute, ModeExhaust, 1, 1, 41, "", nil},
		{"exhaust needs a fresh quota", small, 0.1, 30 * time.Second, ModeExhaust, 0, 0, 41, "shorter than the rule's period", []string{"--every 1m0s"}},
		{"exhaust waits out a declared block", blocked(small, 10*time.Minute), 0.1, 5 * time.Minute, ModeExhaust, 0, 0, 41,
			"shorter than the declared penalty block:10m0s; use --every 10m0s", []string{"--every 10m0s"}},
		{"a block within --every", blocked(small, 2*time.Minute), 0.1, 5 * time.Minute, ModeExhaust, 1, 1, 41, "", nil},
		{"share over 100%", window, 1.5, time.Minute, ModeHeaders, 0, 0, 0, "at most 100%", nil},
		{"no quota", verify.Endpoint{}, 0.02, time.Minute, ModeHeaders, 0, 0, 0, "no quota", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := PlanBudget(tc.e, tc.share, tc.every, tc.mode)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				var got []string
				for _, f := range session.Fixes(err) {
					got = append(got, f.String())
					if !strings.Contains(err.Error(), f.String()) {
						t.Errorf("the message does not say the fix %s: %v", f, err)
					}
					// Each fix alone makes the plan fit.
					share, every := tc.share, tc.every
					var perr error
					switch f.Flag {
					case "--budget":
						share, perr = ParseShare(f.Value)
					case "--every":
						every, perr = units.ParseDuration(f.Value)
					}
					if perr != nil {
						t.Fatalf("fix %s does not parse: %v", f, perr)
					}
					if b, err := PlanBudget(tc.e, share, every, tc.mode); err != nil || b.PerCycle < 1 && tc.mode != ModeExhaust {
						t.Errorf("fix %s: %d per cycle, %v", f, b.PerCycle, err)
					}
				}
				if strings.Join(got, ",") != strings.Join(tc.fixes, ",") {
					t.Errorf("fixes %v, want %v", got, tc.fixes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.PerCycle != tc.perCycle || b.PerPeriodMax != tc.perPeriod || b.Exhaust != tc.exhaust {
				t.Errorf("per cycle %d, per period %d, exhaust %d; want %d, %d, %d", b.PerCycle, b.PerPeriodMax, b.Exhaust, tc.perCycle, tc.perPeriod, tc.exhaust)
			}
			// The budget's promises: no interval of length Period holds more
			// than max(1, Share·Quota) of the budgeted requests (cycles start
			// Every apart at least), and one cycle, alone in any interval of
			// length Every, sends at most Share × what the rule admits then.
			cycles := int((b.Period + b.Every - 1) / b.Every)
			if limit := max(1, tc.share*float64(b.Quota)); float64(cycles*b.PerCycle) > limit+1e-9 || b.PerPeriodMax > cycles*b.PerCycle {
				t.Errorf("%d cycles × %d requests exceed max(1, %v of %d)", cycles, b.PerCycle, tc.share, b.Quota)
			}
			if float64(b.PerCycle) > tc.share*admits(tc.e, tc.every)+1e-9 {
				t.Errorf("%d per cycle exceed %v of the %v admitted in %v", b.PerCycle, tc.share, admits(tc.e, tc.every), tc.every)
			}
		})
	}
}

// resp builds a recorded answer with headers, at ms milliseconds.
func resp(status int, ms int64, phase string, h ...string) record.Result {
	hd := http.Header{}
	for i := 0; i+1 < len(h); i += 2 {
		hd[h[i]] = append(hd[h[i]], h[i+1])
	}
	t := ms * int64(time.Millisecond)
	return record.Result{Outcome: record.OutcomeResponse, Status: status, Phase: phase, Sent: t, Wrote: t, TTFB: t + 1000, Done: t + 2000, Headers: hd}
}

func TestObserveAndCompare(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	draft := func(q int) []string {
		return []string{"RateLimit-Policy", `"default";q=` + itoa(int64(q)) + `;w=60`, "RateLimit", `"default";r=` + itoa(int64(q-1)) + `;t=60`}
	}
	base := Observe([]record.Result{resp(200, 0, "watch", draft(10)...), resp(200, 10, "watch", draft(10)...)}, 0, start, "")
	if base.Advertised == nil || base.Advertised.Limit != 10 || base.Advertised.Window != time.Minute {
		t.Fatalf("advertised = %+v", base.Advertised)
	}
	// r > 0 with t > 0, never contradicted: the values read as draft-11's.
	if len(base.Dialects) != 1 || base.Dialects[0] != "draft-11" {
		t.Fatalf("dialects = %v", base.Dialects)
	}
	rl := func(v string) []string {
		return []string{"RateLimit-Policy", `"default";q=10;w=60`, "RateLimit", v}
	}
	five := func(n int64) *int64 { return &n }
	tr, fa := true, false
	for _, tc := range []struct {
		name string
		b    Baseline
		now  Observation
		want []string // fields
	}{
		{"same", Baseline{Observation: base}, base, nil},
		{"limit doubled", Baseline{Observation: base},
			Observe([]record.Result{resp(200, 0, "watch", draft(20)...)}, 0, start, ""), []string{"limit"}},
		{"headers vanished", Baseline{Observation: base},
			Observe([]record.Result{resp(200, 0, "watch")}, 0, start, ""), []string{"headers"}},
		{"no answers, no drift", Baseline{Observation: base}, Observation{}, nil},
		{"draft-11 read as draft-8 (t 0 while r > 0): one syntax, no drift", Baseline{Observation: base},
			Observe([]record.Result{resp(200, 0, "watch", rl(`"default";r=9;t=0`)...)}, 0, start, ""), nil},
		{"draft-11 to draft-12", Baseline{Observation: base},
			Observe([]record.Result{resp(200, 0, "watch", rl(`"default";a=9;w=60`)...)}, 0, start, ""), []string{"headers"}},
		{"retry-after vanished", Baseline{Observation: Observation{Responses: 3, RetryAfter: &tr}},
			Observation{Responses: 3, RetryAfter: &fa}, []string{"retry-after"}},
		{"exhaust within 10%", Baseline{Observation: Observation{Responses: 30, Exhausted: five(20)}},
			Observation{Responses: 30, Exhausted: five(21)}, nil},
		{"exhaust doubled", Baseline{Observation: Observation{Responses: 30, Exhausted: five(10)}},
			Observation{Responses: 30, Exhausted: five(20)}, []string{"limit"}},
		{"exhaust against inferred bounds", Baseline{Inference: &infer.Inference{Params: infer.Params{Limit: &infer.Param{Value: 10, Low: 10, High: 10}}}},
			Observation{Responses: 30, Exhausted: five(20)}, []string{"limit"}},
		{"exhaust inside inferred bounds", Baseline{Inference: &infer.Inference{Params: infer.Params{Capacity: &infer.Param{Value: 10, Low: 9, High: 11}}}},
			Observation{Responses: 30, Exhausted: five(12)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range Compare(tc.b, tc.now) {
				got = append(got, d.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("drift %v, want %v", got, tc.want)
			}
			// Reported once: after Update, the same observation is no drift.
			if again := Compare(tc.b.Update(tc.now), tc.now); len(again) != 0 {
				t.Errorf("after Update the same observation drifts again: %+v", again)
			}
		})
	}
}

func TestObserveExhaustCountsTheBurstsAcceptances(t *testing.T) {
	var rs []record.Result
	for i := range 12 {
		st := 200
		if i%3 == 2 && i > 2 || i == 1 { // decided out of schedule order
			st = 429
		}
		rs = append(rs, resp(st, int64(i), "exhaust"))
	}
	rs = append(rs, resp(200, 20, "watch"))
	o := Observe(rs, 0, time.Now(), "exhaust")
	if o.Exhausted == nil || *o.Exhausted != 8 {
		t.Fatalf("exhausted = %v, want 8", o.Exhausted)
	}
	if o.RetryAfter == nil || *o.RetryAfter {
		t.Fatalf("retry-after = %v, want seen and false", o.RetryAfter)
	}
	if o.Accepted != 9 || o.Rejected != 4 {
		t.Fatalf("accepted %d rejected %d", o.Accepted, o.Rejected)
	}
}

func TestMetricsPassPromtool(t *testing.T) {
	m := NewMetrics()
	rs := []record.Result{resp(200, 0, "watch"), resp(429, 1, "exhaust", "Retry-After", "1"), {Outcome: record.OutcomeError, Err: record.ErrTimeout}}
	m.Results(rs, 0, func(r record.Result) bool { return r.Phase == "exhaust" })
	m.Verdict(verify.Report{Verdict: verify.VerdictPass, Policy: verify.Policy{Endpoints: []verify.Endpoint{{Limit: 10, Window: time.Minute}}},
		Findings: []verify.Finding{{ID: "retry-after-missing", Severity: verify.SeverityWarning, Certainty: verify.Certain}}})
	m.Inference(&infer.Inference{Algorithm: infer.FixedWindow, Params: infer.Params{Limit: &infer.Param{Value: 10}, WindowS: &infer.Param{Value: 60}}})
	m.Drift([]Drift{{Field: "limit"}})
	m.Cycle(true, time.Now())
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`rlprobe_requests_total{outcome="accepted",status="200"} 1`,
		`rlprobe_requests_total{outcome="error",status=""} 1`,
		`rlprobe_budget_requests_total{quota="own"} 1`,
		`rlprobe_budget_requests_total{quota="shared"} 2`,
		`rlprobe_limit_requests{source="infer"} 10`,
		`rlprobe_window_seconds{source="infer"} 60`,
		`rlprobe_drift_events_total{field="limit"} 1`,
		`rlprobe_rule_pass{rule="10 in any 1m0s"} 1`,
		`rlprobe_findings{certainty="certain",id="retry-after-missing",severity="warning"} 1`,
		`rlprobe_algorithm_info{algorithm="fixed-window"} 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cmd := exec.Command(testenv.Promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestWebhookRetriesAndRedacts(t *testing.T) {
	var calls atomic.Int32
	var got Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch r.URL.Path {
		case "/flaky":
			if n == 1 {
				w.WriteHeader(503)
				return
			}
			_ = json.NewDecoder(r.Body).Decode(&got)
		case "/gone":
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	w := NewWebhook(srv.URL+"/flaky?access_token=S3CRET", nil)
	w.Backoff = time.Millisecond
	ev := Event{Schema: EventSchema, Kind: KindDrift, Drift: &Drift{Field: "limit", Before: "10", After: "20", Source: "headers"}}
	if err := w.Post(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || got.Kind != KindDrift || got.Drift == nil || got.Drift.After != "20" {
		t.Fatalf("calls %d, event %+v", calls.Load(), got)
	}
	calls.Store(0)
	w = NewWebhook(srv.URL+"/gone?access_token=S3CRET", nil)
	w.Backoff = time.Millisecond
	err := w.Post(context.Background(), ev)
	if err == nil || calls.Load() != 1 {
		t.Fatalf("a 404 is not retried: err %v, calls %d", err, calls.Load())
	}
	if strings.Contains(err.Error(), "S3CRET") {
		t.Fatalf("the webhook's secret leaks into its error: %v", err)
	}
}

func TestDirRotates(t *testing.T) {
	dir := t.TempDir()
	d := Dir{Path: dir, Keep: 3, KeepBytes: 1 << 20}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var paths []string
	for i := range 5 {
		p := d.File(t0.Add(time.Duration(i)*time.Minute), i)
		paths = append(paths, p)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, "notes.jsonl")
	_ = os.WriteFile(other, []byte("mine"), 0o644)
	removed, err := d.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[0] != paths[1] || removed[1] != paths[0] {
		t.Fatalf("removed %v, want the two oldest", removed)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("rotation touched a file it did not write")
	}
	// Size: a 1-byte cap keeps only the newest file.
	d.KeepBytes = 1
	if removed, _ = d.Rotate(); len(removed) != 2 {
		t.Fatalf("size rotation removed %v", removed)
	}
	if _, err := os.Stat(paths[4]); err != nil {
		t.Fatal("the newest file must stay")
	}
}

func TestEventsMatchTheirSchema(t *testing.T) {
	s := testenv.CompileSchema(t, "../docs/schema", "watch-event.schema.json")
	d := Drift{Field: "limit", Before: "10", After: "20", Source: "headers"}
	f := DriftFinding(d, "GET /")
	good := []Event{
		{Kind: KindStart, Message: "watching", Mode: ModeHeaders, Budget: &EventBudget{Share: 0.02, PerCycle: 1, PerPeriodMax: 1, SharePerPeriod: 0.05}},
		{Kind: KindCycle, Cycle: 1, Verdict: "pass", Message: "cycle 1: pass", RecordFile: "c1.jsonl"},
		{Kind: KindDrift, Cycle: 2, Drift: &d, Finding: &f, Message: f.Message},
		{Kind: KindStop, Cycle: 2, Message: "stopped"},
	}
	for _, ev := range good {
		ev.Schema, ev.Tool, ev.Time, ev.Targets = EventSchema, "rlprobe test", time.Now(), []string{"http://127.0.0.1:1/"}
		if err := validate(s, ev); err != nil {
			t.Errorf("%s event: %v", ev.Kind, err)
		}
	}
	for _, bad := range []Event{
		{Kind: KindDrift, Message: "no drift member"},
		{Kind: KindStart, Message: "no mode nor budget"},
		{Kind: KindStart, Message: "a budget of nothing", Mode: ModeSample, Budget: &EventBudget{Share: 0.02, SharePerPeriod: 0.02}},
	} {
		bad.Schema, bad.Tool, bad.Time = EventSchema, "rlprobe test", time.Now()
		if validate(s, bad) == nil {
			t.Errorf("%s event validated: %s", bad.Kind, bad.Message)
		}
	}
	for _, k := range Kinds {
		if !strings.Contains(mustRead(t, "../docs/schema/watch-event.schema.json"), `"`+k+`"`) {
			t.Errorf("kind %s missing from the schema", k)
		}
	}
}

func validate(s interface{ Validate(any) error }, ev Event) error {
	b, _ := json.Marshal(ev)
	var v any
	_ = json.Unmarshal(b, &v)
	return s.Validate(v)
}

func mustRead(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExampleAlertRules: examples/prometheus-rules.yml passes promtool and
// names only metrics that watch serves.
func TestExampleAlertRules(t *testing.T) {
	path := "../examples/prometheus-rules.yml"
	out, err := exec.Command(testenv.Promtool(t), "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	m := NewMetrics()
	m.Results([]record.Result{resp(200, 0, "watch")}, 0, nil)
	m.Cycle(false, time.Now())
	m.Drift([]Drift{{Field: "limit"}})
	m.Verdict(verify.Report{Policy: verify.Policy{Endpoints: []verify.Endpoint{{Limit: 1, Window: time.Second}}}, Findings: []verify.Finding{{ID: "retry-after-missing"}}})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range fams {
		served[f.GetName()] = true
	}
	text := mustRead(t, path)
	for _, name := range []string{"rlprobe_rule_pass", "rlprobe_drift_events_total", "rlprobe_findings", "rlprobe_last_cycle_timestamp_seconds", "rlprobe_cycles_total"} {
		if !strings.Contains(text, name) {
			t.Errorf("the rules do not use %s", name)
		}
		if !served[name] {
			t.Errorf("the rules use %s, which watch does not serve", name)
		}
	}
}
