package scenario

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestSelftestCasesCoverTruthTable: the grid serves every algorithm with
// the variants the contract names, spreads dialects, statuses and keys,
// and keeps windows short enough for real time.
func TestSelftestCasesCoverTruthTable(t *testing.T) {
	cases := SelftestCases()
	algs := map[limiter.Algorithm]bool{}
	statuses, dialects, keys, families := map[int]bool{}, map[headers.Dialect]bool{}, map[string]bool{}, map[infer.Family]bool{}
	var fwAligns []limiter.Align
	crs := map[limiter.Algorithm][]bool{}
	quick := 0
	for _, c := range cases {
		families[c.Want.Family] = true
		if c.Quick {
			quick++
		}
		if c.Policy == nil {
			if c.Want.Family != infer.None {
				t.Errorf("%s: no limiter, but wants %s", c.Name, c.Want.Family)
			}
			continue
		}
		if err := c.Policy.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		lc := c.Policy.Limiter
		algs[lc.Algorithm] = true
		statuses[c.Policy.Status] = true
		for _, d := range c.Policy.Dialects {
			dialects[d] = true
		}
		keys[c.Want.Key] = true
		if lc.Algorithm == limiter.FixedWindow {
			fwAligns = append(fwAligns, lc.Align)
		}
		crs[lc.Algorithm] = append(crs[lc.Algorithm], lc.CountRejected)
		// A long window runs only in fake time (Long); a queue that never
		// rejects is never waited out (its bursts stay under the timeout).
		if !c.Long && !c.Want.NeverRejects && (lc.Window > 2*time.Second || (lc.Rate > 0 && float64(lc.Capacity)/lc.Rate > 2)) {
			t.Errorf("%s: time scale over 2 s makes the real-time grid slow", c.Name)
		}
		if c.Policy.Key != c.Want.Key && !(c.Policy.Key == testserver.KeyGlobal && c.Want.Key == infer.KeyGlobal) {
			t.Errorf("%s: serves key %q, wants %q", c.Name, c.Policy.Key, c.Want.Key)
		}
	}
	for _, a := range limiter.Algorithms {
		if !algs[a] {
			t.Errorf("no case serves %s", a)
		}
	}
	for _, f := range infer.Families {
		if !families[f] {
			t.Errorf("no case is inferred as %s", f)
		}
	}
	if !slices.Contains(fwAligns, limiter.AlignEpoch) || !slices.Contains(fwAligns, limiter.AlignFirstRequest) {
		t.Errorf("fixed-window alignments %v, want epoch and first-request", fwAligns)
	}
	for _, a := range []limiter.Algorithm{limiter.SlidingLog, limiter.SlidingWindowCounter} {
		if !slices.Contains(crs[a], true) || !slices.Contains(crs[a], false) {
			t.Errorf("%s: count-rejected %v, want with and without", a, crs[a])
		}
	}
	if !statuses[429] || !statuses[503] || !dialects[headers.None] || !dialects[headers.Draft8] {
		t.Errorf("statuses %v, dialects %v: want 429 and 503, none and draft-8", statuses, dialects)
	}
	if !keys[infer.KeyGlobal] || !keys[testserver.KeyIP] || !keys[testserver.KeyHeaderPrefix+SelftestClientHeader] {
		t.Errorf("keys %v: want global, ip and per header", keys)
	}
	// A handful of families, and one leave-one-out row a penalty.
	if quick < 3+len(limiter.PenaltyKinds) || quick > 6+len(limiter.PenaltyKinds) {
		t.Errorf("%d quick cases, want a handful and one a penalty", quick)
	}
}

func TestJudgeInference(t *testing.T) {
	p := func(v float64) *infer.Param { return &infer.Param{Value: v, Low: v, High: v} }
	s := func(v string) *string { return &v }
	base := func() *infer.Inference {
		return &infer.Inference{Algorithm: infer.FixedWindow, Alignment: s(infer.AlignEpoch), Key: infer.KeyGlobal,
			Params: infer.Params{Limit: p(5), WindowS: p(2.1)}}
	}
	w := SelftestWant{Family: infer.FixedWindow, Alignment: infer.AlignEpoch, Key: infer.KeyGlobal,
		Params: map[string]float64{"limit": 5, "window_s": 2}}
	tests := []struct {
		name string
		mod  func(*infer.Inference)
		want string // a problem containing this; "" means right
	}{
		{"right, window 5% off", func(*infer.Inference) {}, ""},
		{"window 11% off", func(i *infer.Inference) { i.Params.WindowS = p(2.22) }, "window_s 2.22, want 2"},
		{"limit off by one", func(i *infer.Inference) { i.Params.Limit = p(6) }, "limit 6, want 5"},
		{"window missing", func(i *infer.Inference) { i.Params.WindowS = nil }, "window_s not estimated"},
		{"alignment", func(i *infer.Inference) { i.Alignment = s(infer.AlignUnknown) }, "alignment unknown, want epoch"},
		{"key", func(i *infer.Inference) { i.Key = "ip" }, "key ip, want global"},
		{"family", func(i *infer.Inference) { i.Algorithm = infer.SlidingLog }, "family sliding-log, want fixed-window"},
	}
	for _, tt := range tests {
		inf := base()
		tt.mod(inf)
		probs, errs := JudgeInference(w, inf)
		got := strings.Join(probs, "; ")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: problems %q, want %q", tt.name, got, tt.want)
		}
		if tt.name == "right, window 5% off" && (errs["limit"] != 0 || fmt.Sprintf("%.3f", errs["window_s"]) != "0.050") {
			t.Errorf("%s: parameter errors %v, want limit 0 and window_s +0.05", tt.name, errs)
		}
	}
	// A real-valued parameter wanted as 0 has no relative error: it is
	// judged exactly, and its error stays a number JSON can carry.
	zero := SelftestWant{Family: infer.TokenBucket, Params: map[string]float64{"rate_per_s": 0}}
	for _, got := range []float64{0, 0.5} {
		probs, errs := JudgeInference(zero, &infer.Inference{Algorithm: infer.TokenBucket, Params: infer.Params{RatePerS: p(got)}})
		if (len(probs) == 0) != (got == 0) || math.IsNaN(errs["rate_per_s"]) || math.IsInf(errs["rate_per_s"], 0) || errs["rate_per_s"] != got {
			t.Errorf("rate 0 inferred as %v: problems %v, errors %v", got, probs, errs)
		}
	}
	cr := SelftestWant{Family: infer.SlidingLog, CountsRejected: boolPtr(true)}
	if probs, _ := JudgeInference(cr, &infer.Inference{Algorithm: infer.SlidingLog}); len(probs) != 1 || !strings.Contains(probs[0], "counts_rejected unknown") {
		t.Errorf("unknown counts_rejected: problems %v", probs)
	}
}

