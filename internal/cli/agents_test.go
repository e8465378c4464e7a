package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// Many agents, one verdict. Several agents (in-process `rlprobe run`s)
// fire their share of a burst at one reference server at the same
// --start-at; their record files, merged by `rlprobe analyze`, give the
// verdicts that one agent firing the whole burst gets — even when the
// agents' clocks disagree by tens of seconds, because each file carries
// its clock offset: in the header when measured against --time-ref, else
// in the end line, estimated from the run's own Date headers. No single
// agent's file shows the violation.

// agentsLimiter is the server: 6 per minute in fixed windows starting at
// the first request, so a burst of 12 from idle gets exactly 6 accepted.
// Declared 4 per 10 s, that is a window-limit violation; declared 6, it
// keeps its promise.
var agentsLimiter = limiter.Config{Algorithm: limiter.FixedWindow, Limit: 6, Window: time.Minute, Align: limiter.AlignFirstRequest}

// agentOffsets are the simulated clock errors of the agents (agent clock −
// reference clock), and agentUncertainty the half-width each claims.
var (
	agentOffsets     = []time.Duration{0, 40 * time.Second, -25*time.Second - 123456789}
	agentUncertainty = 2 * time.Millisecond
)

// agentsServer starts the reference server with agentsLimiter; echo says
// whether it echoes arrival times (X-Rlprobe-Arrival). Without the echo a
// request's arrival is known only from the agent's clock, which is where
// clock offsets matter.
func agentsServer(t *testing.T, echo bool) string {
	t.Helper()
	srv := refServer(t, "/", agentsLimiter, func(c *testserver.Config, _ *testserver.Policy) { c.Handler.EchoArrival = echo })
	return srv.URL() + "/"
}

// analyzeDoc runs `rlprobe analyze FILES... --json` with the policy flags
// and decodes the document.
func analyzeDoc(t *testing.T, files []string, policy ...string) (int, verify.Report) {
	t.Helper()
	args := append(append([]string{"analyze"}, files...), append(policy, "--json")...)
	code, stdout, stderr := runCLI(t, nil, args...)
	var rep verify.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("rlprobe %s: exit %d, not a document: %v\n%s%s", strings.Join(args, " "), code, err, stdout, stderr)
	}
	return code, rep
}

// verdicts summarises what decides a run: the exit code, the verdict, and
// each error finding's id and certainty (sorted, distinct). Warnings are
// left out: under a burst released at once, the order in which the server
// stamped arrivals and the order in which it decided them can differ by
// microseconds, and warnings such as retry-after-late read that order.
func verdicts(code int, rep verify.Report) string {
	var fs []string
	for _, f := range rep.Findings {
		if f.Severity != verify.SeverityError {
			continue
		}
		s := fmt.Sprintf("%s/%s", f.ID, f.Certainty)
		if !slices.Contains(fs, s) {
			fs = append(fs, s)
		}
	}
	slices.Sort(fs)
	return fmt.Sprintf("exit %d, %s: %s", code, rep.Verdict, strings.Join(fs, " "))
}

// clockMode says how a skewed agent knows its clock offset.
type clockMode string

const (
	clockTimeRef clockMode = "time-ref" // measured before the run: in the header
	clockDate    clockMode = "date"     // estimated from the Date headers: in the end line
	clockNone    clockMode = "none"     // not at all
)

