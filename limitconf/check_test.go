package limitconf

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/verify"
)

// TestLiveCheck: the policy has one rule per probed location, its path
// under the base URL; a location without one URL is not checked and makes
// the verdict incomplete; no-limiting-observed becomes config-not-enforced
// and every finding names the config line.
func TestLiveCheck(t *testing.T) {
	im := parseFixture(t, "nginx-docs.conf", Options{})
	c, err := NewLiveCheck(im, TargetOptions{Base: "http://127.0.0.1:8080/", URLs: map[string]string{"^/items/[0-9]+$": "/items/7"}})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range c.Policy.Endpoints {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "/login") || !strings.Contains(got, "/items/7") || strings.Contains(got, "/search/") {
		t.Errorf("probed paths %q", got)
	}
	skipped := strings.Join(c.Skipped(), "\n")
	if !strings.Contains(skipped, "/search/ (") || !strings.Contains(skipped, "--location-url") {
		t.Errorf("the prefix location should be reported not checked: %q", skipped)
	}
	if notes := strings.Join(c.Notes(), "\n"); !strings.Contains(notes, "checking the binding one") {
		t.Errorf("notes should say which of several limits is checked: %q", notes)
	}

	rep := verify.Report{Complete: true, Findings: []verify.Finding{
		{ID: verify.IDNoLimitingObserved, Severity: verify.SeverityError, Certainty: verify.Certain, Endpoint: "/login", Message: "no rejection at all"},
		{ID: verify.IDRetryAfterMissing, Severity: verify.SeverityWarning, Certainty: verify.Certain, Endpoint: "/items/7", Message: "a rejection without Retry-After"},
	}}
	c.Judge(&rep, nil)
	if rep.Verdict != verify.VerdictFail || rep.Complete {
		t.Errorf("verdict %s complete %v, want fail, incomplete (a location was not checked)", rep.Verdict, rep.Complete)
	}
	if len(rep.Findings) != 2 || rep.Findings[0].ID != verify.IDConfigNotEnforced || rep.Findings[0].Certainty != verify.Certain ||
		!strings.Contains(rep.Findings[0].Message, "nginx-docs.conf:") {
		t.Fatalf("findings %+v", rep.Findings)
	}
	if m := rep.Findings[1].Message; !strings.HasPrefix(m, "nginx-docs.conf:33: ") {
		t.Errorf("the /items/7 finding should name its limit_req line: %q", m)
	}

	// Only the prefix location, without a URL: nothing to check.
	if _, err := NewLiveCheck(parseFixture(t, "nginx-docs.conf", Options{Location: "/search/"}), TargetOptions{Base: "http://h"}); err == nil ||
		!strings.Contains(err.Error(), "no location") {
		t.Errorf("nothing to check: err %v", err)
	}
	// A --location-url outside the base URL.
	if _, err := NewLiveCheck(im, TargetOptions{Base: "http://h", URLs: map[string]string{"/search/": "http://other/search/x"}}); err == nil ||
		!strings.Contains(err.Error(), "not under") {
		t.Errorf("a URL elsewhere: err %v", err)
	}
	// A window the duration cap cannot cover: not checked, incomplete.
	day, err := Parse([]byte("plugins:\n- name: rate-limiting\n  config: {second: 5, day: 100}\n"), "k.yaml", Options{Format: Kong})
	if err != nil {
		t.Fatal(err)
	}
	kong, err := NewLiveCheck(day, TargetOptions{Base: "http://h", MaxDuration: 10 * time.Minute, URLs: map[string]string{"/": "/x"}})
	if err != nil || len(kong.Skipped()) != 0 || kong.Policy.Endpoints[0].Path != "/x" || kong.Policy.Endpoints[0].Window != time.Second {
		t.Errorf("the binding second window fits: %v", err)
	}
	day, err = Parse([]byte("plugins:\n- name: rate-limiting\n  config: {day: 100}\n"), "k.yaml", Options{Format: Kong})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLiveCheck(day, TargetOptions{Base: "http://h", MaxDuration: 10 * time.Minute, URLs: map[string]string{"/": "/x"}}); err == nil ||
		!strings.Contains(err.Error(), "cannot be covered") {
		t.Errorf("a day window alone: err %v", err)
	}
}

