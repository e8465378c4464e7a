package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
)

func steadyPlan(rate float64, d time.Duration) *patterns.Plan {
	return &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
		{Pattern: patterns.PatternSteady, Rate: patterns.Rate(rate), Duration: patterns.Duration(d)}}}
}

// TestScheduleStreamsAndCapsByCount: a steady plan is streamed; the caps,
// the dry run and the description count its sends in closed form, with
// no ceiling of a million.
func TestScheduleStreamsAndCapsByCount(t *testing.T) {
	opt := memServer(t, testserver.Route{Path: "/", Policy: bucket})("/")
	tests := []struct {
		name    string
		caps    Caps
		wantErr string
	}{
		{"under the cap", Caps{MaxRequests: 2_000_000, MaxRate: 1e6}, ""},
		{"over the cap", Caps{MaxRequests: 1_000_000, MaxRate: 1e6}, "the plan sends 1200000 requests, over the cap --max-requests 1000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Probe: opt, Caps: tc.caps})
			if err != nil {
				t.Fatal(err)
			}
			plan := steadyPlan(400_000, 3*time.Second)
			sc, err := s.Schedule(plan)
			if tc.wantErr != "" {
				if ClassOf(err) != Usage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Schedule = %v, want Usage %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sc.Streamed() || sc.Len() != 1_200_000 {
				t.Errorf("Streamed %v, Len %d; want a streamed schedule of 1200000", sc.Streamed(), sc.Len())
			}
			if doc := s.RunDryRun(plan, sc); doc.Requests != 1_200_000 || doc.Phases[0].Requests != 1_200_000 {
				t.Errorf("dry run requests %d (phase %d), want 1200000", doc.Requests, doc.Phases[0].Requests)
			}
			if d := describeSchedule(sc); !strings.HasPrefix(d, "1200000 requests over 3s") {
				t.Errorf("description %q", d)
			}
		})
	}
}

// TestRunStreamedToAFile: a streamed run writes one result per send to
// its record file, keeps none of them in memory, and its end line and
// summary count them all.
func TestRunStreamedToAFile(t *testing.T) {
	opt := memServer(t, testserver.Route{Path: "/", Policy: bucket})("/")
	out := filepath.Join(t.TempDir(), "run.jsonl")
	s, err := New(Config{Probe: opt, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Run(context.Background(), steadyPlan(200, time.Second))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.Scheduled != 200 || sum.Sent != 200 || sum.Accepted+sum.Rejected != 200 {
		t.Errorf("summary: scheduled %d sent %d accepted %d rejected %d; want 200 sent", sum.Scheduled, sum.Sent, sum.Accepted, sum.Rejected)
	}
	run := s.Record()
	if run.End == nil || run.End.Scheduled != 200 || run.End.Sent != 200 || len(run.Results) != 0 {
		t.Errorf("record in memory: end %+v, %d results; want 200 counted, none kept", run.End, len(run.Results))
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file, err := record.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool)
	for _, r := range file.Results {
		seen[r.Seq] = true
	}
	if len(file.Results) != 200 || len(seen) != 200 || file.End.Scheduled != 200 {
		t.Errorf("file: %d results, %d distinct Seqs, end %+v; want 200", len(file.Results), len(seen), file.End)
	}
}
