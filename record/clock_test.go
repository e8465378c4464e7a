package record

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRunClock: which clock estimate a run's agent is merged with. The
// header's (a --time-ref measurement, made before the run) wins; a header
// with offset and uncertainty both zero measured nothing, and then the end
// line's estimate (from the run's Date headers) counts.
func TestRunClock(t *testing.T) {
	dateEnd := &End{Reason: ReasonCompleted, ClockOffsetNS: 40 * ms, ClockUncertaintyNS: 300 * ms, ClockSource: ClockSourceDate}
	tests := []struct {
		name     string
		header   Header
		end      *End
		off, unc int64
		source   string
	}{
		{"nothing measured", Header{}, &End{Reason: ReasonCompleted}, 0, 0, ""},
		{"cut short, nothing measured", Header{}, nil, 0, 0, ""},
		{"header only", Header{ClockOffsetNS: 10 * ms, ClockUncertaintyNS: 2 * ms}, &End{Reason: ReasonCompleted}, 10 * ms, 2 * ms, ClockSourceTimeRef},
		{"end only", Header{}, dateEnd, 40 * ms, 300 * ms, ClockSourceDate},
		{"header wins over end", Header{ClockOffsetNS: 10 * ms, ClockUncertaintyNS: 2 * ms}, dateEnd, 10 * ms, 2 * ms, ClockSourceTimeRef},
		{"header with only an uncertainty is measured", Header{ClockUncertaintyNS: 1 * ms}, dateEnd, 0, 1 * ms, ClockSourceTimeRef},
		{"end uncertainty is a magnitude", Header{}, &End{ClockOffsetNS: -5 * ms, ClockUncertaintyNS: -7 * ms}, -5 * ms, 7 * ms, ""},
		{"an exact end estimate of zero still counts", Header{}, &End{ClockSource: ClockSourceDate}, 0, 0, ClockSourceDate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Run{Header: tt.header, End: tt.end}
			off, unc, src := r.Clock()
			if off != tt.off || unc != tt.unc || src != tt.source {
				t.Errorf("Clock() = %d, %d, %q; want %d, %d, %q", off, unc, src, tt.off, tt.unc, tt.source)
			}
		})
	}
}

// TestMergeUsesEndClock: an agent whose header has no clock offset is put
// on the reference clock with its end line's estimate; one whose header
// has one keeps the header's, whatever its end says.
func TestMergeUsesEndClock(t *testing.T) {
	res := []Result{{Seq: 0, Sched: 10 * ms, Sent: 10 * ms, Wrote: 11 * ms, TTFB: 20 * ms, Outcome: OutcomeResponse, Status: 200}}
	// ahead's clock is 1 s ahead of the target's, as its Date estimate says.
	ahead := &Run{Header: Header{Agent: "ahead", Start: t0}, Results: res,
		End: &End{Reason: ReasonCompleted, ClockOffsetNS: 1000 * ms, ClockUncertaintyNS: 300 * ms, ClockSource: ClockSourceDate}}
	// exact measured against --time-ref; its end's estimate is ignored.
	exact := &Run{Header: Header{Agent: "exact", Start: t0, ClockUncertaintyNS: 1 * ms}, Results: res,
		End: &End{Reason: ReasonCompleted, ClockOffsetNS: 500 * ms, ClockUncertaintyNS: 400 * ms, ClockSource: ClockSourceDate}}
	m := Merge(ahead, exact)
	if want := t0.Add(-time.Second); !m.Start.Equal(want) {
		t.Errorf("Start = %v, want %v (ahead's start corrected by its end's offset)", m.Start, want)
	}
	if m.Agents[0].ShiftNS != 0 || m.Agents[1].ShiftNS != 1000*ms {
		t.Errorf("shifts = %d, %d; want 0, %d", m.Agents[0].ShiftNS, m.Agents[1].ShiftNS, 1000*ms)
	}
	if w := map[string]int64{"ahead": 300 * ms, "exact": 1 * ms}; m.Uncertainty["ahead"] != w["ahead"] || m.Uncertainty["exact"] != w["exact"] {
		t.Errorf("Uncertainty = %v, want %v", m.Uncertainty, w)
	}
	// ahead:0 went out at t0+10ms on its clock, t0−990ms on the target's:
	// first; exact:0 at t0+10ms.
	if got := []string{Ref(m.Results[0]), Ref(m.Results[1])}; got[0] != "ahead:0" || m.Results[0].Sent != 10*ms || m.Results[1].Sent != 1010*ms {
		t.Errorf("merged = %+v", m.Results)
	}
}

