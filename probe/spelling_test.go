package probe

import (
	"crypto/tls"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// TestHeaderNamesVerbatim: records keep captured header names as the
// server spelled them over HTTP/1.1 — on the lean path, on net/http's
// (a chunked answer) and in a preflight — and lower case over HTTP/2.
func TestHeaderNamesVerbatim(t *testing.T) {
	handler := func(chunked bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h["RateLimit-Policy"] = []string{`"q";q=5;w=1`}
			h["x-ratelimit-remaining"] = []string{"3"}
			h["RETRY-AFTER"] = []string{"1"}
			w.WriteHeader(http.StatusOK)
			if chunked {
				w.(http.Flusher).Flush()
				w.Write([]byte("body"))
			}
		}
	}
	h1 := []string{"Date", "RETRY-AFTER", "RateLimit-Policy", "x-ratelimit-remaining"}
	for _, tt := range []struct {
		name    string
		chunked bool
		tls     bool
		noLoop  bool // the net.Conn path instead of the event loop
		want    []string
	}{
		{"http1-lean", false, false, false, h1},
		{"http1-net-http", true, false, false, h1},
		{"http1-lean-conn", false, false, true, h1},
		{"http1-net-http-conn", true, false, true, h1},
		{"http2", false, true, false, []string{"date", "ratelimit-policy", "retry-after", "x-ratelimit-remaining"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, handler(tt.chunked), func(s *httptest.Server) {
				if tt.tls {
					s.EnableHTTP2 = true
					s.StartTLS()
				} else {
					s.Start()
				}
			})
			e := newEngine(t, Options{URLs: []string{srv.URL}, TLSConfig: &tls.Config{InsecureSkipVerify: true}})
			e.noLoop = tt.noLoop
			for i, r := range mustRun(t, e, steady(2, 0, 10*ms)) {
				if got := slices.Sorted(maps.Keys(r.Headers)); !slices.Equal(got, tt.want) {
					t.Errorf("results[%d] header names %q, want %q", i, got, tt.want)
				}
			}
			res, _, err := e.Preflight(t.Context(), time.Now())
			if got := slices.Sorted(maps.Keys(res.Headers)); err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("preflight header names %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}
