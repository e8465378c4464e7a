package watch_test

import (
	"context"
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