// TestMergePlacesTheEpochOfALoneRun: a lone run keeps its own times, and
// its end line's Date estimate places the reference clock's epoch under
// them instead (EpochOffsetNS, EpochUncertaintyNS); a --time-ref
// measurement moves the times, several runs are on the reference clock,
// and a run without an estimate leaves ClockSource empty.
func TestMergePlacesTheEpochOfALoneRun(t *testing.T) {
	echo := 15 * ms // on the reference clock, as the run's reader placed it
	res := []Result{{Seq: 0, Sched: 10 * ms, Sent: 10 * ms, Wrote: 11 * ms, TTFB: 20 * ms, Outcome: OutcomeResponse, Status: 200, Arrival: &echo}}
	dated := func() *Run {
		return &Run{Header: Header{Agent: "a", Start: t0}, Results: res,
			End: &End{Reason: ReasonCompleted, ClockOffsetNS: 700 * ms, ClockUncertaintyNS: 20 * ms, ClockSource: ClockSourceDate}}
	}
	timeRef := &Run{Header: Header{Agent: "r", Start: t0, ClockOffsetNS: 700 * ms, ClockUncertaintyNS: 2 * ms}, Results: res,
		End: &End{Reason: ReasonCompleted}}
	none := &Run{Header: Header{Agent: "n", Start: t0}, Results: res, End: &End{Reason: ReasonCompleted}}
	tests := []struct {
		name           string
		runs           []*Run
		start          time.Time
		offset, unc    int64
		source         string
		firstSentAfter int64
		arrival        int64 // the first result's echo
	}{
		{"a lone run with a Date estimate", []*Run{dated()}, t0, 700 * ms, 20 * ms, ClockSourceDate, 10 * ms, 695 * ms},
		{"a lone run measured against --time-ref", []*Run{timeRef}, t0.Add(-700 * time.Millisecond), 0, 0, ClockSourceTimeRef, 10 * ms, 715 * ms},
		{"a lone run without an estimate", []*Run{none}, t0, 0, 0, "", 10 * ms, 15 * ms},
		{"two runs with estimates", []*Run{dated(), timeRef}, t0.Add(-700 * time.Millisecond), 0, 0, ClockSourceDate, 10 * ms, 715 * ms},
		{"two runs, one without an estimate", []*Run{dated(), none}, t0.Add(-700 * time.Millisecond), 0, 0, "", 10 * ms, 715 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Merge(tt.runs...)
			if !m.Start.Equal(tt.start) || m.EpochOffsetNS != tt.offset || m.EpochUncertaintyNS != tt.unc || m.ClockSource != tt.source {
				t.Errorf("Start %v, epoch offset %d ± %d, source %q; want %v, %d ± %d, %q",
					m.Start, m.EpochOffsetNS, m.EpochUncertaintyNS, m.ClockSource, tt.start, tt.offset, tt.unc, tt.source)
			}
			if a := m.Results[0].Arrival; a == nil || *a != tt.arrival {
				t.Errorf("first result's echo at %v, want %d", a, tt.arrival)
			}
			if m.Results[0].Sent != tt.firstSentAfter {
				t.Errorf("first result sent at %d, want %d", m.Results[0].Sent, tt.firstSentAfter)
			}
		})
	}
}

// TestEndClockRoundTrip: the end line's clock fields are written only when
// set, read back, and absent from old files without harm.
func TestEndClockRoundTrip(t *testing.T) {
	end := End{Reason: ReasonCompleted, Scheduled: 3, Sent: 3, ClockOffsetNS: -12 * ms, ClockUncertaintyNS: 480 * ms, ClockSource: ClockSourceDate}
	b := writeRun(t, 3, &end)
	if !bytes.Contains(b, []byte(`"clock_offset_ns":-12000000,"clock_uncertainty_ns":480000000,"clock_source":"date"`)) {
		t.Errorf("end line without its clock fields:\n%s", b)
	}
	run, err := Read(bytesReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if run.End == nil || run.End.ClockOffsetNS != end.ClockOffsetNS || run.End.ClockUncertaintyNS != end.ClockUncertaintyNS || run.End.ClockSource != end.ClockSource {
		t.Errorf("end read back as %+v, want %+v", run.End, end)
	}

	old := writeRun(t, 3, &End{Reason: ReasonCompleted, Scheduled: 3, Sent: 3})
	lines := strings.Split(strings.TrimSpace(string(old)), "\n")
	if last := lines[len(lines)-1]; strings.Contains(last, "clock_") {
		t.Errorf("end line without an estimate writes clock fields: %s", last)
	}
	run, err = Read(bytesReader(old))
	if err != nil {
		t.Fatal(err)
	}
	if off, unc, src := run.Clock(); off != 0 || unc != 0 || src != "" {
		t.Errorf("old file: Clock() = %d, %d, %q; want nothing", off, unc, src)
	}
}
