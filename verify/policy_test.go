package verify

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/problem"
)

func TestParsePolicyFile(t *testing.T) {
	const file = `version: 1
endpoints:
  - path: /api
    limit: 100
    window: 60s
    key: ip
    status: 429
    headers: [draft-8, x-ratelimit]
    retry_after: required
  - path: /login
    method: post
    rate: 1r/s
    burst: 3
  - path: /fixed
    limit: 5
    window: 2s
    window_type: fixed
    align: epoch
    headers: draft-7
`
	p, err := ParsePolicyFile([]byte(file), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{
		{Path: "/api", Limit: 100, Window: time.Minute, WindowType: Sliding, Key: KeyIP, Status: 429,
			Headers: []string{"x-ratelimit", "draft-8"}, RetryAfter: RetryAfterRequired},
		{Path: "/login", Method: "POST", Rate: 1, Capacity: 4, Key: KeyGlobal, RetryAfter: RetryAfterOptional},
		{Path: "/fixed", Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: limiter.AlignEpoch, Key: KeyGlobal,
			Headers: []string{"draft-7"}, RetryAfter: RetryAfterOptional},
	}
	if p.Version != 1 || !reflect.DeepEqual(p.Endpoints, want) {
		t.Errorf("ParsePolicyFile =\n%+v\nwant\n%+v", p.Endpoints, want)
	}
}

func TestParsePolicyFileProblems(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each a substring of one problem, in order
	}{
		{"unknown keys with lines", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    windw_type: fixed\n    colour: red\n",
			[]string{"line 5: endpoints[0].windw_type: unknown key", "line 6: endpoints[0].colour: unknown key"}},
		{"every problem at once", "version: 2\nendpoints:\n  - limit: 0\n    window: 60\n  - rate: 10\n    capacity: 5\n    burst: 4\n",
			[]string{"line 4: endpoints[0].window: duration \"60\" has no unit", "line 5: endpoints[1].rate: rate \"10\" has no unit",
				"version: must be 1, not 2", "line 3: endpoints[0].limit: must be at least 1", "line 7: endpoints[1].burst: give capacity or burst, not both"}},
		{"window and bucket mixed", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    rate: 1/s\n    capacity: 2\n",
			[]string{"not both"}},
		{"align without fixed", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    align: epoch\n",
			[]string{"line 5: endpoints[0].align: applies to fixed windows only"}},
		{"align timer", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    window_type: fixed\n    align: timer\n",
			[]string{"line 6: endpoints[0].align: timer-aligned windows need the timer's phase, which only infer measures: use epoch or first-request"}},
		{"bad key, status, dialect, retry_after", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    key: cookie\n    status: 200\n    headers: draft-9\n    retry_after: sometimes\n",
			[]string{"key: must be global, ip or header:NAME", "status: a reject status is 400 to 599", "unknown dialect \"draft-9\"", "retry_after: must be required or optional"}},
		{"missing version and endpoints", "{}", []string{"version: missing", "endpoints: declare a policy"}},
		{"not a mapping", "- 1\n- 2\n", []string{"must be a mapping"}},
		{"JSON with an unknown key", `{"version": 1, "endpoints": [{"limit": 5, "window": "1s", "limt": 3}]}`, []string{"line 1: endpoints[0].limt: unknown key"}},
		{"quoted number", "version: 1\nendpoints:\n  - limit: \"5\"\n    window: 1s\n", []string{"limit: must be a whole number"}},
		{"bad penalty: limiter's problem under the field", "version: 1\nendpoints:\n  - limit: 5\n    window: 1s\n    penalty: sometimes\n",
			[]string{`verify: invalid policy in p.yaml: line 5: endpoints[0].penalty: penalty "sometimes": one of block:DURATION, extend, restart`}},
	}
	for _, tt := range tests {
		_, err := ParsePolicyFile([]byte(tt.file), "p.yaml")
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Source != "p.yaml" {
			t.Errorf("%s: error %v, want a *problem.Error in p.yaml", tt.name, err)
			continue
		}
		msg := err.Error()
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error\n%s\nlacks %q", tt.name, msg, w)
			}
		}
		if !strings.HasPrefix(msg, "verify: invalid policy in p.yaml") {
			t.Errorf("%s: error %q does not name the package and the file", tt.name, msg)
		}
	}
}

func TestParseDraftPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    []Endpoint
		wantErr string
	}{
		{`"default";q=100;w=60`, []Endpoint{{Name: "default", Limit: 100, Window: time.Minute}}, ""},
		{`"burst";q=100;w=60,"daily";q=1000;w=86400`, []Endpoint{
			{Name: "burst", Limit: 100, Window: time.Minute}, {Name: "daily", Limit: 1000, Window: 24 * time.Hour}}, ""},
		{`100;w=60`, []Endpoint{{Limit: 100, Window: time.Minute}}, ""},
		{`"x"; q=5; w=2; pk=:cHsdsRa894==:`, []Endpoint{{Name: "x", Limit: 5, Window: 2 * time.Second}}, ""},
		{`"x";q=5`, nil, "policy[0].w: missing"},
		{`"x";w=5`, nil, "policy[0].q: missing"},
		{`"x";q=5;w=0`, nil, "w: must be a positive integer"},
		{`"x";q=5;w=1;qu="content-bytes"`, nil, "only the quota unit \"requests\""},
		{`"x";q=5;w=1;burst=3`, nil, "policy[0].burst: unknown parameter"},
		{`q=5, w=60`, nil, "is not a RateLimit-Policy value"},
		{`"unterminated`, nil, "is not a RateLimit-Policy value"},
	}
	for _, tt := range tests {
		got, err := ParseDraftPolicy(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDraftPolicy(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseDraftPolicy(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestValidateFlagsPolicy(t *testing.T) {
	b := int64(3)
	tests := []struct {
		name string
		e    Endpoint
		want string // "" = valid
	}{
		{"window", Endpoint{Limit: 100, Window: time.Minute}, ""},
		{"bucket by burst", Endpoint{Rate: 1, Burst: &b}, ""},
		{"both capacity and burst", Endpoint{Rate: 1, Capacity: 4, Burst: &b}, "burst: give capacity or burst, not both"},
		{"rate without capacity", Endpoint{Rate: 1}, "capacity: must be at least 1"},
		{"nothing", Endpoint{}, "limit: declare a policy"},
		{"header key", Endpoint{Limit: 1, Window: time.Second, Key: "header:X-Api-Key"}, ""},
		{"empty header key", Endpoint{Limit: 1, Window: time.Second, Key: "header:"}, "key: header:NAME needs a header name"},
		{"none with others", Endpoint{Limit: 1, Window: time.Second, Headers: []string{"none", "draft-8"}}, "none excludes other dialects"},
	}
	for _, tt := range tests {
		p := Policy{Version: 1, Endpoints: []Endpoint{tt.e}}
		err := p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Validate = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	// Normalize folds burst into capacity.
	p := Policy{Version: 1, Endpoints: []Endpoint{{Rate: 1, Burst: &b}}}.Normalize()
	if e := p.Endpoints[0]; e.Capacity != 4 || e.Burst != nil {
		t.Errorf("Normalize(burst 3) = capacity %d, burst %v; want capacity 4", e.Capacity, e.Burst)
	}
}

// TestPolicyRoundTrip: a valid policy written as JSON reads back equal.
func TestPolicyRoundTrip(t *testing.T) {
	const file = "version: 1\nendpoints:\n  - {path: /a, limit: 7, window: 1m30s, window_type: fixed, align: first-request}\n  - {rate: 1/m, capacity: 2, key: header:X-Api-Key, headers: [draft-6]}\n"
	p, err := ParsePolicyFile([]byte(file), "")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePolicyFile(data, "")
	if err != nil {
		t.Fatalf("reading back %s: %v", data, err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip changed the policy:\n%+v\n%s\n%+v", p, data, q)
	}
	var r Policy
	if err := json.Unmarshal(data, &r); err != nil || !reflect.DeepEqual(r.Normalize(), p) {
		t.Errorf("json.Unmarshal = %+v, %v; want %+v", r, err, p)
	}
}

func FuzzParsePolicyFile(f *testing.F) {
	f.Add([]byte("version: 1\nendpoints:\n  - limit: 5\n    window: 2s\n"))
	f.Add([]byte(`{"version":1,"endpoints":[{"rate":"1r/s","burst":3,"status":429,"key":"ip"}]}`))
	f.Add([]byte("version: 1\nendpoints:\n  - {limit: 1, window: 1h, window_type: fixed, align: epoch, headers: draft-8}\n"))
	f.Add([]byte("version: 1\nendpoints: [{rate: 0.5/s, capacity: 1}, {path: /x, method: PUT, limit: 3, window: 500ms}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicyFile(data, "fuzz")
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("a parsed policy does not validate: %v", err)
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		q, err := ParsePolicyFile(out, "again")
		if err != nil {
			t.Fatalf("a valid policy does not read back: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the policy:\n%+v\n%s\n%+v", p, out, q)
		}
	})
}

func FuzzParseDraftPolicy(f *testing.F) {
	for _, s := range []string{`"default";q=100;w=60`, `100;w=60`, `"a";q=1;w=1, "b";q=2;w=2`, `x;q=1;w=1;qu="requests"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := ParseDraftPolicy(s)
		if err != nil {
			return
		}
		p := Policy{Version: 1, Endpoints: es}
		if p.Validate() != nil {
			return
		}
		out, err := json.Marshal(p.Normalize())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		q, err := ParsePolicyFile(out, "")
		if err != nil || !reflect.DeepEqual(q, p.Normalize()) {
			t.Fatalf("round trip of %q: %+v, %v\n%s", s, q, err, out)
		}
	})
}

// TestVendorDialectsDeclarable: --headers openai (github, shopify) is a
// valid declaration, as contract.md lists them.
func TestVendorDialectsDeclarable(t *testing.T) {
	for _, d := range []string{"openai", "github", "shopify"} {
		p := Policy{Version: PolicyVersion, Endpoints: []Endpoint{{Limit: 10, Window: time.Minute, Headers: []string{d}}}}
		if err := p.Validate(); err != nil {
			t.Errorf("--headers %s: %v", d, err)
		}
	}
}
