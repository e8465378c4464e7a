package scenario

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

func ptr(v int64) *int64 { return &v }

// demoOrder returns the sequence numbers and arrivals of r's requests, in
// the order the demo shows them.
func demoOrder(r *DemoResult) (seqs []int64, arrivals []time.Duration) {
	for _, q := range r.Requests {
		seqs = append(seqs, q.Result.Seq)
		arrivals = append(arrivals, q.Arrival)
	}
	return seqs, arrivals
}

// TestDemoOrder: requests are shown in server arrival order — the echo when
// present, else the client's TTFB — whatever order they were sent in.
func TestDemoOrder(t *testing.T) {
	results := []record.Result{
		{Seq: 0, Outcome: record.OutcomeResponse, Status: 503, Arrival: ptr(300), TTFB: 10},
		{Seq: 1, Outcome: record.OutcomeResponse, Status: 200, Arrival: ptr(100), TTFB: 900},
		{Seq: 2, Outcome: record.OutcomeResponse, Status: 200, TTFB: 200},
		{Seq: 3, Outcome: record.OutcomeError, Err: record.ErrReset, Sched: 250},
		{Seq: 4, Outcome: record.OutcomeResponse, Status: 404, Arrival: ptr(300)},
	}
	r := newDemoResult("http://x/", DemoPolicy(), results)
	seqs, arrivals := demoOrder(r)
	if want := []int64{1, 2, 3, 0, 4}; !reflect.DeepEqual(seqs, want) {
		t.Errorf("order = %v, want %v", seqs, want)
	}
	if want := []time.Duration{0, 100, 150, 200, 200}; !reflect.DeepEqual(arrivals, want) {
		t.Errorf("arrivals = %v, want %v", arrivals, want)
	}
	want := map[string]int{"accepted": 2, "rejected": 1, "error": 1, "other": 1}
	if !reflect.DeepEqual(r.Counts, want) {
		t.Errorf("counts = %v, want %v", r.Counts, want)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"2 accepted, 1 rejected, 1 other, 1 error", "3      +0.0ms       -  error (reset)"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, b.String())
		}
	}
}

// TestDemoDecisionOrder: requests the server numbered are shown in its
// decision order among their places — a burst bunched up by a loaded
// machine arrives within microseconds and is decided in another order —
// each with its own arrival; a request without an answer keeps its place.
func TestDemoDecisionOrder(t *testing.T) {
	results := []record.Result{
		{Seq: 0, Outcome: record.OutcomeResponse, Status: 200, Arrival: ptr(100), Decision: ptr(1)},
		{Seq: 1, Outcome: record.OutcomeResponse, Status: 503, Arrival: ptr(150), Decision: ptr(3)},
		{Seq: 2, Outcome: record.OutcomeResponse, Status: 200, Arrival: ptr(151), Decision: ptr(2)},
		{Seq: 3, Outcome: record.OutcomeError, Err: record.ErrReset, Sched: 120},
	}
	r := newDemoResult("http://x/", DemoPolicy(), results)
	seqs, arrivals := demoOrder(r)
	if want := []int64{0, 3, 2, 1}; !reflect.DeepEqual(seqs, want) || !r.ByDecision {
		t.Errorf("order = %v (by decision %v), want %v by decision", seqs, r.ByDecision, want)
	}
	if want := []time.Duration{0, 20, 51, 50}; !reflect.DeepEqual(arrivals, want) {
		t.Errorf("arrivals = %v, want %v", arrivals, want)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(in the order the server decided them)") {
		t.Errorf("text does not say the order is the server's decisions:\n%s", b.String())
	}
}

// TestDemo runs the real demo over loopback: four 200s, then four 503s.
func TestDemo(t *testing.T) {
	r, err := Demo(context.Background(), DemoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Statuses(), []int{200, 200, 200, 200, 503, 503, 503, 503}; !reflect.DeepEqual(got, want) {
		t.Errorf("statuses in decision order = %v, want %v", got, want)
	}
	if !r.ByDecision {
		t.Errorf("the requests are not in decision order: the demo server numbers its decisions, and the engine records them")
	}
	for _, q := range r.Requests {
		if q.Result.Arrival == nil || q.Result.Decision == nil {
			t.Errorf("seq %d: arrival echo %v, decision %v; want both", q.Result.Seq, q.Result.Arrival, q.Result.Decision)
		}
		if h := q.Result.Headers; h.Get("Retry-After") != "" || h.Get("RateLimit") != "" {
			t.Errorf("seq %d carries rate-limit headers %v; the nginx-like server sends none", q.Result.Seq, h)
		}
	}
}
