package limitconf

import (
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/verify"
)

func TestTargets(t *testing.T) {
	im := parseFixture(t, "nginx-docs.conf", Options{})
	ts := Targets(im, TargetOptions{Base: "http://127.0.0.1:8080/", URLs: map[string]string{"^/items/[0-9]+$": "/items/7"}})
	byLoc := map[string]Target{}
	for _, tg := range ts {
		byLoc[tg.Location] = tg
	}
	if tg := byLoc["= /login"]; tg.URL != "http://127.0.0.1:8080/login" || len(tg.Rules) != 2 || !tg.Rules[0].Binding ||
		tg.Policy.Endpoints[0].Rate != 1 || tg.Policy.Endpoints[0].Path != "" || len(tg.Notes) != 2 {
		t.Errorf("= /login: %+v", tg)
	}
	if tg := byLoc["~ ^/items/[0-9]+$"]; tg.URL != "http://127.0.0.1:8080/items/7" || tg.Untested != "" {
		t.Errorf("regex with --location-url: %+v", tg)
	}
	if tg := byLoc["/search/"]; tg.URL != "" || !strings.Contains(tg.Untested, "--location-url") {
		t.Errorf("prefix shadowed by a regex: %+v", tg)
	}
	// Kong's hour and day windows: the binding second window fits the
	// caps; a day-only limit does not.
	kong := parseFixture(t, "kong.yaml", Options{})
	for _, tg := range Targets(kong, TargetOptions{Base: "http://h", MaxDuration: 10 * time.Minute}) {
		if tg.Location == "orders-list /orders" && tg.Incomplete != "" {
			t.Errorf("5 per second fits 10 minutes: %s", tg.Incomplete)
		}
	}
	day, err := Parse([]byte("plugins:\n- name: rate-limiting\n  config: {day: 100}\n"), "k.yaml", Options{Format: Kong})
	if err != nil {
		t.Fatal(err)
	}
	if ts := Targets(day, TargetOptions{Base: "http://h", MaxDuration: 10 * time.Minute}); len(ts) != 1 || ts[0].Incomplete == "" {
		t.Errorf("a day window cannot be covered in 10 minutes: %+v", ts)
	}
	for in, want := range map[string][2]string{
		"~ ^/a=b$=/a=b":              {"~ ^/a=b$", "/a=b"},
		"= /login=/login":            {"= /login", "/login"},
		"/api/=http://h:1/api/x?q=1": {"/api/", "http://h:1/api/x?q=1"},
	} {
		if p, u, err := ParseLocationURL(in); err != nil || p != want[0] || u != want[1] {
			t.Errorf("ParseLocationURL(%q) = %q, %q, %v; want %q", in, p, u, err, want)
		}
	}
	if _, _, err := ParseLocationURL("/api=items"); err == nil {
		t.Errorf("a URL that is neither a path nor absolute should be refused")
	}
}

func TestJudge(t *testing.T) {
	im := parseExample(t)
	ts := Targets(im, TargetOptions{Base: "http://127.0.0.1:8080"})
	trap := ts[1]
	if trap.Location != "= /trap" {
		t.Fatalf("target 1 is %s", trap.Location)
	}
	rep := &verify.Report{Findings: []verify.Finding{
		{ID: verify.IDNoLimitingObserved, Severity: verify.SeverityError, Certainty: verify.Certain, Message: "no request was rejected"},
		{ID: verify.IDRetryAfterMissing, Severity: verify.SeverityWarning, Certainty: verify.Certain},
	}}
	fs := Judge(trap, rep, nil)
	if len(fs) != 2 || fs[0].ID != verify.IDConfigNotEnforced || fs[0].Certainty != verify.Certain ||
		!strings.Contains(fs[0].Message, "examples/nginx.conf:72") || !strings.Contains(fs[0].Message, "no request was rejected") {
		t.Errorf("Judge(no limiting) = %+v", fs)
	}
	if rep.Findings[0].ID != verify.IDNoLimitingObserved {
		t.Errorf("Judge modified the report")
	}
	// Inference: none → config-not-enforced (possible when the check did
	// not show it); a queue where the config says nodelay → mismatch;
	// the config's own parameters → nothing.
	root := ts[0]
	bound := func(v float64) *Bound { return &Bound{Value: v, Low: v * 0.98, High: v * 1.02} }
	tests := []struct {
		name string
		obs  Observed
		want []string
	}{
		{"none", Observed{Family: "none"}, []string{verify.IDConfigNotEnforced}},
		{"as configured", Observed{Family: "token-bucket", Fit: "exact", Rate: bound(1), Capacity: &Bound{4, 4, 4}}, nil},
		{"queue instead", Observed{Family: "leaky-bucket-queue", Fit: "exact"}, []string{verify.IDConfigMismatch}},
		{"twice the rate", Observed{Family: "token-bucket", Fit: "exact", Rate: bound(2), Capacity: &Bound{4, 4, 4}}, []string{verify.IDConfigMismatch}},
		{"bigger bucket", Observed{Family: "token-bucket", Fit: "approximate", Rate: bound(1), Capacity: &Bound{10, 9, 11}}, []string{verify.IDConfigMismatch}},
		{"nothing fits", Observed{Fit: "misfit", Closest: "fixed-window"}, []string{verify.IDConfigMismatch}},
	}
	for _, tt := range tests {
		fs := Judge(root, nil, &tt.obs)
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: Judge = %v, want %v (%+v)", tt.name, ids, tt.want, fs)
		}
		if tt.name == "bigger bucket" && fs[0].Certainty != verify.Possible {
			t.Errorf("a fit reproducing 80%% of outcomes gives a possible mismatch, not %s", fs[0].Certainty)
		}
	}
	// Envoy: a continuous bucket (newer Envoy) is not a mismatch for a
	// fixed-window rule.
	env := parseFixture(t, "envoy-route.yaml", Options{})
	login := Targets(env, TargetOptions{Base: "http://h"})[0]
	if fs := Judge(login, nil, &Observed{Family: "token-bucket", Fit: "exact", Rate: bound(5.0 / 60), Capacity: &Bound{5, 5, 5}}); len(fs) != 0 {
		t.Errorf("Envoy continuous bucket: %+v", fs)
	}
}

// TestJudgeCertaintyFollowsTheFit: config-mismatch is certain only
// against an exact fit; an approximate fit or a misfit makes it possible,
// whatever share of the outcomes it reproduces.
func TestJudgeCertaintyFollowsTheFit(t *testing.T) {
	root := Target{URL: "http://127.0.0.1/", Location: "/", Rules: []Rule{{Family: TokenBucket,
		Endpoint: verify.Endpoint{Rate: 1, Capacity: 4}}}}
	for fit, want := range map[string]verify.Certainty{"exact": verify.Certain, "approximate": verify.Possible, "misfit": verify.Possible} {
		obs := Observed{Family: "fixed-window", Fit: fit}
		if fit == "misfit" {
			obs = Observed{Fit: fit, Closest: "fixed-window"}
		}
		fs := Judge(root, nil, &obs)
		if len(fs) != 1 || fs[0].ID != verify.IDConfigMismatch || fs[0].Certainty != want {
			t.Errorf("fit %s: %+v, want one config-mismatch, %s", fit, fs, want)
		}
	}
}