// TestSelftestGrid runs the whole truth table the way `rlprobe selftest`
// does: each case's reference server on an in-memory listener, the probe
// engine and infer in real time, three cases at once. Every case must be
// right. It is a soak test, run with RLPROBE_SOAK=1: its outcome depends on
// how busy the machine is, and the same grid runs exactly, in fake time, in
// TestSelftestGridSynctest (selftest_synctest_test.go) on every test run.
func TestSelftestGrid(t *testing.T) {
	if os.Getenv("RLPROBE_SOAK") == "" {
		t.Skip("a real-time soak test: set RLPROBE_SOAK=1 (the exact grid is TestSelftestGridSynctest)")
	}
	rep, err := Selftest(context.Background(), SelftestOptions{Parallel: 3, Tool: "rlprobe test"})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, rep)
	if !rep.Pass() {
		t.Error("selftest grid: not every case is right")
	}
	// The matrix is diagonal: every case counted once, where it belongs.
	m := rep.Matrix()
	total := 0
	for i := range m {
		for j := range m[i] {
			total += m[i][j]
			if i != j && m[i][j] != 0 {
				t.Errorf("confusion: %d %s inferred as %s", m[i][j], infer.Families[i], infer.Families[j])
			}
		}
	}
	if total != len(rep.Rows) {
		t.Errorf("the matrix counts %d cases, want %d", total, len(rep.Rows))
	}
}

// logReport logs one line per case: what was inferred, how long it took,
// how many requests it needed.
func logReport(t *testing.T, rep *SelftestReport) {
	t.Helper()
	for _, r := range rep.Rows {
		got, n, d := "-", 0, 0.0
		if r.Got != nil {
			got, n, d = string(r.Got.Algorithm)+"/"+string(r.Got.Fit), r.Got.Requests, r.Got.DurationS
		}
		t.Logf("%-38s → %-22s %7v (infer %6.1fs) %5d requests %v %v", r.Case.Name, got, r.Duration.Round(time.Millisecond), d, n, r.Problems, r.Err)
	}
}

// TestSelftestMiss: a case whose answer is wrong fails the report, and a
// cancelled context ends the selftest with an error.
func TestSelftestMiss(t *testing.T) {
	wrong := SelftestCase{Name: "none-as-token-bucket", Want: SelftestWant{Family: infer.TokenBucket}}
	rep, err := Selftest(context.Background(), SelftestOptions{Cases: []SelftestCase{wrong}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass() || len(rep.Rows) != 1 || rep.Rows[0].OK() || rep.Rows[0].Got.Algorithm != infer.None {
		t.Errorf("report %+v: want one miss (none inferred, token-bucket wanted)", rep.Rows)
	}
	if m := rep.Matrix(); m[slices.Index(infer.Families, infer.TokenBucket)][slices.Index(infer.Families, infer.None)] != 1 {
		t.Errorf("matrix %v: want the miss in row token-bucket, column none", m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Selftest(ctx, SelftestOptions{Quick: true}); err == nil {
		t.Error("a cancelled selftest returned no error")
	}
}

// TestInferDemo: infer concludes that the demo server is what it is, a
// token bucket of rate 1/s and capacity 4 (nginx burst=3 nodelay), which
// rejects with 503 and sends no Retry-After.
func TestInferDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15 s in real time")
	}
	t.Parallel()
	ml := testserver.NewMemListener()
	inf, err := InferDemo(context.Background(), DemoOptions{Listener: ml, Dial: ml.Dial})
	if err != nil {
		t.Fatal(err)
	}
	probs, _ := JudgeInference(SelftestWant{Family: infer.TokenBucket, Params: map[string]float64{"rate_per_s": 1, "capacity": 4}}, inf)
	if len(probs) > 0 || inf.RejectStatus == nil || *inf.RejectStatus != 503 || inf.RetryAfter.Sent {
		t.Errorf("demo inferred %s %+v (reject %v, retry-after %+v): %v", inf.Algorithm, inf.Params, inf.RejectStatus, inf.RetryAfter, probs)
	}
	t.Logf("demo: %s in %.1fs, %d requests", inf.Algorithm, inf.DurationS, inf.Requests)
}
