package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/testserver"
)

// TestReporter drives the shared reporter on the bubble's clock: without
// a terminal, a status line only after 15 s without any line; a phase line
// restarts that count; -q prints nothing; on a terminal the status line is
// rewritten in place and cleared at the end.
func TestReporter(t *testing.T) {
	cases := []struct {
		name      string
		quiet     bool
		tty       bool
		want      string
		wantCount int // status lines
	}{
		// Lines: status at 15 s, "phase b" at 20 s, status at 35 s; stop at 40 s.
		{name: "pipe", want: "phase a\nstatus 15s\nphase b\nstatus 35s\n", wantCount: 2},
		{name: "quiet", quiet: true, want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				f := &Factory{IO: IOStreams{ErrOut: &buf, ErrTTY: c.tty}}
				p := newReporter(f, &GlobalOptions{Quiet: c.quiet}, func(e time.Duration) string {
					return "status " + e.Round(time.Second).String()
				})
				p.start(time.Now())
				p.line("phase %s", "a")
				time.Sleep(20*time.Second + time.Millisecond)
				p.line("phase b")
				time.Sleep(20 * time.Second)
				p.stop()
				if got := buf.String(); got != c.want {
					t.Errorf("stderr %q, want %q", got, c.want)
				}
			})
		})
	}
	t.Run("terminal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			f := &Factory{IO: IOStreams{ErrOut: &buf, ErrTTY: true}}
			p := newReporter(f, &GlobalOptions{}, func(e time.Duration) string { return "s" + e.Round(time.Second).String() })
			p.start(time.Now())
			time.Sleep(time.Second + time.Millisecond)
			p.line("phase a")
			time.Sleep(time.Second)
			p.stop()
			got := buf.String()
			if !strings.Contains(got, "\r\033[Ks1s\r\033[Kphase a\n") || !strings.HasSuffix(got, "\r\033[Ks2s\r\033[K") {
				t.Errorf("terminal output %q: want the status rewritten in place, the phase line replacing it, cleared at the end", got)
			}
		})
	})
}

// memCLI runs the CLI inside a synctest bubble against the reference
// server with policy p on an in-memory listener (path /api).
func memCLI(t *testing.T, p testserver.Policy, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ln := testserver.NewMemListener()
		srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "/api", Policy: p}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.StartListener(ln); err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		hook := func(f *Factory) {
			f.ProbeOptions = func(o *probe.Options) { o.Dial, o.TimerPacing = ln.Dial, true }
		}
		// --start-at relative to the bubble's clock.
		for i, a := range args {
			if d, ok := strings.CutPrefix(a, "now+"); ok {
				dd, err := time.ParseDuration(d)
				if err != nil {
					t.Fatal(err)
				}
				args[i] = time.Now().Add(dd).Format(time.RFC3339Nano)
			}
		}
		code, stdout, stderr = runCLIWith(t, hook, args...)
	})
	return code, stdout, stderr
}

// progressURL is the in-memory reference server's limited route.
const progressURL = "http://" + testserver.MemListenerAddr + "/api"

// slowWindow is a policy whose suite lasts minutes: 5 per 20 s.
var slowWindow = testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 20 * time.Second}}

// slowInfer is a policy infer needs minutes for, with a recovery scan
// that lasts a minute: 5 per 60 s in a sliding log that advertises nothing
// (advertised windows and returns are refined or settled at once).
var slowInfer = testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: time.Minute},
	Dialects: []headers.Dialect{headers.None}, RetryAfter: testserver.RetryMissing}

var statusLine = map[string]*regexp.Regexp{
	"check": regexp.MustCompile(`(?m)^check: \d+ requests? done( \(this run \d+/\d+\))? · \S+ of at most \S+$`),
	"infer": regexp.MustCompile(`(?m)^infer: \d+ requests? done( \(this run \d+/\d+\))? · \S+ of at most \S+$`),
}

// TestSuiteProgress: check and infer print a line per step and, during
// their minutes-long suites, a status line every 15 s — on stderr, never
// stdout; -q silences them.
func TestSuiteProgress(t *testing.T) {
	cases := []struct {
		cmd    string
		policy testserver.Policy
		args   []string
		steps  []string
	}{
		{"check", slowWindow, []string{"check", progressURL, "--limit", "5", "--window", "20s", "--only", "burst,recovery,sustained"},
			[]string{"check: burst: ", "check: sustained: "}},
		{"infer", slowInfer, []string{"infer", progressURL},
			[]string{"infer: burst", "budget at most"}},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			dir := t.TempDir()
			args := append(c.args, "--out", filepath.Join(dir, "loud.jsonl"))
			code, stdout, stderr := memCLI(t, c.policy, args...)
			if code != ExitOK && code != ExitFindings {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			for _, w := range c.steps {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks the step line %q:\n%s", w, stderr)
				}
				if strings.Contains(stdout, w) {
					t.Errorf("stdout carries the progress line %q:\n%s", w, stdout)
				}
			}
			if n := len(statusLine[c.cmd].FindAllString(stderr, -1)); n < 2 {
				t.Errorf("%d status lines on stderr, want one every 15 s of a suite lasting minutes:\n%s", n, stderr)
			}
			if statusLine[c.cmd].MatchString(stdout) {
				t.Errorf("stdout carries status lines:\n%s", stdout)
			}

			args = append(c.args, "--out", filepath.Join(dir, "quiet.jsonl"), "-q")
			code, stdout2, stderr := memCLI(t, slowWindow, args...)
			if code != ExitOK && code != ExitFindings {
				t.Fatalf("-q: exit %d\n%s\n%s", code, stdout2, stderr)
			}
			if stderr != "" {
				t.Errorf("-q: stderr %q, want nothing", stderr)
			}
		})
	}
}

