package session

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

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/testserver"
)

func TestParseHeaders(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "h.txt")
	if err := os.WriteFile(file, []byte("# comment\r\nX-A: 1\r\n\r\nX-B: $B and $$5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "abc", "B": "bee"}
	h, probs := ParseHeaders([]string{"Authorization: Bearer ${TOKEN}", "@" + file, "X-Empty:", "X-A: 2"}, func(k string) string { return env[k] })
	want := http.Header{"Authorization": {"Bearer abc"}, "X-A": {"1", "2"}, "X-B": {"bee and $5"}, "X-Empty": {""}}
	if len(probs) != 0 || !reflect.DeepEqual(h, want) {
		t.Errorf("parseHeaders = %v, %v; want %v", h, probs, want)
	}
	_, probs = ParseHeaders([]string{"nocolon", "Bad Name: x", "X: $UNSET", "@" + filepath.Join(dir, "missing")}, func(string) string { return "" })
	wantProbs := []string{`-H: write a header as "Name: value"`, `-H: "Bad Name" is not a valid header name`, "-H: $UNSET is not set", "-H @" + filepath.Join(dir, "missing")}
	if len(probs) != len(wantProbs) {
		t.Fatalf("problems %q, want %d", probs, len(wantProbs))
	}
	for i, w := range wantProbs {
		if !strings.HasPrefix(probs[i].String(), w) {
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
		got, err := ParseSourceIPs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSourceIPs(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseSourceIPs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
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

func TestResolveDefaults(t *testing.T) {
	for _, tt := range []struct {
		command  string
		requests int
		duration time.Duration
	}{{"run", 10_000, 5 * time.Minute}, {"check", 5_000, 10 * time.Minute}, {"infer", 5_000, 10 * time.Minute}} {
		tg := DefaultTarget(tt.command)
		tg.URLs = []string{"http://127.0.0.1:1/"}
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		cfg, err := tg.Resolve(now, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Caps
		if c.MaxRequests != tt.requests || c.MaxDuration != tt.duration || c.MaxRate != 1000 || cfg.Probe.AbortAfterErrors != 20 {
			t.Errorf("%s caps = %+v, abort %d", tt.command, c, cfg.Probe.AbortAfterErrors)
		}
		if want := "rlprobe-" + tt.command + "-20300102T030405.000Z.jsonl"; cfg.Out != want {
			t.Errorf("default out = %s, want %s", cfg.Out, want)
		}
	}
}

func TestStatusHint(t *testing.T) {
	for status, want := range map[int]string{401: "credentials", 404: "path", 302: "redirects", 502: "--status", 418: "2xx"} {
		if got := StatusHint(status); !strings.Contains(got, want) {
			t.Errorf("StatusHint(%d) = %q, want it to mention %q", status, got, want)
		}
	}
}

// TestPreflight: an answer neither accepted nor rejected ends Infer
// before any experiment with exit class Aborted, the status, the body and
// a hint; the preflight is recorded all the same; nothing listening is
// "cannot reach".
func TestPreflight(t *testing.T) {
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Path: "/ok",
		Policy: testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 1, Capacity: 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(ml); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	s, err := New(Config{Probe: probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/missing"}, Dial: ml.Dial}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := s.Infer(context.Background(), InferOptions{})
	if inf != nil || ClassOf(err) != Aborted {
		t.Fatalf("Infer against a 404 = %v, %v (class %d); want no inference, class Aborted", inf, err, ClassOf(err))
	}
	for _, w := range []string{"answered 404 Not Found", "neither accepted nor rejected", "body:", "hint: check the URL's path"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	if run := s.Record(); len(run.Results) != 1 || run.Results[0].Status != 404 || run.End.Reason != "aborted" || run.End.Sent != 1 {
		t.Errorf("record %+v %+v; want the preflight and an aborted end", run.Results, run.End)
	}
	s, _ = New(Config{Probe: probe.Options{URLs: []string{"http://127.0.0.1:1/"}}})
	if _, err := s.Infer(context.Background(), InferOptions{}); ClassOf(err) != Aborted || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("Infer against a closed port: %v", err)
	}
}

// TestRemoteURLs: the targets off this machine, with their secrets
// redacted; loopback names and addresses are not asked about.
func TestRemoteURLs(t *testing.T) {
	tg := Target{URLs: []string{"http://127.0.0.2:8080/", "http://localhost/x", "http://[::1]/", "https://api.example.com/v1?api_key=s3cret", "http://10.0.0.1/"}}
	got := tg.RemoteURLs()
	if len(got) != 2 || strings.Contains(got[0], "s3cret") || !strings.HasPrefix(got[0], "https://api.example.com/v1?api_key=redacted") || got[1] != "http://10.0.0.1/" {
		t.Errorf("RemoteURLs() = %q", got)
	}
}
