package record

import (
	"reflect"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func ptr(v int64) *int64 { return &v }

// TestMerge merges two agents whose clocks disagree: eu's clock runs 10 ms
// ahead of the target's, us's is exact. By their own clocks us:0 went out
// first; corrected, eu:0 did.
func TestMerge(t *testing.T) {
	eu := &Run{
		Header: Header{Agent: "eu", Start: t0, ClockOffsetNS: 10 * ms, ClockUncertaintyNS: 2 * ms},
		Results: []Result{
			{Seq: 0, Sched: 19 * ms, Sent: 20 * ms, Wrote: 21 * ms, TTFB: 30 * ms, Done: 31 * ms, Outcome: OutcomeResponse, Status: 200,
				Arrival: ptr(12 * ms)}, // server clock: t0+12ms
			{Seq: 1, Sched: 40 * ms, Sent: 41 * ms, Outcome: OutcomeError, Err: ErrTimeout},
		},
		End:      &End{Reason: ReasonCompleted, Scheduled: 2, Sent: 2},
		Findings: nil,
		Warnings: []string{"record: line 9: unknown type \"x\" skipped"},
	}
	us := &Run{
		Header: Header{Agent: "us", Start: t0, ClockUncertaintyNS: -1 * ms}, // a negative uncertainty is its magnitude
		Results: []Result{
			{Seq: 0, Sched: 15 * ms, Sent: 15 * ms, Outcome: OutcomeResponse, Status: 429},
			{Seq: 1, Sched: 31 * ms, Outcome: OutcomeNotSent, Err: "cap"}, // sorted by Sched: 31 ms
			{Seq: 2, Sched: 32 * ms, Sent: 32 * ms, Outcome: OutcomeResponse, Status: 200},
		},
	}
	m := Merge(eu, us)

	// Merged.Start is eu's corrected start, t0 − 10 ms; us is shifted by
	// +10 ms, eu not at all; eu's echo (t0+12ms) is 22 ms after Start.
	if want := t0.Add(-10 * time.Millisecond); !m.Start.Equal(want) {
		t.Errorf("Start = %v, want %v", m.Start, want)
	}
	want := []Result{
		{Agent: "eu", Seq: 0, Sched: 19 * ms, Sent: 20 * ms, Wrote: 21 * ms, TTFB: 30 * ms, Done: 31 * ms, Outcome: OutcomeResponse,
			Status: 200, Arrival: ptr(22 * ms)},
		{Agent: "us", Seq: 0, Sched: 25 * ms, Sent: 25 * ms, Outcome: OutcomeResponse, Status: 429},
		{Agent: "eu", Seq: 1, Sched: 40 * ms, Sent: 41 * ms, Outcome: OutcomeError, Err: ErrTimeout},
		{Agent: "us", Seq: 1, Sched: 41 * ms, Outcome: OutcomeNotSent, Err: "cap"},
		{Agent: "us", Seq: 2, Sched: 42 * ms, Sent: 42 * ms, Outcome: OutcomeResponse, Status: 200},
	}
	if !reflect.DeepEqual(m.Results, want) {
		t.Errorf("Merge results =\n%+v\nwant\n%+v", m.Results, want)
	}
	var refs []string
	for _, r := range m.Results {
		refs = append(refs, Ref(r))
	}
	if w := []string{"eu:0", "us:0", "eu:1", "us:1", "us:2"}; !reflect.DeepEqual(refs, w) {
		t.Errorf("refs = %v, want %v", refs, w)
	}
	if w := map[string]int64{"eu": 2 * ms, "us": 1 * ms}; !reflect.DeepEqual(m.Uncertainty, w) {
		t.Errorf("Uncertainty = %v, want %v", m.Uncertainty, w)
	}
	if m.Agents[0].ShiftNS != 0 || m.Agents[1].ShiftNS != 10*ms || m.Agents[1].Results != 3 || m.Agents[1].Run != 1 {
		t.Errorf("Agents = %+v", m.Agents)
	}
	if w := []string{`eu: record: line 9: unknown type "x" skipped`}; !reflect.DeepEqual(m.Warnings, w) {
		t.Errorf("Warnings = %q, want %q", m.Warnings, w)
	}
	if m.Complete() {
		t.Error("Complete() = true with us cut short")
	}
	// The inputs are untouched.
	if eu.Results[0].Agent != "" || *eu.Results[0].Arrival != 12*ms || us.Results[0].Sent != 15*ms {
		t.Errorf("Merge modified its input: %+v, %+v", eu.Results[0], us.Results[0])
	}
}

func TestMergeSingleRunKeepsTimes(t *testing.T) {
	run, err := Read(bytesReader(writeRun(t, 50, &End{Reason: ReasonCompleted})))
	if err != nil {
		t.Fatal(err)
	}
	run.Header.ClockOffsetNS = 123456 // shifts Start, not the agent's relative times
	m := Merge(run)
	if !m.Complete() || !m.Start.Equal(t0.Add(-123456)) || len(m.Results) != 50 {
		t.Fatalf("Merge(one run) = start %v, %d results, complete %v", m.Start, len(m.Results), m.Complete())
	}
	for i, r := range m.Results {
		orig := run.Results[i]
		orig.Agent = "a"
		if orig.Arrival != nil { // on the reference clock: Start moved under it
			orig.Arrival = ptr(*orig.Arrival + 123456)
		}
		if !reflect.DeepEqual(r, orig) {
			t.Errorf("merged result %d = %+v, want %+v", i, r, orig)
		}
	}
	if m := Merge(); len(m.Results) != 0 || !m.Start.IsZero() || m.Complete() {
		t.Errorf("Merge() = %+v, want empty", m)
	}
}

func TestMergeNames(t *testing.T) {
	tests := []struct {
		agents []string
		want   []string
	}{
		{[]string{"eu", "us"}, []string{"eu", "us"}},
		{[]string{"", "us"}, []string{"a1", "us"}},
		{[]string{"x", "x", "y"}, []string{"x", "x-2", "y"}},
		{[]string{"a1", "a1", "a1"}, []string{"a1", "a1-2", "a1-3"}},
		{[]string{"web-4242", "", "web-4242", "web-4242-2"}, []string{"web-4242", "a2", "web-4242-3", "web-4242-2"}},
		{[]string{"eu", "us", "eu", "", "us"}, []string{"eu", "us", "eu-2", "a4", "us-2"}},
		{[]string{"a2", "a2", ""}, []string{"a2", "a2-2", "a3"}},
		{[]string{"", ""}, []string{"a1", "a2"}},
		{[]string{"a2", ""}, []string{"a2", "a2-2"}},
		{[]string{"a1", "", "a1-2", ""}, []string{"a1", "a2", "a1-2", "a4"}},
	}
	for _, tt := range tests {
		var runs []*Run
		for _, a := range tt.agents {
			runs = append(runs, &Run{Header: Header{Agent: a, Start: t0}, Results: []Result{{Seq: 7}}})
		}
		m := Merge(runs...)
		var names, refAgents []string
		for _, a := range m.Agents {
			names = append(names, a.Name)
		}
		for _, r := range m.Results {
			refAgents = append(refAgents, r.Agent)
		}
		if !reflect.DeepEqual(names, tt.want) || !reflect.DeepEqual(refAgents, tt.want) {
			t.Errorf("Merge(agents %q) names %q, result agents %q; want %q", tt.agents, names, refAgents, tt.want)
		}
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		ref   string
		agent string
		seq   int64
		ok    bool
	}{
		{"eu:12", "eu", 12, true},
		{"host:8080:3", "host:8080", 3, true},
		{":0", "", 0, true},
		{"eu", "", 0, false},
		{"eu:x", "", 0, false},
	}
	for _, tt := range tests {
		agent, seq, err := ParseRef(tt.ref)
		if agent != tt.agent || seq != tt.seq || (err == nil) != tt.ok {
			t.Errorf("ParseRef(%q) = %q, %d, %v; want %q, %d, ok %v", tt.ref, agent, seq, err, tt.agent, tt.seq, tt.ok)
		}
		if tt.ok && Ref(Result{Agent: agent, Seq: seq}) != tt.ref {
			t.Errorf("Ref(ParseRef(%q)) = %q", tt.ref, Ref(Result{Agent: agent, Seq: seq}))
		}
	}
}