// TestCheckStartAt: with --start-at, no request of a check (the preflight
// included) is sent before the start time, and the suite follows at once.
func TestCheckStartAt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "start.jsonl")
	code, stdout, stderr := memCLI(t, slowWindow, "check", progressURL, "--limit", "5", "--window", "20s",
		"--only", "burst", "--start-at", "now+30s", "--out", out)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	run := readRecord(t, out)
	at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(regexp.MustCompile(`--start-at \S+`).FindString(stderr), "--start-at "))
	if err != nil {
		t.Fatalf("stderr does not announce the start: %v\n%s", err, stderr)
	}
	startNS := at.Sub(run.Header.Start).Nanoseconds()
	if startNS < 29*int64(time.Second) {
		t.Fatalf("start %v after the header's start, want about 30 s", time.Duration(startNS))
	}
	if len(run.Results) < 2 {
		t.Fatalf("%d results", len(run.Results))
	}
	for _, r := range run.Results {
		if r.Sent < startNS {
			t.Errorf("seq %d (%s) sent at %v, before --start-at (%v)", r.Seq, r.Phase, time.Duration(r.Sent), time.Duration(startNS))
		}
		if r.Sent > startNS+int64(5*time.Second) {
			t.Errorf("seq %d (%s) sent at %v, long after --start-at (%v)", r.Seq, r.Phase, time.Duration(r.Sent), time.Duration(startNS))
		}
	}
}

// TestCheckClients: --clients is honoured for per-client keys and refused
// where check could not use it, never ignored. A server keyed globally
// under a declared header key shares one quota among the clients:
// key-collapsed, certain.
func TestCheckClients(t *testing.T) {
	perKey := slowWindow
	perKey.Key = "header:X-Key"
	cases := []struct {
		name   string
		server testserver.Policy
		args   []string
		code   int
		msg    string
		stdout string
	}{
		{"global key", slowWindow, []string{"--clients", "3"}, ExitUsage, "--clients 3: the policy's key is global", ""},
		{"ip key, one address", slowWindow, []string{"--key", "ip", "--clients", "2"}, ExitUsage, "can present only 1 client identity", ""},
		{"header key", perKey, []string{"--key", "header:X-Key", "--clients", "4"}, ExitOK, "", ""},
		{"header key, the server keyed globally", slowWindow, []string{"--key", "header:X-Key", "--clients", "4"}, ExitFindings, "", "certain  key-collapsed"},
		{"one client, global", slowWindow, []string{"--clients", "1"}, ExitOK, "", ""},
		// Two identities are used one after the other: the second sends one
		// request right after the burst exhausted the first.
		{"header key, two clients", perKey, []string{"--key", "header:X-Key", "--clients", "2"}, ExitOK, "", ""},
		{"header key, two clients, the server keyed globally", slowWindow, []string{"--key", "header:X-Key", "--clients", "2"}, ExitFindings, "", "certain  key-collapsed [key-spoof]"},
		{"header key, one client: the key untested", perKey, []string{"--key", "header:X-Key", "--clients", "1"}, ExitOK, "", "note: /api: the key (header:X-Key) was not tested"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "c.jsonl")
			args := append([]string{"check", progressURL, "--limit", "5", "--window", "20s", "--only", "burst", "--out", out}, c.args...)
			code, stdout, stderr := memCLI(t, c.server, args...)
			if code != c.code || !strings.Contains(stderr, c.msg) || !strings.Contains(stdout, c.stdout) {
				t.Fatalf("exit %d, stderr %q; want %d and %q, stdout with %q\n%s", code, stderr, c.code, c.msg, c.stdout, stdout)
			}
			if c.code != ExitOK {
				return
			}
			clients := map[string]bool{}
			for _, r := range readRecord(t, out).Results {
				clients[r.Client] = true
			}
			if c.name == "header key" && len(clients) > 4 {
				t.Errorf("clients %v: more than --clients 4", clients)
			}
		})
	}
}

// rawFloat matches a number with more digits after the point than any
// display format shows: 40.90909090909091, 3.666666666s.
var rawFloat = regexp.MustCompile(`\d\.\d{5,}`)

// TestProgressNumbersAreHuman: a policy whose rates are not round (9 per
// 22 s) gives progress and plan lines in the one display format, never a
// raw float (the sustained step printed 0.8181818181818182/s).
func TestProgressNumbersAreHuman(t *testing.T) {
	code, stdout, stderr := memCheck(t, testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.SlidingLog, Limit: 9, Window: 22 * time.Second}},
		"check", memURL, "--limit", "9", "--window", "22s", "--only", "sustained", "--out", filepath.Join(t.TempDir(), "r.jsonl"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "sustained: 0.8409/s for 44s") {
		t.Errorf("no sustained line in the display format:\n%s", stderr)
	}
	if m := rawFloat.FindAllString(stderr+stdout, -1); len(m) > 0 {
		t.Errorf("raw floats %q in\n%s%s", m, stderr, stdout)
	}
}
