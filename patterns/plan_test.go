package patterns

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/problem"
)

const examplePlan = `version: 1
phases:
  - pattern: burst
    count: 8
  - pause: 2s
  - pattern: steady
    rate: 5/s
    duration: 1s
    clients: 2
`

func TestLoadPlanExample(t *testing.T) {
	p, err := LoadPlan(strings.NewReader(examplePlan), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Phase{
		{Pattern: "burst", Count: 8},
		{Pause: Duration(2 * s)},
		{Pattern: "steady", Rate: 5, Duration: Duration(s), Clients: 2},
	}
	if p.Version != 1 || !reflect.DeepEqual(p.Phases, want) {
		t.Fatalf("LoadPlan = %+v, want version 1 and %+v", p, want)
	}
	sc, err := p.Schedule(7, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, snd := range sc.Sends {
		got = append(got, snd.At.String()+"/"+snd.Phase+"/"+string(rune('0'+snd.Client)))
	}
	wantSends := []string{
		"0s/burst/0", "0s/burst/0", "0s/burst/0", "0s/burst/0", "0s/burst/0", "0s/burst/0", "0s/burst/0", "0s/burst/0",
		"2s/steady/0", "2s/steady/1", "2.2s/steady/0", "2.2s/steady/1", "2.4s/steady/0", "2.4s/steady/1",
		"2.6s/steady/0", "2.6s/steady/1", "2.8s/steady/0", "2.8s/steady/1",
	}
	if !reflect.DeepEqual(got, wantSends) {
		t.Errorf("sends = %v\nwant    %v", got, wantSends)
	}
	if sc.Duration != 3*s || sc.Clients != 2 || !sc.Start.IsZero() {
		t.Errorf("Duration %v Clients %d Start %v; want 3s, 2, zero", sc.Duration, sc.Clients, sc.Start)
	}
	if p.MaxRate() != 10 {
		t.Errorf("MaxRate = %v, want 10 (5/s × 2 clients)", p.MaxRate())
	}
}

func TestLoadPlanJSON(t *testing.T) {
	const js = `{"version": 1, "phases": [
	  {"pattern": "race", "count": 2, "clients": 3, "race-mode": "last-byte"},
	  {"pattern": "recovery", "every": "500ms", "span": "2s", "name": "trickle"}
	]}`
	p, err := LoadPlan(strings.NewReader(js), "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := p.Schedule(0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Sends) != 6+4 || sc.RaceMode != LastByte || sc.Clients != 3 || sc.Sends[6].Phase != "trickle" {
		t.Errorf("schedule = %+v; want 6 racing sends, then 4 named trickle, last-byte, 3 clients", sc)
	}
}

func TestPlanNames(t *testing.T) {
	const y = `version: 1
phases:
  - {pattern: burst, count: 1}
  - {pause: 1s}
  - {pattern: burst, count: 1, name: second}
  - {pattern: steady, rate: 1/s, duration: 1s}
  - {pattern: burst, count: 1}
`
	p, err := LoadPlan(strings.NewReader(y), "p")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := p.Schedule(0, time.Time{})
	var names []string
	for _, ph := range sc.Phases {
		names = append(names, ph.Name)
	}
	want := []string{"burst#1", "pause", "second", "steady", "burst#2"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("phase names = %v, want %v", names, want)
	}
}

// TestLoadPlanErrors: every problem is reported at once, with its line.
func TestLoadPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // each must appear in the message
	}{
		{"empty", "", []string{"p.yaml: the plan is empty"}},
		{"syntax", "version: 1\nphases: [\n", []string{"p.yaml:"}},
		{"not a mapping", "- 1\n", []string{"p.yaml:1: a plan must be a mapping"}},
		{"unknown keys", "version: 1\nphases:\n  - pattern: burst\n    count: 8\n    rte: 5/s\nextra: 1\n",
			[]string{`p.yaml:5: unknown key "rte" (known keys: name, pattern`, `p.yaml:6: unknown key "extra" (known keys: version, phases)`}},
		{"bad values all at once", "version: 1\nphases:\n  - pattern: steady\n    rate: 5\n    duration: 10\n  - pattern: burst\n    count: many\n",
			[]string{`p.yaml:4: rate "5" has no unit`, `p.yaml:5: duration "10" has no unit`, `p.yaml:7: "many" is not a whole number`}},
		{"duplicate key", "version: 1\nversion: 1\nphases: []\n", []string{`p.yaml:2: mapping key "version" already defined at line 1`}},
		{"version", "phases:\n  - pattern: burst\n    count: 1\n", []string{"version is missing"}},
		{"version 2", "version: 2\nphases:\n  - pattern: burst\n    count: 1\n", []string{"version 2 is not supported"}},
		{"no phases", "version: 1\nphases: []\n", []string{"at least one phase"}},
		{"semantics all at once", `version: 1
phases:
  - pattern: stedy
  - count: 3
  - pattern: steady
    rate: 5/s
  - pattern: burst
    count: 0
  - pattern: steady
    rate: 5/s
    duration: 1s
    count: 4
  - pause: 1s
    count: 2
  - pattern: edge
    count: 1
    gap: 100ms
  - pattern: edge
    count: 1
    gap: 100ms
    at: 5
  - pattern: race
    count: 2
    race-mode: last-byte
    jitter: 1s
  - pattern: race
    count: 2
  - pattern: ramp
    from: 1/s
    to: 2/s
    duration: 1s
    clients: 0
`, []string{
			`p.yaml:3: phase 1 (stedy): pattern "stedy" is not one of steady, burst, edge, recovery, race, ramp`,
			`p.yaml:4: phase 2: set pattern`,
			`p.yaml:5: phase 3 (steady): duration is required`,
			`p.yaml:8: phase 4 (burst): count must be at least 1, not 0`,
			`p.yaml:12: phase 5 (steady): count does not apply to steady (it takes rate, duration, jitter)`,
			`p.yaml:14: phase 6: count does not apply to a pause`,
			`p.yaml:15: phase 7 (edge): set at (where the window edge is) or period`,
			`p.yaml:21: phase 8 (edge): at "5" has no unit`,
			`p.yaml:25: phase 9 (race): jitter does not apply to race`,
			`p.yaml:26: phase 10 (race): race-mode barrier differs from last-byte (line 24)`,
			`p.yaml:32: phase 11 (ramp): clients must be at least 1, not 0`,
		}},
		{"edge too soon", "version: 1\nphases:\n  - pattern: edge\n    count: 1\n    gap: 1s\n    at: 100ms\n",
			[]string{"p.yaml:6: phase 1 (edge): at must leave room"}},
		{"edge both", "version: 1\nphases:\n  - pattern: edge\n    count: 1\n    gap: 1s\n    at: 2s\n    period: 1m\n",
			[]string{"p.yaml:7: phase 1 (edge): set at or period, not both"}},
		{"edge phase range", "version: 1\nphases:\n  - pattern: edge\n    count: 1\n    gap: 1s\n    period: 1m\n    phase: 2m\n",
			[]string{"p.yaml:7: phase 1 (edge): phase must be in [0, period)"}},
		// A plan that is built in memory (a burst makes it so) keeps the
		// MaxSends ceiling; a streamed one does not (stream_test.go).
		{"too many", "version: 1\nphases:\n  - pattern: burst\n    count: 1\n  - pattern: steady\n    rate: 600000/s\n    duration: 1s\n  - pattern: steady\n    rate: 600000/s\n    duration: 1s\n",
			[]string{"more than the 1000000 one schedule may hold"}},
		{"too many streamed", "version: 1\nphases:\n  - pattern: steady\n    rate: 1000000000/s\n    duration: 1000000h\n",
			[]string{"one streamed schedule may hold"}},
		{"two documents", "version: 1\nphases: [{pattern: burst, count: 1}]\n---\nversion: 1\n", []string{"one YAML document"}},
		{"duplicate names", "version: 1\nphases:\n  - {pattern: burst, count: 1, name: a}\n  - {pattern: burst, count: 1, name: a}\n",
			[]string{`p.yaml:4: phase 2 (burst): name "a" is already used by phase 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LoadPlan(strings.NewReader(tt.in), "p.yaml")
			if err == nil {
				t.Fatalf("LoadPlan = %+v, want an error", p)
			}
			if p != nil {
				t.Errorf("LoadPlan returned a plan with its error")
			}
			var pe *problem.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *problem.Error", err)
			}
			for _, pr := range pe.Problems {
				if pr.File != "p.yaml" {
					t.Errorf("problem %#v does not name the file p.yaml", pr)
				}
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "patterns: invalid plan") {
				t.Errorf("message %q does not start with patterns: invalid plan", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			if len(tt.want) > 1 && len(pe.Problems) < len(tt.want) {
				t.Errorf("%d problems reported, want at least %d:\n%s", len(pe.Problems), len(tt.want), msg)
			}
		})
	}
}

func TestPlanEdgeClock(t *testing.T) {
	const y = `version: 1
phases:
  - pattern: burst
    count: 1
  - pause: 1s
  - pattern: edge
    count: 2
    gap: 200ms
    period: 10s
    phase: 3s
`
	p, err := LoadPlan(strings.NewReader(y), "edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !p.NeedsStart() {
		t.Fatalf("NeedsStart = false for an edge with period")
	}
	if _, err := p.Schedule(0, time.Time{}); err == nil {
		t.Errorf("Schedule without a start succeeded")
	}
	// start at :00.5; the edge phase begins at :01.5, so its edge is the
	// first :x3 at or after :01.6 — :03; the groups are due at 2.9s and
	// 3.1s from :01.5, i.e. offsets 2.4s and 2.6s of the schedule.
	start := time.Date(2030, 1, 1, 0, 0, 0, 500e6, time.UTC)
	sc, err := p.Schedule(0, start)
	if err != nil {
		t.Fatal(err)
	}
	want := durs(0, 2400*ms, 2400*ms, 2600*ms, 2600*ms)
	if got := offsets(sc); !reflect.DeepEqual(got, want) {
		t.Errorf("offsets = %v, want %v", got, want)
	}
	if !sc.Start.Equal(start) || sc.Duration != 2600*ms {
		t.Errorf("Start %v Duration %v; want %v and 2.6s", sc.Start, sc.Duration, start)
	}

	// at as a time of day.
	p2, err := LoadPlan(strings.NewReader("version: 1\nphases:\n  - {pattern: edge, count: 1, gap: 1s, at: \"00:00:05\"}\n"), "at.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc2, err := p2.Schedule(0, start)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := offsets(sc2), durs(4*s, 5*s); !reflect.DeepEqual(got, want) {
		t.Errorf("edge at 00:00:05 from 00:00:00.5: offsets %v, want %v", got, want)
	}
	// an edge time too close to the start is refused when scheduling.
	if _, err := p2.Schedule(0, start.Add(4200*ms)); err == nil || !strings.Contains(err.Error(), "too soon") {
		t.Errorf("edge 200ms after start with a 1s gap: err = %v, want too soon", err)
	}
}

func TestPlanFromCode(t *testing.T) {
	p := &Plan{Version: 1, Phases: []Phase{{Pattern: "steady", Rate: 2}}}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), "plan: phase 1 (steady): duration is required") {
		t.Errorf("Validate = %v, want duration is required", err)
	}
	p.Phases[0].Duration = Duration(s)
	if err := p.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

// TestPlanRoundTrip: a plan marshalled to JSON loads back equal.
func TestPlanRoundTrip(t *testing.T) {
	p, err := LoadPlan(strings.NewReader(examplePlan), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"phases":[{"pattern":"burst","count":8},{"pause":"2s"},{"pattern":"steady","clients":2,"rate":"5/s","duration":"1s"}]}`
	if string(js) != want {
		t.Errorf("json = %s\nwant   %s", js, want)
	}
	back, err := LoadPlan(strings.NewReader(string(js)), "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Phases, p.Phases) {
		t.Errorf("round trip = %+v, want %+v", back.Phases, p.Phases)
	}
}

func FuzzLoadPlan(f *testing.F) {
	f.Add(examplePlan)
	f.Add(`{"version":1,"phases":[{"pattern":"race","count":3,"race-mode":"single-packet"}]}`)
	f.Add("version: 1\nphases:\n  - {pattern: edge, count: 1, gap: 1s, period: 1m, phase: 5s}\n")
	f.Add("version: 1\nphases:\n  - {pattern: ramp, from: 1r/m, to: 3/s, duration: 2s, jitter: 10ms}\n")
	f.Add("version: 1\nphases:\n  - {pattern: recovery, every: 1s, span: 3s, clients: 2}\n")
	f.Add("version: 1\nphases: [{pattern: burst, count: 5, spread: 1s}]")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := LoadPlan(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal(valid plan) = %v", err)
		}
		back, err := LoadPlan(strings.NewReader(string(js)), "fuzz.json")
		if err != nil {
			t.Fatalf("valid plan %q marshalled to %s does not load back: %v", in, js, err)
		}
		if !reflect.DeepEqual(back.Phases, p.Phases) || back.Version != p.Version {
			t.Fatalf("round trip of %q: %+v, want %+v", in, back.Phases, p.Phases)
		}
		start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		sc, err := p.Schedule(1, start)
		if err != nil && !strings.Contains(err.Error(), "too soon") {
			t.Fatalf("valid plan %q does not schedule: %v", in, err)
		}
		for i := 1; i < len(sc.Sends); i++ {
			if sc.Sends[i].At < sc.Sends[i-1].At {
				t.Fatalf("sends not sorted at %d", i)
			}
		}
	})
}