// TestParseObserved: an infer document becomes the observation Judge
// reads, its fit, completeness and parameters as infer wrote them.
func TestParseObserved(t *testing.T) {
	tests := []struct {
		name, doc string
		want      Observed
		wantErr   bool
	}{
		{"token bucket", `{"schema":"rlprobe.infer/v1","algorithm":"token-bucket","fit":"exact","closest":"token-bucket","complete":true,
			"params":{"limit":null,"window_s":null,"rate_per_s":{"value":1,"low":0.99,"high":1.01},"capacity":{"value":4,"low":4,"high":4}}}`,
			Observed{Family: "token-bucket", Fit: "exact", Closest: "token-bucket", Rate: &Bound{1, 0.99, 1.01}, Capacity: &Bound{4, 4, 4}}, false},
		{"misfit, cut short", `{"algorithm":null,"fit":"misfit","closest":"fixed-window","complete":false,"params":{"limit":{"value":5,"low":5,"high":6},"window_s":{"value":2,"low":1.9,"high":2.1}}}`,
			Observed{Fit: "misfit", Closest: "fixed-window", Incomplete: true, Limit: &Bound{5, 5, 6}, WindowS: &Bound{2, 1.9, 2.1}}, false},
		{"none", `{"algorithm":"none","fit":"exact","closest":"none","complete":true,"params":{}}`, Observed{Family: "none", Fit: "exact", Closest: "none"}, false},
		{"no fit", `{"algorithm":"none"}`, Observed{}, true},
		{"not JSON", `algorithm: none`, Observed{}, true},
	}
	for _, tt := range tests {
		got, err := ParseObserved([]byte(tt.doc))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(*got, tt.want) {
			t.Errorf("%s: %s, want %s", tt.name, fmtObserved(got), fmtObserved(&tt.want))
		}
	}
}

// TestLiveCheckJudgeInferred: each probed target is judged with its
// inference: another rate is a config-mismatch, certain for a complete
// exact fit and possible for one the budget cut short (the verdict then
// incomplete, with a line saying so); a target not inferred makes the
// verdict incomplete and is listed with its reason.
func TestLiveCheckJudgeInferred(t *testing.T) {
	im := parseFixture(t, "nginx-docs.conf", Options{Location: "= /login"})
	c, err := NewLiveCheck(im, TargetOptions{Base: "http://127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Policy.Endpoints) != 1 {
		t.Fatalf("policy %+v: want the one location", c.Policy)
	}
	ep := c.Policy.Endpoints[0]
	wrong := &Observed{Family: "token-bucket", Fit: "exact", Rate: &Bound{ep.Rate * 3, ep.Rate * 2.9, ep.Rate * 3.1}, Capacity: &Bound{4, 4, 4}}
	cut := *wrong
	cut.Incomplete = true
	tests := []struct {
		name     string
		inferred []Inferred
		cert     verify.Certainty // of the config-mismatch; "" for none
		complete bool
		note     string
	}{
		{"nothing inferred", nil, "", true, ""},
		{"complete exact fit", []Inferred{{Observed: wrong}}, verify.Certain, true, ""},
		{"cut short", []Inferred{{Observed: &cut}}, verify.Possible, false, "incomplete"},
		{"not inferred", []Inferred{{Skipped: "not inferred: no time left"}}, "", false, "no time left"},
	}
	for _, tt := range tests {
		rep := verify.Report{Complete: true, Findings: []verify.Finding{}}
		notes := strings.Join(c.Judge(&rep, tt.inferred), "\n")
		var got verify.Certainty
		for _, f := range rep.Findings {
			if f.ID == verify.IDConfigMismatch && got == "" {
				got = f.Certainty
				if !strings.Contains(f.Message, "nginx-docs.conf:") {
					t.Errorf("%s: the mismatch should name the config line: %q", tt.name, f.Message)
				}
			}
		}
		if got != tt.cert || rep.Complete != tt.complete || (tt.note == "") != (notes == "") || !strings.Contains(notes, tt.note) {
			t.Errorf("%s: mismatch %q, complete %v, notes %q; want %q, %v, %q", tt.name, got, rep.Complete, notes, tt.cert, tt.complete, tt.note)
		}
		if wantFail := tt.cert == verify.Certain; rep.Failed() != wantFail {
			t.Errorf("%s: verdict %s", tt.name, rep.Verdict)
		}
	}
}

func fmtObserved(o *Observed) string {
	return fmt.Sprintf("%+v rate %v capacity %v limit %v window %v", *o, o.Rate, o.Capacity, o.Limit, o.WindowS)
}
