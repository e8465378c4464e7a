package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// TestDraft11And12AsDraft8: check and infer against the reference server
// serving draft-11 (r the available quota, t the effective window) or
// draft-12 (a/w/c) give the verdict, the findings and the inferred policy
// they give against draft-8, and infer's headers name the dialect served.
// In a synctest bubble over an in-memory listener.
func TestDraft11And12AsDraft8(t *testing.T) {
	configs := []struct {
		name  string
		cfg   limiter.Config
		check []string
	}{
		{"fixed window, epoch, 5 per 2 s", limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch},
			[]string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch"}},
		{"sliding log, 5 per 2 s", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 5, Window: 2 * time.Second},
			[]string{"--limit", "5", "--window", "2s"}},
		{"token bucket 2/s, capacity 4", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 4},
			[]string{"--rate", "2/s", "--capacity", "4"}},
	}
	type outcome struct {
		code     int
		verdict  string
		findings []string
		inferred string
		headers  []string
	}
	run := func(t *testing.T, cfg limiter.Config, d headers.Dialect, check []string) outcome {
		p := testserver.Policy{Limiter: cfg, Dialects: []headers.Dialect{d}}
		var o outcome
		args := append([]string{"check", memURL, "--json", "-q", "--out", filepath.Join(t.TempDir(), "c.jsonl"), "--headers", string(d)}, check...)
		code, stdout, stderr := memCheck(t, p, args...)
		var rep verify.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("check %s: exit %d: %v\n%s", d, code, err, stderr)
		}
		o.code, o.verdict = code, rep.Verdict
		for _, f := range rep.Findings {
			o.findings = append(o.findings, fmt.Sprintf("%s %s %s", f.ID, f.Severity, f.Certainty))
		}
		slices.Sort(o.findings)
		code, stdout, stderr = memCheck(t, p, "infer", memURL, "--json", "-q", "--out", filepath.Join(t.TempDir(), "i.jsonl"))
		var inf infer.Inference
		if err := json.Unmarshal([]byte(stdout), &inf); err != nil {
			t.Fatalf("infer %s: exit %d: %v\n%s", d, code, err, stderr)
		}
		o.inferred = fmt.Sprintf("%s %s", inf.Algorithm, params(inf.Params))
		o.headers = inf.Headers
		return o
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			base := run(t, c.cfg, headers.Draft8, c.check)
			if !slices.Equal(base.headers, []string{"draft-8"}) {
				t.Errorf("draft-8: infer's headers %v", base.headers)
			}
			t.Logf("draft-8: exit %d, %s, findings %v; inferred %s", base.code, base.verdict, base.findings, base.inferred)
			for _, d := range []headers.Dialect{headers.Draft11, headers.Draft12} {
				got := run(t, c.cfg, d, c.check)
				if got.code != base.code || got.verdict != base.verdict || !slices.Equal(got.findings, base.findings) {
					t.Errorf("%s: check exit %d, %s, findings %v; draft-8 gave exit %d, %s, %v",
						d, got.code, got.verdict, got.findings, base.code, base.verdict, base.findings)
				}
				if got.inferred != base.inferred {
					t.Errorf("%s: inferred %s; draft-8 gave %s", d, got.inferred, base.inferred)
				}
				if !slices.Equal(got.headers, []string{string(d)}) {
					t.Errorf("%s: infer's headers %v, want [%s]", d, got.headers, d)
				}
			}
		})
	}
}

// params formats the inferred parameters' values.
func params(p infer.Params) string {
	s := ""
	for _, x := range []struct {
		name string
		v    *infer.Param
	}{{"limit", p.Limit}, {"window", p.WindowS}, {"rate", p.RatePerS}, {"capacity", p.Capacity}, {"undelayed", p.Undelayed}, {"queue", p.Queue}} {
		if x.v != nil {
			s += fmt.Sprintf(" %s=%.3g", x.name, x.v.Value)
		}
	}
	return s
}
