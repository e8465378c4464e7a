package watch_test

import (
	"cmp"
	"context"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
	"github.com/rlprobe/rlprobe/watch"
)

// switchable serves the reference server with one policy, and can swap it
// for another under a running watch (as a config reload does): Dial
// reaches whichever is current.
type switchable struct {
	t   *testing.T
	cur atomic.Pointer[testserver.MemListener]
	all []*testserver.Server
}

func (s *switchable) set(p testserver.Policy) {
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Policy: p}}})
	if err != nil {
		s.t.Fatal(err)
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		s.t.Fatal(err)
	}
	s.all = append(s.all, srv)
	s.cur.Store(ml)
}

func (s *switchable) dial(ctx context.Context, network, addr string, src netip.Addr) (net.Conn, error) {
	return s.cur.Load().Dial(ctx, network, addr, src)
}

func (s *switchable) close() {
	for _, srv := range s.all {
		srv.Shutdown(context.Background())
	}
}

// events collects a watch's events.
type events struct {
	mu  sync.Mutex
	all []watch.Event
}

func (e *events) log(ev watch.Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

func (e *events) kinds(kind string) []watch.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []watch.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func window(limit int64, w time.Duration, key string, dialect headers.Dialect) testserver.Policy {
	return testserver.Policy{
		Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: limit, Window: w},
		Key:      key,
		Dialects: []headers.Dialect{dialect},
	}
}

func config(srv *switchable, dir string, pol *verify.Policy, ev *events, cycles int) watch.Config {
	return watch.Config{
		Session: session.Config{Tool: "rlprobe test", Probe: probe.Options{
			URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: srv.dial, TimerPacing: true}},
		Policy: pol, Every: 2 * time.Second, Share: 0.2,
		Dir: watch.Dir{Path: dir, Keep: 100}, MaxCycles: cycles, Log: ev.log, Tool: "rlprobe test",
	}
}

// TestUnchangedServerNoDrift: ten cycles against an honest server that
// advertises its policy give no drift and no finding, and spend at most the
// declared share of any window.
func TestUnchangedServerNoDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &switchable{t: t}
		defer srv.close()
		srv.set(window(10, 2*time.Second, testserver.KeyGlobal, headers.Draft8))
		pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Limit: 10, Window: 2 * time.Second, WindowType: verify.Fixed}}}.Normalize()
		dir := t.TempDir()
		var ev events
		res, err := watch.Run(context.Background(), config(srv, dir, &pol, &ev, 10))
		if err != nil {
			t.Fatal(err)
		}
		if res.Cycles != 10 || res.Mode != watch.ModeHeaders || res.Budget.PerCycle != 2 {
			t.Fatalf("cycles %d, mode %s, per cycle %d", res.Cycles, res.Mode, res.Budget.PerCycle)
		}
		if d := ev.kinds(watch.KindDrift); len(d) != 0 {
			t.Errorf("an unchanged server drifted: %+v", d[0].Drift)
		}
		for _, f := range ev.kinds(watch.KindFinding) {
			if f.Finding.Certainty == verify.Certain && f.Finding.Severity.AtLeast(verify.SeverityWarning) {
				t.Errorf("certain finding on an honest server: %s", f.Message)
			}
		}
		if n := len(ev.kinds(watch.KindCycle)); n != 10 {
			t.Errorf("%d cycle events, want 10", n)
		}
		assertBudget(t, dir, 2*time.Second, 2)
	})
}

// assertBudget reads every cycle's records and checks that no window of
// length period holds more than most requests.
func assertBudget(t *testing.T, dir string, period time.Duration, most int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
	var sent []time.Time
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		run, err := record.Read(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range run.Results {
			if r.Outcome != record.OutcomeNotSent {
				sent = append(sent, run.Header.Start.Add(time.Duration(r.Sent)))
			}
		}
	}
	slices.SortFunc(sent, func(a, b time.Time) int { return a.Compare(b) })
	for i := range sent {
		j := i
		for j < len(sent) && sent[j].Sub(sent[i]) < period {
			j++
		}
		if j-i > most {
			t.Fatalf("%d requests within %v from %v: over the budget of %d", j-i, period, sent[i], most)
		}
	}
	if len(sent) == 0 {
		t.Fatal("no request recorded")
	}
}

