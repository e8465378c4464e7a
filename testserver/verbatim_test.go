package testserver

import (
	"bufio"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// rawHead sends one GET over HTTP/1.1 on a fresh connection and returns the
// field names of the answer exactly as they came on the wire (Go's client
// would canonicalise them).
func rawHead(t *testing.T, addr, path string) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	r := textproto.NewReader(bufio.NewReader(c))
	if _, err := r.ReadLine(); err != nil { // the status line
		t.Fatal(err)
	}
	var names []string
	for {
		line, err := r.ReadLine()
		if err != nil {
			t.Fatal(err)
		}
		if line == "" {
			return names
		}
		name, _, _ := strings.Cut(line, ":")
		names = append(names, name)
	}
}

// TestWireSpellings checks, over a real socket, that the reference server
// sends each dialect's field names as the drafts spell them, not as Go
// canonicalises them (Ratelimit-Policy, X-Ratelimit-Limit).
func TestWireSpellings(t *testing.T) {
	want := map[headers.Dialect][]string{
		headers.Draft8:          {"RateLimit", "RateLimit-Policy"},
		headers.Draft7:          {"RateLimit", "RateLimit-Policy"},
		headers.Draft6:          {"RateLimit-Limit", "RateLimit-Policy", "RateLimit-Remaining", "RateLimit-Reset"},
		headers.XRateLimit:      {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
		headers.XRateLimitEpoch: {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"},
	}
	var routes []Route
	for d := range want {
		routes = append(routes, Route{Path: "/" + string(d), Policy: Policy{
			Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute},
			Dialects: []headers.Dialect{d},
		}})
	}
	s := startServer(t, Config{Routes: routes})
	addr := strings.TrimPrefix(s.URL(), "http://")
	for d, names := range want {
		for _, status := range []string{"accepted", "rejected"} {
			got := rawHead(t, addr, "/"+string(d))
			for _, n := range names {
				if !slices.Contains(got, n) {
					t.Errorf("%s, %s: field names %q lack %q verbatim", d, status, got, n)
				}
			}
			if status == "rejected" && !slices.Contains(got, "Retry-After") {
				t.Errorf("%s, rejected: field names %q lack Retry-After", d, got)
			}
			for _, n := range got {
				if strings.Contains(n, "Ratelimit") {
					t.Errorf("%s, %s: %q is Go's canonical spelling, not the draft's", d, status, n)
				}
			}
		}
	}
}

// TestVendorDialectsNotServed: the vendor dialects are read, never served.
func TestVendorDialectsNotServed(t *testing.T) {
	one := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Minute}
	for _, d := range []headers.Dialect{headers.OpenAI, headers.GitHub, headers.Shopify} {
		_, err := NewHandler([]Route{{Policy: Policy{Limiter: one, Dialects: []headers.Dialect{d}}}}, HandlerOptions{})
		if err == nil || !strings.Contains(err.Error(), "not served") {
			t.Errorf("dialect %s: NewHandler error %v, want one saying it is not served", d, err)
		}
	}
}

// TestFaultMalformedVerbatim: the malformed-ratelimit fault breaks the
// field written under the draft's spelling.
func TestFaultMalformedVerbatim(t *testing.T) {
	h, _ := newTestHandler(t, Policy{Limiter: fixed5, Dialects: []headers.Dialect{headers.Draft8}, Faults: []Fault{FaultMalformedRateLimit}}, HandlerOptions{})
	resp := get(h, "/", "")
	if v := resp.Header["RateLimit"]; len(v) != 1 || !strings.HasSuffix(v[0], ";") {
		t.Errorf("RateLimit = %q, want the draft-8 value broken by a trailing ';' (header %v)", v, resp.Header)
	}
	if _, ok := resp.Header[http.CanonicalHeaderKey("RateLimit")]; ok {
		t.Errorf("the fault wrote the canonical key too: %v", resp.Header)
	}
}
