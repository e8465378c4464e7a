package patterns

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	ms = time.Millisecond
	s  = time.Second
)

// offsets returns the At of every send.
func offsets(sc Schedule) []time.Duration {
	out := make([]time.Duration, len(sc.Sends))
	for i, snd := range sc.Sends {
		out[i] = snd.At
	}
	return out
}

func durs(ds ...time.Duration) []time.Duration { return ds }

// repeat returns n copies of d.
func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestShapes(t *testing.T) {
	tests := []struct {
		name     string
		build    func() (Schedule, error)
		want     []time.Duration
		duration time.Duration
	}{
		// 10/s for 2s: every 100ms, 0 … 1.9s, 2s itself excluded.
		{"steady 10/s 2s", func() (Schedule, error) { return Steady(10, 2*s) },
			durs(0, 100*ms, 200*ms, 300*ms, 400*ms, 500*ms, 600*ms, 700*ms, 800*ms, 900*ms,
				1000*ms, 1100*ms, 1200*ms, 1300*ms, 1400*ms, 1500*ms, 1600*ms, 1700*ms, 1800*ms, 1900*ms), 2 * s},
		// 3/s: offsets rounded to the nanosecond.
		{"steady 3/s 1s", func() (Schedule, error) { return Steady(3, s) },
			durs(0, 333333333, 666666667), s},
		// 1/m for 2m30s: at 0, 60s and 120s.
		{"steady 1/m 150s", func() (Schedule, error) { return Steady(1.0/60, 150*s) }, durs(0, 60*s, 120*s), 150 * s},
		// a rate too slow for a second request still sends the first.
		{"steady 0.5/s 1s", func() (Schedule, error) { return Steady(0.5, s) }, durs(0), s},
		// burst from idle: all at once.
		{"burst 8", func() (Schedule, error) { return Burst(8, 0) }, repeat(0, 8), 0},
		// burst of 4 spread over 100ms: 25ms apart, filling [0, 100ms).
		{"burst 4 spread 100ms", func() (Schedule, error) { return Burst(4, 100*ms) }, durs(0, 25*ms, 50*ms, 75*ms), 100 * ms},
		// edge at 1s with a 200ms gap: 3 at 900ms, 3 at 1.1s.
		{"edge 3 at 1s gap 200ms", func() (Schedule, error) { return Edge(3, s, 200*ms) },
			append(repeat(900*ms, 3), repeat(1100*ms, 3)...), 1100 * ms},
		// the edge may sit exactly gap/2 from the start.
		{"edge at gap/2", func() (Schedule, error) { return Edge(1, 50*ms, 100*ms) }, durs(0, 100*ms), 100 * ms},
		// recovery: one every 250ms for 1s: 4 requests.
		{"recovery 250ms 1s", func() (Schedule, error) { return Recovery(250*ms, s) }, durs(0, 250*ms, 500*ms, 750*ms), s},
		// recovery whose span is not a multiple: 0, 300, 600, 900.
		{"recovery 300ms 1s", func() (Schedule, error) { return Recovery(300*ms, s) }, durs(0, 300*ms, 600*ms, 900*ms), s},
		// race: 2 clients × 3 requests, all at 0.
		{"race 2x3", func() (Schedule, error) { return Race(2, 3, LastByte) }, repeat(0, 6), 0},
		// ramp 0 → 4/s over 1s: count(t) = 2t², so i at √(i/2) s: 0, 707ms; 2 requests (count(1s) = 2).
		{"ramp 0→4/s 1s", func() (Schedule, error) { return Ramp(0, 4, s) }, durs(0, 707106781), s},
		// ramp 2 → 2/s is steady 2/s.
		{"ramp flat", func() (Schedule, error) { return Ramp(2, 2, 2*s) }, durs(0, 500*ms, s, 1500*ms), 2 * s},
		// ramp 1 → 3/s over 2s: count(t) = t + t²/2: i=1 at √3−1, i=2 at √5−1, i=3 at √7−1.
		{"ramp 1→3/s 2s", func() (Schedule, error) { return Ramp(1, 3, 2*s) },
			durs(0, 732050808, 1236067977, 1645751311), 2 * s},
		// ramp down 4 → 0/s over 1s: count(t) = 4t − 2t²: i=1 at 1−√0.5, total 2 (the second would be due at 1s).
		{"ramp 4→0/s 1s", func() (Schedule, error) { return Ramp(4, 0, s) }, durs(0, 292893219), s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := tt.build()
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got := offsets(sc); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("offsets = %v, want %v", got, tt.want)
			}
			if sc.Duration != tt.duration {
				t.Errorf("Duration = %v, want %v", sc.Duration, tt.duration)
			}
			if len(sc.Phases) != 1 || sc.Phases[0].Requests != len(tt.want) || sc.Phases[0].Duration != tt.duration {
				t.Errorf("Phases = %+v, want one phase of %d requests lasting %v", sc.Phases, len(tt.want), tt.duration)
			}
			for _, snd := range sc.Sends {
				if snd.Phase != sc.Phases[0].Pattern {
					t.Errorf("send %+v: Phase = %q, want %q", snd, snd.Phase, sc.Phases[0].Pattern)
				}
			}
		})
	}
}