// TestDriftCaught: the server's limit doubles under a running watch (a
// reload); the drift is caught within two cycles, through advertised
// headers, and with --headers none on a per-key limit by exhausting watch's
// own identity.
func TestDriftCaught(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    string
		dialec headers.Dialect
		policy verify.Endpoint
		mode   watch.Mode
		source string
	}{
		{"advertised headers", testserver.KeyGlobal, headers.Draft8, verify.Endpoint{Limit: 10, Window: 2 * time.Second, WindowType: verify.Fixed}, watch.ModeHeaders, "headers"},
		{"per-key without headers", "header:X-Api-Key", headers.None, verify.Endpoint{Limit: 10, Window: 2 * time.Second, WindowType: verify.Fixed, Key: "header:X-Api-Key"}, watch.ModeExhaust, "exhaust"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &switchable{t: t}
				defer srv.close()
				srv.set(window(10, 2*time.Second, tc.key, tc.dialec))
				pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{tc.policy}}.Normalize()
				var ev events
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan watch.Result, 1)
				go func() {
					res, err := watch.Run(ctx, config(srv, t.TempDir(), &pol, &ev, 8))
					if err != nil {
						t.Error(err)
					}
					done <- res
				}()
				// Three quiet cycles, then the reload.
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if d := ev.kinds(watch.KindDrift); len(d) != 0 {
					t.Fatalf("drift before the reload: %+v", d[0].Drift)
				}
				srv.set(window(20, 2*time.Second, tc.key, tc.dialec))
				reloaded := len(ev.kinds(watch.KindCycle))
				time.Sleep(4 * time.Second) // two cycles
				synctest.Wait()
				drifts := ev.kinds(watch.KindDrift)
				if len(drifts) == 0 {
					t.Fatalf("no drift within two cycles of the reload (cycles so far %d)", len(ev.kinds(watch.KindCycle)))
				}
				d := drifts[0]
				if d.Cycle > reloaded+2 || d.Drift.Field != "limit" || d.Drift.Before != "10" || d.Drift.After != "20" || d.Drift.Source != tc.source {
					t.Errorf("drift %+v at cycle %d (reload after cycle %d)", d.Drift, d.Cycle, reloaded)
				}
				if d.Finding == nil || d.Finding.ID != watch.IDPolicyDrift {
					t.Errorf("drift without its policy-drift finding: %+v", d.Finding)
				}
				res := <-done
				if res.Mode != tc.mode {
					t.Errorf("mode %s, want %s", res.Mode, tc.mode)
				}
				if len(drifts) != 1 {
					t.Errorf("one change, %d drift events", len(drifts))
				}
			})
		})
	}
}

func TestBudgetRefusedAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &switchable{t: t}
		defer srv.close()
		srv.set(window(10, 2*time.Second, testserver.KeyGlobal, headers.None))
		pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Limit: 10, Window: 2 * time.Second}}}.Normalize()
		var ev events
		cfg := config(srv, t.TempDir(), &pol, &ev, 3)
		cfg.Share = 0.02
		_, err := watch.Run(context.Background(), cfg)
		if err == nil || session.ClassOf(err) != session.Usage || !strings.Contains(err.Error(), "cannot fit") {
			t.Fatalf("err = %v, want a usage error saying the budget cannot fit", err)
		}
		files, _ := os.ReadDir(cfg.Dir.Path)
		if len(files) != 0 {
			t.Errorf("a refused watch sent requests: %d files", len(files))
		}
	})
}

// sentTimes reads every cycle's records in dir and returns when each
// budgeted request (phase watch) went out, sorted.
func sentTimes(t *testing.T, dir string) []time.Time {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
	var sent []time.Time
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		run, err := record.Read(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range run.Results {
			if r.Outcome != record.OutcomeNotSent && r.Phase == watch.PhaseSample {
				sent = append(sent, run.Header.Start.Add(time.Duration(r.Sent)))
			}
		}
	}
	slices.SortFunc(sent, func(a, b time.Time) int { return a.Compare(b) })
	return sent
}

