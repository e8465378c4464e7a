package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// TestHeaderSpellingsPerDialect: for every dialect the reference server
// serves, the record keeps the drafts' spellings (RateLimit-Policy, not
// Go's canonical Ratelimit-Policy), and analyze reads them: no header is
// missing or malformed.
func TestHeaderSpellingsPerDialect(t *testing.T) {
	tb := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 1, Capacity: 3}
	for _, d := range []headers.Dialect{headers.XRateLimit, headers.XRateLimitEpoch, headers.Draft6, headers.Draft7, headers.Draft8} {
		t.Run(string(d), func(t *testing.T) {
			srv := refServer(t, "", tb, func(_ *testserver.Config, p *testserver.Policy) { p.Dialects = []headers.Dialect{d} })
			out := filepath.Join(t.TempDir(), "r.jsonl")
			if code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "5", "--out", out); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			names := map[string]bool{}
			for _, r := range readRecord(t, out).Results {
				for k := range r.Headers {
					names[k] = true
				}
			}
			limited := 0
			for k := range names {
				if !slices.Contains(headers.Captured, k) {
					t.Errorf("header name %q is not spelled as the drafts spell it", k)
				}
				if k != "Date" && k != "Retry-After" {
					limited++
				}
			}
			if limited == 0 {
				t.Errorf("no rate-limit header recorded: %v", names)
			}
			code, doc, stderr := runCLI(t, nil, "analyze", out, "--rate", "1/s", "--capacity", "3", "--headers", string(d), "--json")
			var rep verify.Report
			if err := json.Unmarshal([]byte(doc), &rep); err != nil {
				t.Fatalf("analyze: exit %d, %v\n%s", code, err, stderr)
			}
			for _, f := range rep.Findings {
				switch f.ID {
				case verify.IDRateLimitHeaderMissing, verify.IDRateLimitHeaderMalformed:
					t.Errorf("analyze found %s: %s", f.ID, f.Message)
				}
			}
		})
	}
}