func TestRaceClientsAndBatch(t *testing.T) {
	sc, err := Race(3, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Send{
		{Client: 0, Batch: 1, Phase: "race"}, {Client: 1, Batch: 1, Phase: "race"}, {Client: 2, Batch: 1, Phase: "race"},
		{Client: 0, Batch: 1, Phase: "race"}, {Client: 1, Batch: 1, Phase: "race"}, {Client: 2, Batch: 1, Phase: "race"},
	}
	if !reflect.DeepEqual(sc.Sends, want) {
		t.Errorf("Race(3, 2, \"\").Sends = %+v, want %+v", sc.Sends, want)
	}
	if sc.Clients != 3 || sc.RaceMode != Barrier || sc.Batches() != 1 {
		t.Errorf("Race(3, 2, \"\") = clients %d, mode %q, %d batches; want 3, barrier, 1", sc.Clients, sc.RaceMode, sc.Batches())
	}
}

func TestParamErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func() (Schedule, error)
		param string
	}{
		{"steady rate 0", func() (Schedule, error) { return Steady(0, s) }, "rate"},
		{"steady rate NaN", func() (Schedule, error) { return Steady(nan(), s) }, "rate"},
		{"steady duration 0", func() (Schedule, error) { return Steady(1, 0) }, "duration"},
		{"steady too many", func() (Schedule, error) { return Steady(1e6, 2*s) }, "requests"},
		{"burst count 0", func() (Schedule, error) { return Burst(0, 0) }, "count"},
		{"burst spread < 0", func() (Schedule, error) { return Burst(3, -ms) }, "spread"},
		{"edge count 0", func() (Schedule, error) { return Edge(0, s, ms) }, "count"},
		{"edge gap 0", func() (Schedule, error) { return Edge(1, s, 0) }, "gap"},
		{"edge too soon", func() (Schedule, error) { return Edge(1, 10*ms, 100*ms) }, "at"},
		{"recovery every 0", func() (Schedule, error) { return Recovery(0, s) }, "every"},
		{"recovery span 0", func() (Schedule, error) { return Recovery(s, 0) }, "span"},
		{"race clients 0", func() (Schedule, error) { return Race(0, 1, Barrier) }, "clients"},
		{"race count 0", func() (Schedule, error) { return Race(1, 0, Barrier) }, "count"},
		{"race mode", func() (Schedule, error) { return Race(1, 1, "pigeon") }, "race-mode"},
		{"ramp from < 0", func() (Schedule, error) { return Ramp(-1, 1, s) }, "from"},
		{"ramp both 0", func() (Schedule, error) { return Ramp(0, 0, s) }, "to"},
		{"ramp duration", func() (Schedule, error) { return Ramp(1, 2, 0) }, "duration"},
		{"pause 0", func() (Schedule, error) { return Pause(0) }, "pause"},
	}
	for _, tt := range tests {
		_, err := tt.build()
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tt.param {
			t.Errorf("%s: err = %v, want a ParamError naming %q", tt.name, err, tt.param)
			continue
		}
		if !strings.HasPrefix(err.Error(), "patterns: ") || !strings.Contains(err.Error(), tt.param) {
			t.Errorf("%s: message %q does not start with patterns: and name %s", tt.name, err, tt.param)
		}
	}
}

func nan() float64 { var z float64; return z / z }