// mostWithin is the largest number of times within any half-open
// interval of length d.
func mostWithin(sent []time.Time, d time.Duration) int {
	most, j := 0, 0
	for i := range sent {
		for j < len(sent) && sent[j].Sub(sent[i]) < d {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// TestBudgetBoundsFromRecords: against reference servers that send
// draft-8 headers, watch runs in headers mode (its start event says so,
// with its budget), and its recorded requests keep both bounds: over every
// interval of the rule's period at most max(1, share × quota), and over
// every interval of --every at most share × what the rule admits in it
// (windows N·⌈every/W⌉, buckets C + r·every).
func TestBudgetBoundsFromRecords(t *testing.T) {
	bucket := func(rate float64, c int64) (testserver.Policy, verify.Endpoint) {
		return testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: rate, Capacity: c}, Dialects: []headers.Dialect{headers.Draft8}},
			verify.Endpoint{Rate: rate, Capacity: c}
	}
	win := func(n int64, w time.Duration) (testserver.Policy, verify.Endpoint) {
		return window(n, w, testserver.KeyGlobal, headers.Draft8), verify.Endpoint{Limit: n, Window: w, WindowType: verify.Fixed}
	}
	type rule struct {
		srv testserver.Policy
		e   verify.Endpoint
	}
	mk := func(s testserver.Policy, e verify.Endpoint) rule { return rule{s, e} }
	for _, tc := range []struct {
		name  string
		rule  rule
		share float64 // 0: the default
		every time.Duration
	}{
		{"20/s capacity 20 at the defaults", mk(bucket(20, 20)), 0, 0},
		{"5 per 1s at the defaults", mk(win(5, time.Second)), 0, 0},
		{"1000 per 60s at the defaults", mk(win(1000, time.Minute)), 0, 0},
		{"100 per 60s every 20s", mk(win(100, time.Minute)), 0.05, 20 * time.Second},
		{"10 per 2s every 1s at 50%", mk(win(10, 2*time.Second)), 0.5, time.Second},
		{"a 2/s bucket of 10 every 3s at 30%", mk(bucket(2, 10)), 0.3, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &switchable{t: t}
				defer srv.close()
				srv.set(tc.rule.srv)
				pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{tc.rule.e}}.Normalize()
				dir := t.TempDir()
				var ev events
				cfg := config(srv, dir, &pol, &ev, 6)
				cfg.Share, cfg.Every = tc.share, tc.every
				res, err := watch.Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				share, every := cmp.Or(tc.share, watch.DefaultShare), cmp.Or(tc.every, watch.DefaultEvery)
				e := pol.Endpoints[0]
				starts := ev.kinds(watch.KindStart)
				if len(starts) != 1 || starts[0].Mode != watch.ModeHeaders || starts[0].Budget == nil ||
					starts[0].Budget.Share != share || starts[0].Budget.PerCycle != res.Budget.PerCycle || starts[0].Budget.PerPeriodMax != res.Budget.PerPeriodMax {
					t.Fatalf("start events %+v; want one in headers mode with the budget %+v", starts, res.Budget)
				}
				if res.Cycles != 6 || res.Last == nil || res.Last.Verdict != "pass" {
					t.Errorf("%d cycles, last verdict %+v", res.Cycles, res.Last)
				}
				sent := sentTimes(t, dir)
				if len(sent) < 6 {
					t.Fatalf("%d budgeted requests in 6 cycles", len(sent))
				}
				perPeriod := max(1, math.Floor(share*float64(e.Quota())+1e-9))
				if n := mostWithin(sent, e.Period()); float64(n) > perPeriod {
					t.Errorf("%d requests within one period %v: over max(1, %v × %d)", n, e.Period(), share, e.Quota())
				}
				var admitted float64
				if e.IsBucket() {
					admitted = float64(e.Capacity) + e.Rate*every.Seconds()
				} else {
					admitted = float64(e.Limit) * math.Ceil(float64(every)/float64(e.Window))
				}
				if n := mostWithin(sent, every); float64(n) > share*admitted+1e-9 {
					t.Errorf("%d requests within one --every %v: over %v × %v admitted", n, every, share, admitted)
				}
			})
		})
	}
}

// TestFirstCycleAgents: the first cycle's first request (which chose the
// mode) and the rest of the cycle have their own record files; the second
// is agent NAME-2, the name a merge of both gives it, so the verdict's
// refs (over both) name its results as its file does.
func TestFirstCycleAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &switchable{t: t}
		defer srv.close()
		srv.set(window(10, 2*time.Second, testserver.KeyGlobal, headers.Draft8))
		pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Limit: 10, Window: 2 * time.Second, WindowType: verify.Fixed}}}.Normalize()
		dir := t.TempDir()
		var ev events
		cfg := config(srv, dir, &pol, &ev, 1)
		cfg.Session.Probe.Agent = "w"
		if _, err := watch.Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "rlprobe-watch-*.jsonl"))
		var runs []*record.Run
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			run, err := record.Read(fh)
			fh.Close()
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run)
		}
		if len(runs) != 2 || runs[0].Header.Agent != "w" || runs[1].Header.Agent != "w-2" || len(runs[0].Results) != 1 {
			t.Fatalf("%d record files; want 2: agent w with the first request, agent w-2 with the rest", len(runs))
		}
		m := record.Merge(runs...)
		if m.Agents[0].Name != "w" || m.Agents[1].Name != "w-2" {
			t.Errorf("merged names %s, %s; want w, w-2", m.Agents[0].Name, m.Agents[1].Name)
		}
	})
}
