package cli

import (
	"context"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
)

func TestParseHeaders(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "h.txt")
	if err := os.WriteFile(file, []byte("# comment\r\nX-A: 1\r\n\r\nX-B: $B and $$5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "abc", "B": "bee"}
	h, probs := parseHeaders([]string{"Authorization: Bearer ${TOKEN}", "@" + file, "X-Empty:", "X-A: 2"}, func(k string) string { return env[k] })
	want := http.Header{"Authorization": {"Bearer abc"}, "X-A": {"1", "2"}, "X-B": {"bee and $5"}, "X-Empty": {""}}
	if len(probs) != 0 || !reflect.DeepEqual(h, want) {
		t.Errorf("parseHeaders = %v, %v; want %v", h, probs, want)
	}
	_, probs = parseHeaders([]string{"nocolon", "Bad Name: x", "X: $UNSET", "@" + filepath.Join(dir, "missing")}, func(string) string { return "" })
	wantProbs := []string{`-H: write a header as "Name: value"`, `-H: "Bad Name" is not a valid header name`, "-H: $UNSET is not set", "-H @" + filepath.Join(dir, "missing")}
	if len(probs) != len(wantProbs) {
		t.Fatalf("problems %q, want %d", probs, len(wantProbs))
	}
	for i, w := range wantProbs {
		if !strings.HasPrefix(probs[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, probs[i], w)
		}
	}
}

func TestParseSourceIPs(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		in      string
		want    []netip.Addr
		wantErr string
	}{
		{"127.0.0.2", []netip.Addr{a("127.0.0.2")}, ""},
		{"127.0.0.2, 127.0.0.3,", []netip.Addr{a("127.0.0.2"), a("127.0.0.3")}, ""},
		{"127.0.0.0/30", []netip.Addr{a("127.0.0.1"), a("127.0.0.2")}, ""},
		{"127.0.0.8/31", []netip.Addr{a("127.0.0.8"), a("127.0.0.9")}, ""},
		{"127.0.0.5/32", []netip.Addr{a("127.0.0.5")}, ""},
		{"127.0.0.6/30", []netip.Addr{a("127.0.0.5"), a("127.0.0.6")}, ""}, // masked to .4/30
		{"::1", []netip.Addr{a("::1")}, ""},
		{"::ffff:127.0.0.2", []netip.Addr{a("127.0.0.2")}, ""},
		{"10.0.0.0/8", nil, "more than 4096"},
		{"127.0.0.256", nil, "not an IP address"},
		{"127.0.0.0/33", nil, "not a CIDR prefix"},
		{",", nil, "no address"},
	}
	for _, tt := range tests {
		got, err := parseSourceIPs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseSourceIPs(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseSourceIPs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, tt := range []struct{ in, wantErr string }{
		{"http://127.0.0.1:8080/x?y=1", ""},
		{"HTTPS://example.com", ""},
		{"http://[::1]:80/", ""},
		{"example.com/x", "no scheme"},
		{"ws://example.com/", "must be http or https"},
		{"http:///x", "no host"},
		{"http://:80/", "no host"},
		{"http://a b/", "not a URL"},
		{"http://x/%zz", "not a URL"},
	} {
		err := checkURL(tt.in, tt.in)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("checkURL(%q) = %v, want %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestOutcomeClass(t *testing.T) {
	for _, tt := range []struct {
		status, declared int
		want             string
	}{
		{200, 0, "accepted"}, {204, 503, "accepted"}, {429, 0, "rejected"}, {503, 0, "rejected"},
		{503, 429, "rejected"}, {429, 403, "rejected"}, {403, 403, "rejected"}, {404, 0, "other"}, {301, 0, "other"}, {500, 0, "other"},
	} {
		if got := outcomeClass(tt.status, tt.declared); got != tt.want {
			t.Errorf("outcomeClass(%d, %d) = %s, want %s", tt.status, tt.declared, got, tt.want)
		}
	}
}

func TestResolveDefaults(t *testing.T) {
	for _, tt := range []struct {
		command  string
		requests int
		duration time.Duration
	}{{"run", 10_000, 5 * time.Minute}, {"check", 5_000, 10 * time.Minute}, {"infer", 5_000, 10 * time.Minute}} {
		o := newTargetOptions(tt.command)
		f, _, _ := testFactory(nil)
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		tg, err := o.resolve(f, []string{"http://127.0.0.1:1/"}, now)
		if err != nil {
			t.Fatal(err)
		}
		if o.maxRequests != tt.requests || o.maxDuration != tt.duration || o.maxRate != 1000 || tg.probe.AbortAfterErrors != 20 {
			t.Errorf("%s caps = %d, %v, %v, abort %d", tt.command, o.maxRequests, o.maxDuration, o.maxRate, tg.probe.AbortAfterErrors)
		}
		if want := "rlprobe-" + tt.command + "-20300102T030405.000Z.jsonl"; tg.outPath != want {
			t.Errorf("default out = %s, want %s", tg.outPath, want)
		}
	}
}

func TestStatusHint(t *testing.T) {
	for status, want := range map[int]string{401: "credentials", 404: "path", 302: "redirects", 502: "--status", 418: "2xx"} {
		if got := statusHint(status); !strings.Contains(got, want) {
			t.Errorf("statusHint(%d) = %q, want it to mention %q", status, got, want)
		}
	}
}

func TestPreflight(t *testing.T) {
	srv := refServer(t, "/ok", nginxDemo(), with503)
	tests := []struct {
		path     string
		declared int
		wantCode int
		want     []string
	}{
		{"/ok", 0, 0, nil},
		{"/missing", 0, ExitUnreachable, []string{"answered 404 Not Found", "neither accepted nor rejected", "body:", "hint: check the URL's path"}},
	}
	for _, tt := range tests {
		p, err := probe.New(probe.Options{URLs: []string{srv.URL() + tt.path}})
		if err != nil {
			t.Fatal(err)
		}
		var sunk []record.Result
		res, err := preflight(context.Background(), p, time.Now(), tt.declared, sinkFn(func(r record.Result) error { sunk = append(sunk, r); return nil }))
		p.Close()
		if got := ExitCode(err); err != nil && got != tt.wantCode || err == nil && tt.wantCode != 0 {
			t.Errorf("preflight %s: err %v (exit %d), want exit %d", tt.path, err, got, tt.wantCode)
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("preflight %s: error %v lacks %q", tt.path, err, w)
			}
		}
		if len(sunk) != 1 || sunk[0].Seq != res.Seq {
			t.Errorf("preflight %s: sink got %v, want the one result", tt.path, sunk)
		}
	}
	// Nothing listening: exit 3 with a hint.
	p, _ := probe.New(probe.Options{URLs: []string{"http://127.0.0.1:1/"}})
	defer p.Close()
	_, err := preflight(context.Background(), p, time.Now(), 0, nil)
	if ExitCode(err) != ExitUnreachable || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("preflight to a closed port: %v", err)
	}
}

type sinkFn func(record.Result) error

func (f sinkFn) WriteResult(r record.Result) error { return f(r) }

func TestRunStartAt(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), with503)
	out := filepath.Join(t.TempDir(), "at.jsonl")
	start := time.Now().Add(400 * time.Millisecond).UTC().Truncate(time.Millisecond)
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "2", "--start-at", start.Format(time.RFC3339Nano), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	run := readRecord(t, out)
	for _, r := range run.Results {
		if at := run.Header.Start.Add(time.Duration(r.Sched)).Round(time.Microsecond); !at.Equal(start) {
			t.Errorf("seq %d scheduled at %v, want --start-at %v", r.Seq, at, start)
		}
	}
}