func TestPerClient(t *testing.T) {
	b, _ := Burst(2, 10*ms)
	sc, err := b.PerClient(3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Send{
		{At: 0, Client: 0, Phase: "burst"}, {At: 0, Client: 1, Phase: "burst"}, {At: 0, Client: 2, Phase: "burst"},
		{At: 5 * ms, Client: 0, Phase: "burst"}, {At: 5 * ms, Client: 1, Phase: "burst"}, {At: 5 * ms, Client: 2, Phase: "burst"},
	}
	if !reflect.DeepEqual(sc.Sends, want) || sc.Clients != 3 || sc.Phases[0].Requests != 6 {
		t.Errorf("Burst(2,10ms).PerClient(3) = %+v (clients %d, phase %+v), want %+v", sc.Sends, sc.Clients, sc.Phases, want)
	}
	if len(b.Sends) != 2 || b.Clients != 1 {
		t.Errorf("PerClient modified its receiver: %+v", b)
	}
	// A race played per client equals a race of that many clients.
	r1, _ := Race(1, 2, LastByte)
	r3, _ := r1.PerClient(3)
	direct, _ := Race(3, 2, LastByte)
	if !reflect.DeepEqual(r3.Sends, direct.Sends) || r3.Clients != direct.Clients {
		t.Errorf("Race(1,2).PerClient(3) = %+v, want Race(3,2) = %+v", r3.Sends, direct.Sends)
	}
}

func TestSequence(t *testing.T) {
	burst, _ := Burst(2, 0)
	pause, _ := Pause(2 * s)
	race1, _ := Race(2, 1, LastByte)
	steady, _ := Steady(2, s)
	race2, _ := Race(1, 2, LastByte)
	sc, err := Sequence(burst, pause, race1, steady, race2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Send{
		{At: 0, Phase: "burst"}, {At: 0, Phase: "burst"},
		{At: 2 * s, Client: 0, Batch: 1, Phase: "race"}, {At: 2 * s, Client: 1, Batch: 1, Phase: "race"},
		{At: 2 * s, Phase: "steady"}, {At: 2500 * ms, Phase: "steady"},
		{At: 3 * s, Batch: 2, Phase: "race"}, {At: 3 * s, Batch: 2, Phase: "race"},
	}
	if !reflect.DeepEqual(sc.Sends, want) {
		t.Errorf("Sends = %+v\nwant    %+v", sc.Sends, want)
	}
	if sc.Duration != 3*s || sc.Clients != 2 || sc.RaceMode != LastByte || sc.Batches() != 2 {
		t.Errorf("Duration %v clients %d mode %q batches %d; want 3s 2 last-byte 2", sc.Duration, sc.Clients, sc.RaceMode, sc.Batches())
	}
	wantPhases := []PhaseInfo{
		{Name: "burst", Pattern: "burst", Offset: 0, Duration: 0, Requests: 2},
		{Name: "pause", Pattern: "pause", Offset: 0, Duration: 2 * s},
		{Name: "race", Pattern: "race", Offset: 2 * s, Duration: 0, Requests: 2},
		{Name: "steady", Pattern: "steady", Offset: 2 * s, Duration: s, Requests: 2},
		{Name: "race", Pattern: "race", Offset: 3 * s, Duration: 0, Requests: 2},
	}
	if !reflect.DeepEqual(sc.Phases, wantPhases) {
		t.Errorf("Phases = %+v\nwant     %+v", sc.Phases, wantPhases)
	}

	other, _ := Race(1, 1, SinglePacket)
	if _, err := Sequence(race1, other); err == nil || !strings.Contains(err.Error(), "race mode") {
		t.Errorf("Sequence of last-byte and single-packet races: err = %v, want a race mode conflict", err)
	}
	anchored := steady
	anchored.Start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if sc, err := Sequence(anchored, burst); err != nil || !sc.Start.Equal(anchored.Start) {
		t.Errorf("Sequence(anchored, burst) = start %v, %v; want the first phase's start", sc.Start, err)
	}
	if _, err := Sequence(burst, anchored); err == nil {
		t.Errorf("Sequence(burst, anchored) succeeded; only the first phase may be anchored")
	}
}

func TestJitter(t *testing.T) {
	base, _ := Steady(10, s)
	a, err := base.Jitter(50*ms, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := base.Jitter(50*ms, 42)
	c, _ := base.Jitter(50*ms, 43)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed gave different schedules")
	}
	if reflect.DeepEqual(a.Sends, c.Sends) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
	for i, snd := range a.Sends {
		if i > 0 && snd.At < a.Sends[i-1].At {
			t.Errorf("jittered sends not sorted at %d: %v after %v", i, snd.At, a.Sends[i-1].At)
		}
	}
	// every send moved by [0, 50ms) from a distinct 100ms slot.
	for i, snd := range a.Sends {
		slot := time.Duration(i) * 100 * ms
		if snd.At < slot || snd.At >= slot+50*ms {
			t.Errorf("send %d at %v, want in [%v, %v)", i, snd.At, slot, slot+50*ms)
		}
	}
	race, _ := Race(2, 2, Barrier)
	rj, _ := race.Jitter(time.Second, 1)
	if !reflect.DeepEqual(rj.Sends, race.Sends) {
		t.Errorf("jitter moved batched sends: %+v", rj.Sends)
	}
}

func TestNextEdge(t *testing.T) {
	base := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		at            time.Time
		period, phase time.Duration
		want          time.Time
	}{
		{base, time.Minute, 0, base},                                              // on the edge
		{base.Add(ms), time.Minute, 0, base.Add(time.Minute)},                     // just after: next minute
		{base.Add(10 * s), time.Minute, 15 * s, base.Add(15 * s)},                 // shifted windows
		{base.Add(20 * s), time.Minute, 15 * s, base.Add(75 * s)},                 // past the shifted edge
		{base.Add(999 * ms), s, 0, base.Add(s)},                                   // second windows
		{time.Unix(-1, 0), time.Minute, 0, time.Unix(0, 0)},                       // before the epoch
		{base.Add(7 * s), 10 * s, 0, base.Add(10 * s)},                            // 10s windows
		{base.In(time.FixedZone("X", 3600)), time.Hour, 0, base.In(time.UTC)},     // zones do not matter
		{base.Add(1), time.Hour, 0, base.Add(time.Hour)},                          // 1ns late
		{base.Add(-time.Nanosecond), time.Hour, 0, base},                          // 1ns early
		{base.Add(30 * time.Minute), 24 * time.Hour, 0, base.Add(12 * time.Hour)}, // UTC days
	}
	for _, tt := range tests {
		if got := NextEdge(tt.at, tt.period, tt.phase); !got.Equal(tt.want) {
			t.Errorf("NextEdge(%v, %v, %v) = %v, want %v", tt.at, tt.period, tt.phase, got, tt.want)
		}
	}
}
