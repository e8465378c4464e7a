package limitconf

import (
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
