package patterns

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStreamedMatchesSchedule checks that a streamed schedule produces the
// very sends, phases, clients and duration of the slice schedule of the
// same plan, and that Len counts them without producing them.
func TestStreamedMatchesSchedule(t *testing.T) {
	tests := []struct {
		name, plan string
	}{
		{"steady", "version: 1\nphases:\n  - pattern: steady\n    rate: 7/s\n    duration: 3s\n"},
		{"steady odd rate", "version: 1\nphases:\n  - pattern: steady\n    rate: 3/s\n    duration: 1001ms\n"},
		{"steady fast", "version: 1\nphases:\n  - pattern: steady\n    rate: 99999/s\n    duration: 1s\n"},
		{"ramp up", "version: 1\nphases:\n  - pattern: ramp\n    from: 1/s\n    to: 100/s\n    duration: 2s\n"},
		{"ramp down", "version: 1\nphases:\n  - pattern: ramp\n    from: 90/s\n    to: 2/s\n    duration: 1500ms\n"},
		{"ramp flat", "version: 1\nphases:\n  - pattern: ramp\n    from: 10/s\n    to: 10/s\n    duration: 1s\n"},
		{"recovery", "version: 1\nphases:\n  - pattern: recovery\n    every: 300ms\n    span: 2s\n"},
		{"plan", `version: 1
phases:
  - pattern: steady
    rate: 5/s
    duration: 1s
    clients: 3
  - pause: 2s
  - pattern: ramp
    from: 1/s
    to: 20/s
    duration: 2s
    clients: 2
  - pattern: recovery
    every: 1s
    span: 3s
  - pattern: steady
    rate: 2/s
    duration: 1s
    name: tail
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := LoadPlan(strings.NewReader(tc.plan), "plan.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !p.Streamable() {
				t.Fatal("Streamable = false, want true")
			}
			want, err := p.Schedule(3, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Streamed(3, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Streamed() || got.Sends != nil {
				t.Fatalf("Streamed() = %v with %d Sends, want a streamed schedule without Sends", got.Streamed(), len(got.Sends))
			}
			if n := got.Len(); n != int64(len(want.Sends)) {
				t.Errorf("Len = %d, want %d", n, len(want.Sends))
			}
			if sends := slices.Collect(got.All()); !reflect.DeepEqual(sends, want.Sends) {
				t.Errorf("All = %v\nwant  %v", sends, want.Sends)
			}
			if !reflect.DeepEqual(got.Phases, want.Phases) || got.Clients != want.Clients || got.Duration != want.Duration {
				t.Errorf("phases %+v clients %d duration %v\nwant   %+v clients %d duration %v",
					got.Phases, got.Clients, got.Duration, want.Phases, want.Clients, want.Duration)
			}
		})
	}
}

// TestStreamedBeyondMaxSends checks that a streamed plan is not bound by
// MaxSends (its sends are counted, never held), while the same plan as a
// slice still is.
func TestStreamedBeyondMaxSends(t *testing.T) {
	p, err := LoadPlan(strings.NewReader("version: 1\nphases:\n  - pattern: steady\n    rate: 400000/s\n    duration: 3s\n"), "plan.yaml")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	sc, err := p.Streamed(1, time.Time{})
	if err != nil {
		t.Fatalf("Streamed: %v", err)
	}
	if n := sc.Len(); n != 1_200_000 {
		t.Errorf("Len = %d, want 1200000", n)
	}
	var n int64
	last := time.Duration(-1)
	for snd := range sc.All() {
		if snd.At < last {
			t.Fatalf("send %d at %v before the previous one at %v", n, snd.At, last)
		}
		last = snd.At
		n++
	}
	if n != 1_200_000 || last >= 3*time.Second {
		t.Errorf("All gave %d sends, the last at %v; want 1200000 before 3s", n, last)
	}
	if _, err := p.Schedule(1, time.Time{}); err == nil || !strings.Contains(err.Error(), "may hold") {
		t.Errorf("Schedule = %v, want the MaxSends refusal", err)
	}
}

// TestStreamableFallsBack checks which plans stream: steady, ramp and
// recovery without jitter, and pauses; any other phase makes Streamed
// return Schedule's slice schedule.
func TestStreamableFallsBack(t *testing.T) {
	tests := []struct {
		name, plan string
		streams    bool
	}{
		{"steady", "version: 1\nphases:\n  - pattern: steady\n    rate: 5/s\n    duration: 1s\n", true},
		{"jitter", "version: 1\nphases:\n  - pattern: steady\n    rate: 5/s\n    duration: 1s\n    jitter: 10ms\n", false},
		{"burst", "version: 1\nphases:\n  - pattern: burst\n    count: 3\n  - pause: 1s\n  - pattern: steady\n    rate: 5/s\n    duration: 1s\n", false},
		{"race", "version: 1\nphases:\n  - pattern: race\n    count: 3\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := LoadPlan(strings.NewReader(tc.plan), "plan.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Streamable(); got != tc.streams {
				t.Errorf("Streamable = %v, want %v", got, tc.streams)
			}
			sc, err := p.Streamed(1, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if sc.Streamed() != tc.streams {
				t.Errorf("Streamed() = %v, want %v", sc.Streamed(), tc.streams)
			}
			want, _ := p.Schedule(1, time.Time{})
			if got := slices.Collect(sc.All()); !reflect.DeepEqual(got, want.Sends) || sc.Len() != int64(len(want.Sends)) {
				t.Errorf("All/Len differ from Schedule's %d sends", len(want.Sends))
			}
		})
	}
}