// skewClock rewrites a record file as an agent whose clock was off by
// offset would have written it: its start (and so every time relative to
// it) moves by offset, the server's arrival echoes (absolute on the
// reference clock, stored relative to the start) move back by offset.
// With clockTimeRef the header (and the end line) declare the offset and
// agentUncertainty; with clockDate the end line's own estimate, made on
// the true clock, moves by offset, as it would have on the skewed one;
// with clockNone neither declares any.
func skewClock(t *testing.T, path string, offset time.Duration, mode clockMode) {
	t.Helper()
	run := readRecord(t, path)
	h := run.Header
	h.Start = h.Start.Add(offset)
	end := *run.End
	if h.ClockOffsetNS != 0 || h.ClockUncertaintyNS != 0 || end.ClockSource != record.ClockSourceDate {
		t.Fatalf("%s: want no clock in the header and a Date estimate in the end line: header %d ± %d, end %+v",
			path, h.ClockOffsetNS, h.ClockUncertaintyNS, end)
	}
	switch mode {
	case clockTimeRef:
		h.ClockOffsetNS, h.ClockUncertaintyNS = int64(offset), int64(agentUncertainty)
		end.ClockOffsetNS, end.ClockUncertaintyNS, end.ClockSource = h.ClockOffsetNS, h.ClockUncertaintyNS, record.ClockSourceTimeRef
	case clockDate:
		end.ClockOffsetNS += int64(offset)
	case clockNone:
		end.ClockOffsetNS, end.ClockUncertaintyNS, end.ClockSource = 0, 0, ""
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := record.NewWriter(f, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range run.Results {
		if r.Arrival != nil {
			a := *r.Arrival - int64(offset)
			r.Arrival = &a
		}
		if err := w.WriteResult(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
}

// runAgents runs one in-process `rlprobe run` per offset, each a burst of
// count at the same --start-at against url, concurrently, and returns
// their record files, each rewritten with its agent's clock offset, known
// as mode says.
func runAgents(t *testing.T, url string, count int, mode clockMode) []string {
	t.Helper()
	dir := t.TempDir()
	startAt := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	files := make([]string, len(agentOffsets))
	codes := make([]int, len(agentOffsets))
	outputs := make([]string, len(agentOffsets))
	var wg sync.WaitGroup
	for i := range agentOffsets {
		files[i] = filepath.Join(dir, fmt.Sprintf("agent-%d.jsonl", i))
		wg.Go(func() {
			var stdout, stderr string
			codes[i], stdout, stderr = runCLI(t, nil, "run", url, "--pattern", "burst", "--count", fmt.Sprint(count),
				"--start-at", startAt, "--out", files[i], "-q")
			outputs[i] = stdout + stderr
		})
	}
	wg.Wait()
	for i, f := range files {
		if codes[i] != ExitOK {
			t.Fatalf("agent %d: exit %d\n%s", i, codes[i], outputs[i])
		}
		skewClock(t, f, agentOffsets[i], mode)
	}
	return files
}

func TestAgentsMergeToTheVerdictsOfOne(t *testing.T) {
	for _, tt := range []struct {
		echo bool
		mode clockMode
	}{{false, clockTimeRef}, {true, clockTimeRef}, {false, clockDate}} {
		t.Run(fmt.Sprintf("echo=%v/clock=%s", tt.echo, tt.mode), func(t *testing.T) { agentsMatchOne(t, tt.echo, tt.mode) })
	}
}

func agentsMatchOne(t *testing.T, echo bool, mode clockMode) {
	// One agent, the whole burst.
	one := filepath.Join(t.TempDir(), "one.jsonl")
	if code, out, errOut := runCLI(t, nil, "run", agentsServer(t, echo), "--pattern", "burst", "--count", "12", "--out", one); code != ExitOK {
		t.Fatalf("one agent: exit %d\n%s%s", code, out, errOut)
	}
	if got := statuses(readRecord(t, one)); got[200] != 6 {
		t.Fatalf("one agent: statuses %v, want 6 accepted", got)
	}

	// Three agents, four each, at the same instant, clocks apart.
	many := runAgents(t, agentsServer(t, echo), 4, mode)
	accepted := 0
	for _, f := range many {
		accepted += statuses(readRecord(t, f))[200]
	}
	if accepted != 6 {
		t.Fatalf("three agents: %d accepted in all, want 6", accepted)
	}

	policies := []struct {
		name   string
		flags  []string
		failed bool
	}{
		{"broken promise", []string{"--limit", "4", "--window", "10s"}, true},
		{"kept promise", []string{"--limit", "6", "--window", "10s"}, false},
	}
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			wantCode, wantRep := analyzeDoc(t, []string{one}, p.flags...)
			want := verdicts(wantCode, wantRep)
			if (wantCode == ExitFindings) != p.failed {
				t.Fatalf("one agent: %s; want failed=%v", want, p.failed)
			}
			gotCode, gotRep := analyzeDoc(t, many, p.flags...)
			if got := verdicts(gotCode, gotRep); got != want {
				t.Errorf("three agents merged:\n  %s\none agent:\n  %s", got, want)
			}
			if p.failed && !slices.ContainsFunc(gotRep.Findings, func(f verify.Finding) bool {
				return f.ID == "window-limit-exceeded" && f.Certainty == "certain"
			}) {
				t.Errorf("merged: no certain window-limit-exceeded: %s", verdicts(gotCode, gotRep))
			}
			// No agent alone sees it: each sent only 4.
			for i, f := range many {
				if code, rep := analyzeDoc(t, []string{f}, p.flags...); code != ExitOK {
					t.Errorf("agent %d alone: %s; want a pass", i, verdicts(code, rep))
				}
			}
		})
	}
}

// TestAgentsUnmeasuredClocksHideTheViolation is the control: the same
// agents, clocks as far apart, but no offset in their files, and a
// server that echoes no arrival time. Merged on their own clocks, their
// bursts look more than 10 s apart, and the violation the measured merge
// finds is gone — which is why each agent measures its offset.
func TestAgentsUnmeasuredClocksHideTheViolation(t *testing.T) {
	files := runAgents(t, agentsServer(t, false), 4, clockNone)
	code, rep := analyzeDoc(t, files, "--limit", "4", "--window", "10s")
	if slices.ContainsFunc(rep.Findings, func(f verify.Finding) bool { return f.ID == "window-limit-exceeded" }) {
		t.Errorf("unmeasured clocks 65 s apart still give window-limit-exceeded: %s", verdicts(code, rep))
	}
}
