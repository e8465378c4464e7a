package session

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// TestRunAnnouncesPhases: Run tells the front end of each phase when it
// becomes due (a pause too), and Status counts the schedule's requests;
// RunDoc is the run's document.
func TestRunAnnouncesPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := memServer(t, testserver.Route{Policy: bucket})("/")
		opt.TimerPacing = true
		var mu sync.Mutex
		var lines []string
		var begin time.Time
		var s *Session
		s, err := New(Config{Command: "run", Probe: opt, Seed: 3, Tool: "rlprobe test", Progress: Progress{
			Started: func(b time.Time, _ time.Duration, _ patterns.Schedule) { begin = b },
			Line: func(l string) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf("%s @%s", l, time.Since(begin).Round(100*time.Millisecond)))
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
			{Pattern: patterns.PatternBurst, Count: 6},
			{Pause: units.Duration(2 * time.Second)},
			{Pattern: patterns.PatternBurst, Count: 2, Name: "late"},
		}}
		sum, err := s.Run(context.Background(), plan)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"phase burst: 6 requests over 0s @0s", "phase pause: 2s @0s", "phase late: 2 requests over 0s @2s"}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		if got, want := s.Status(time.Second, true), "8/8 done · 6 accepted · 2 rejected · 0 other · 0 errors · 0 late · 1s left"; got != want {
			t.Errorf("status %q, want %q", got, want)
		}
		doc, err := s.RunDoc(plan, sum)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Schema != record.SchemaRun || !doc.Complete || doc.Reason != record.ReasonCompleted || *doc.Seed != 3 ||
			doc.Sent != 8 || doc.Tool != "rlprobe test" || !strings.Contains(string(doc.Plan), `"late"`) {
			t.Errorf("run document %+v", doc)
		}
	})
}

// TestStatusOfASuite: Check's and Infer's status line counts requests
// against the planned duration, to the millisecond below a second.
func TestStatusOfASuite(t *testing.T) {
	s, err := New(Config{Command: "check", Probe: memServer(t, testserver.Route{Policy: bucket})("/")})
	if err != nil {
		t.Fatal(err)
	}
	s.started(time.Now(), 90*time.Second, patterns.Schedule{})
	s.counts.done.Store(1)
	if got, want := s.Status(400*time.Millisecond, true), "check: 1 request done · 400ms of at most 1m30s"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	s.replanned(2 * time.Minute)
	s.counts.done.Store(7)
	s.counts.runDone.Store(2)
	s.counts.runTotal.Store(5)
	if got, want := s.Status(61*time.Second, false), "check: 7 requests done (this run 2/5) · 1m1s of at most 2m0s"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
}

// TestDryRunText: the dry-run documents' text names what would be sent.
func TestDryRunText(t *testing.T) {
	s, err := New(Config{Command: "run", Probe: memServer(t, testserver.Route{Policy: bucket})("/"), Seed: 5,
		Caps: Caps{MaxRequests: 100, MaxDuration: time.Minute, MaxRate: 50}})
	if err != nil {
		t.Fatal(err)
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{
		{Pattern: patterns.PatternSteady, Rate: 2, Duration: units.Duration(3 * time.Second), Name: "trickle"}}}
	sc, err := s.Schedule(plan)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	run := s.RunDryRun(plan, sc)
	if err := run.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dry run: nothing sent\n", "phase    pattern  starts  lasts  requests\ntrickle  steady       0s     3s         6\n",
		"6 requests from 1 client(s) over 3s", "seed 5; caps 100 requests, 1m0s, 50/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("run dry run lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	pol := verify.Policy{Endpoints: []verify.Endpoint{{Limit: 5, Window: 2 * time.Second}}}
	check := s.CheckDryRun(&pol, []string{"burst"}, nil)
	if err := check.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "rule: 5 in any 2s") || !strings.Contains(b.String(), "  burst ") || strings.Contains(b.String(), "  edge ") {
		t.Errorf("check dry run:\n%s", b.String())
	}
	b.Reset()
	inf := s.InferDryRun("")
	if err := inf.WriteText(&b); err != nil || !strings.Contains(b.String(), "caps: 100 requests, 1m0s, 50/s") {
		t.Errorf("infer dry run (%v):\n%s", err, b.String())
	}
}
