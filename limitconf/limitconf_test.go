package limitconf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/verify"
)

func parseFixture(t *testing.T, name string, o Options) *Import {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	im, err := Parse(data, name, o)
	if err != nil {
		t.Fatalf("Parse(%s) = %v", name, err)
	}
	return im
}

// want is what one rule must say.
type want struct {
	line     int // the source line of the rule
	location string
	path     string
	family   Family
	rate     float64 // the config's rate (buckets)
	capacity int64   // the config's capacity
	limit    int64
	window   time.Duration
	key      string
	status   int
	binding  bool
	// the policy rule checked: its rate and capacity (buckets) or limit
	// and window (windows)
	epRate     float64
	epCapacity int64
}

func rule(t *testing.T, im *Import, line int) *Rule {
	t.Helper()
	for i := range im.Rules {
		if im.Rules[i].Source.Line == line {
			return &im.Rules[i]
		}
	}
	t.Fatalf("no rule from line %d; rules: %+v", line, im.Rules)
	return nil
}

func checkRule(t *testing.T, im *Import, w want) {
	t.Helper()
	r := rule(t, im, w.line)
	ep := r.Endpoint
	if r.Location != w.location || r.Path != w.path || r.Family != w.family || r.Key != w.key || r.Status != w.status || r.Binding != w.binding {
		t.Errorf("line %d: location %q path %q family %s key %s status %d binding %v; want %q %q %s %s %d %v",
			w.line, r.Location, r.Path, r.Family, r.Key, r.Status, r.Binding, w.location, w.path, w.family, w.key, w.status, w.binding)
	}
	switch w.family {
	case FixedWindow:
		if r.Limit != w.limit || r.Window != w.window {
			t.Errorf("line %d: %d per %s, want %d per %s", w.line, r.Limit, r.Window, w.limit, w.window)
		}
	default:
		if r.Rate != w.rate || r.Capacity != w.capacity {
			t.Errorf("line %d: rate %v capacity %d, want %v %d", w.line, r.Rate, r.Capacity, w.rate, w.capacity)
		}
	}
	if w.epRate != 0 {
		if !ep.IsBucket() || ep.Rate != w.epRate || ep.Quota() != w.epCapacity {
			t.Errorf("line %d: policy %s, want rate %v capacity %d", w.line, ep.String(), w.epRate, w.epCapacity)
		}
	} else if ep.IsBucket() || ep.Limit != w.limit || ep.Window != w.window || ep.WindowType != verify.Fixed || ep.Align != AlignEpoch {
		t.Errorf("line %d: policy %s, want %d per %s fixed epoch", w.line, ep.String(), w.limit, w.window)
	}
	if k := verifyKey(w.key); ep.Key != k {
		t.Errorf("line %d: policy key %q, want %q", w.line, ep.Key, k)
	}
}

// TestMappingTable holds one case per row of the package doc's table.
func TestMappingTable(t *testing.T) {
	nginxDocs := parseFixture(t, "nginx-docs.conf", Options{})
	envoy := parseFixture(t, "envoy.yaml", Options{})
	envoyRoute := parseFixture(t, "envoy-route.yaml", Options{})
	traefikYAML := parseFixture(t, "traefik.yaml", Options{})
	traefikTOML := parseFixture(t, "traefik.toml", Options{})
	traefikCRD := parseFixture(t, "traefik-crd.yaml", Options{})
	kong := parseFixture(t, "kong.yaml", Options{})
	example := parseExample(t)
	tests := []struct {
		row string
		im  *Import
		w   want
	}{
		{"nginx burst nodelay → token-bucket, capacity burst+1", example,
			want{line: 62, location: "= /", path: "/", family: TokenBucket, rate: 1, capacity: 4, key: "ip", status: 503, epRate: 1, epCapacity: 4}},
		{"nginx burst without nodelay → leaky-bucket-queue", example,
			want{line: 79, location: "= /queue", path: "/queue", family: LeakyBucketQueue, rate: 1, capacity: 4, key: "ip", status: 503, epRate: 1, epCapacity: 4}},
		{"nginx delay < burst → leaky-bucket-queue", example,
			want{line: 86, location: "= /delay", path: "/delay", family: LeakyBucketQueue, rate: 1, capacity: 4, key: "ip", status: 503, epRate: 1, epCapacity: 4}},
		{"nginx limit_req_status", example,
			want{line: 93, location: "= /429", path: "/429", family: TokenBucket, rate: 1, capacity: 4, key: "ip", status: 429, epRate: 1, epCapacity: 4}},
		{"nginx several limit_req: the smaller capacity binds", nginxDocs,
			want{line: 19, location: "= /login", path: "/login", family: TokenBucket, rate: 1, capacity: 6, key: "ip", status: 429, binding: true, epRate: 1, epCapacity: 6}},
		{"nginx several limit_req: the other applies too; $server_name → global", nginxDocs,
			want{line: 20, location: "= /login", path: "/login", family: LeakyBucketQueue, rate: 10, capacity: 11, key: "global", status: 429, epRate: 10, epCapacity: 11}},
		{"nginx own limit_req replaces inherited; regex location has no path", nginxDocs,
			want{line: 33, location: "~ ^/items/[0-9]+$", family: LeakyBucketQueue, rate: 5, capacity: 3, key: KeyUnknown, status: 429, epRate: 5, epCapacity: 3}},
		{"nginx http-level inherited; $http_x_api_key → header; r/m", nginxDocs,
			want{line: 11, location: "/", path: "/", family: TokenBucket, rate: 0.5, capacity: 21, key: "header:X-Api-Key", status: 429, epRate: 0.5, epCapacity: 21}},
		{"nginx prefix location shadowed by a regex location: no path", nginxDocs,
			want{line: 23, location: "/search/", family: LeakyBucketQueue, rate: 1, capacity: 6, key: "ip", status: 429, epRate: 1, epCapacity: 6}},
		{"Envoy tokens_per_fill < max_tokens → bucket, bounded", envoy,
			want{line: 27, location: "(every route)", path: "/", family: TokenBucket, rate: 1000, capacity: 10000, key: "global", status: 429, epRate: 1000, epCapacity: 11000}},
		{"Envoy tokens_per_fill ≥ max_tokens → fixed window on the timer; status code", envoyRoute,
			want{line: 16, location: "path /login", path: "/login", family: FixedWindow, limit: 5, window: time.Minute, key: "global", status: 503, epRate: 5.0 / 60, epCapacity: 10}},
		{"Envoy {seconds} duration, prefix route", envoyRoute,
			want{line: 31, location: "prefix /api/", family: TokenBucket, rate: 2, capacity: 20, key: "global", status: 429, epRate: 2, epCapacity: 22}},
		{"Traefik average/burst, default period → bucket, capacity burst", traefikYAML,
			want{line: 19, location: "Host(`example.com`) && PathPrefix(`/api`)", family: TokenBucket, rate: 100, capacity: 200, key: "ip", status: 429, epRate: 100, epCapacity: 200}},
		{"Traefik period 1m, requestHeaderName", traefikYAML,
			want{line: 24, location: "Path(`/login`)", path: "/login", family: TokenBucket, rate: 0.1, capacity: 3, key: "header:X-Api-Key", status: 429, epRate: 0.1, epCapacity: 3}},
		{"Traefik TOML, same as YAML", traefikTOML,
			want{line: 20, location: "Path(`/login`)", path: "/login", family: TokenBucket, rate: 0.1, capacity: 3, key: "header:X-Api-Key", status: 429, epRate: 0.1, epCapacity: 3}},
		{"Traefik CRD, ipStrategy → ip", traefikCRD,
			want{line: 9, location: "Path(`/orders`)", path: "/orders", family: TokenBucket, rate: 0.1, capacity: 100, key: "ip", status: 429, epRate: 0.1, epCapacity: 100}},
		{"Kong second: fixed, epoch-aligned; the smaller binds", kong,
			want{line: 10, location: "orders-list /orders", path: "/orders", family: FixedWindow, limit: 5, window: time.Second, key: "ip", status: 429, binding: true}},
		{"Kong hour applies too", kong,
			want{line: 11, location: "orders-list /orders", path: "/orders", family: FixedWindow, limit: 1000, window: time.Hour, key: "ip", status: 429}},
		{"Kong route plugin overrides the service's; header; error_code", kong,
			want{line: 21, location: "orders-export /export", path: "/export", family: FixedWindow, limit: 10, window: time.Minute, key: "header:X-Api-Key", status: 503, binding: true}},
		{"Kong day", kong,
			want{line: 22, location: "orders-export /export", path: "/export", family: FixedWindow, limit: 500, window: 24 * time.Hour, key: "header:X-Api-Key", status: 503}},
		{"Kong global plugin, limit_by ip", kong,
			want{line: 30, location: "status /status", path: "/status", family: FixedWindow, limit: 100, window: time.Minute, key: "ip", status: 429}},
	}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) { checkRule(t, tt.im, tt.w) })
	}
	// Kong: month is not imported; service-level rules do not reach a
	// route with its own plugin.
	for _, r := range kong.Rules {
		if r.Location == "orders-export /export" && r.Limit == 5 {
			t.Errorf("the service's plugin applied to a route with its own: %+v", r)
		}
	}
}

func parseExample(t *testing.T) *Import {
	t.Helper()
	data, err := os.ReadFile("../examples/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	im, err := Parse(data, "examples/nginx.conf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// lineOf returns the 1-based line of the first line of data containing s.
func lineOf(t *testing.T, data, s string) int {
	t.Helper()
	for i, l := range strings.Split(data, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not found", s)
	return 0
}

// TestExampleNginx: every location of examples/nginx.conf imports as the
// README's variants table says, and lint flags /trap (and only it) at its
// return line.
func TestExampleNginx(t *testing.T) {
	im := parseExample(t)
	raw, _ := os.ReadFile("../examples/nginx.conf")
	conf := string(raw)
	// README: "/" burst=3 nodelay; "/trap" the same; "/queue" burst=3;
	// "/delay" burst=3 delay=2; "/429" status 429; "/retry-after" 503.
	type row struct {
		path      string
		family    Family
		undelayed int64
		status    int
	}
	rows := []row{
		{"/", TokenBucket, 0, 503}, {"/trap", TokenBucket, 0, 503}, {"/queue", LeakyBucketQueue, 1, 503},
		{"/delay", LeakyBucketQueue, 3, 503}, {"/429", TokenBucket, 0, 429}, {"/retry-after", TokenBucket, 0, 503},
	}
	if len(im.Rules) != len(rows) {
		t.Fatalf("%d rules, want %d (one per location, none for @ok and @limited): %+v", len(im.Rules), len(rows), im.Rules)
	}
	for i, w := range rows {
		r := im.Rules[i]
		if r.Path != w.path || r.Family != w.family || r.Undelayed != w.undelayed || r.Status != w.status ||
			r.Rate != 1 || r.Capacity != 4 || r.Key != verify.KeyIP {
			t.Errorf("rule %d = %s %s (%s) status %d; want %s %s undelayed %d status %d, rate 1/s, capacity 4, key ip",
				i, r.Path, r.Describe(), r.Family, r.Status, w.path, w.family, w.undelayed, w.status)
		}
		if want := lineOf(t, conf, "location = "+w.path+" {") + 1; r.Source.Line != want {
			t.Errorf("%s: source line %d, want %d (its limit_req)", w.path, r.Source.Line, want)
		}
	}
	var notEnforced []Finding
	for _, f := range im.Findings {
		if f.ID == verify.IDConfigNotEnforced {
			notEnforced = append(notEnforced, f)
		}
	}
	trapReturn := lineOf(t, conf, `return 200 "ok\n";`) // the first return: /trap's
	if len(notEnforced) != 1 || notEnforced[0].Source.Line != trapReturn || notEnforced[0].Certainty != verify.Certain ||
		notEnforced[0].Endpoint != "= /trap" || notEnforced[0].Severity != verify.SeverityError {
		t.Fatalf("config-not-enforced findings = %+v, want one, certain, on = /trap at line %d", notEnforced, trapReturn)
	}
	if !strings.Contains(notEnforced[0].Message, "examples/nginx.conf:73") || !im.Fails(verify.SeverityError) {
		t.Errorf("message %q should name the line; Fails = %v", notEnforced[0].Message, im.Fails(verify.SeverityError))
	}
	for _, f := range im.Findings {
		if f.Certainty == verify.Certain && f.Severity == verify.SeverityError && f.ID != verify.IDConfigNotEnforced {
			t.Errorf("unexpected certain error %+v", f)
		}
	}
}

// TestWritePolicyRoundTrip: the written policy file reads back (verify's
// own reader) to the rules' endpoints, and names its source lines.
func TestWritePolicyRoundTrip(t *testing.T) {
	for _, name := range []string{"nginx-docs.conf", "envoy.yaml", "envoy-route.yaml", "traefik.yaml", "traefik.toml", "traefik-crd.yaml", "kong.yaml", "example"} {
		var im *Import
		if name == "example" {
			im = parseExample(t)
		} else {
			im = parseFixture(t, name, Options{})
		}
		var b bytes.Buffer
		if err := WritePolicy(&b, im); err != nil {
			t.Fatal(err)
		}
		p, err := verify.ParsePolicyFile(b.Bytes(), name+".policy.yaml")
		if err != nil {
			t.Fatalf("%s: the written policy does not read back: %v\n%s", name, err, b.String())
		}
		var want []verify.Endpoint
		for _, r := range im.Rules {
			if r.Endpoint.Path != "" {
				want = append(want, r.Endpoint)
			}
		}
		wantP := verify.Policy{Version: 1, Endpoints: want}.Normalize()
		if len(p.Endpoints) != len(wantP.Endpoints) {
			t.Fatalf("%s: %d endpoints read back, want %d\n%s", name, len(p.Endpoints), len(wantP.Endpoints), b.String())
		}
		for i := range p.Endpoints {
			if g, w := p.Endpoints[i].String()+p.Endpoints[i].Key, wantP.Endpoints[i].String()+wantP.Endpoints[i].Key; g != w ||
				p.Endpoints[i].Rate != wantP.Endpoints[i].Rate || p.Endpoints[i].Status != wantP.Endpoints[i].Status {
				t.Errorf("%s: endpoint %d reads back as %s, want %s", name, i, g, w)
			}
		}
		for _, r := range im.Rules {
			if !strings.Contains(b.String(), "# "+r.Source.String()+":") {
				t.Errorf("%s: the policy does not name %s", name, r.Source)
			}
		}
	}
}

// TestFilters: --server and --location keep what they name.
func TestFilters(t *testing.T) {
	im := parseFixture(t, "nginx-docs.conf", Options{Server: "other.example.com"})
	if len(im.Rules) != 1 || im.Rules[0].Location != "/" {
		t.Errorf("--server other.example.com kept %+v", im.Rules)
	}
	im = parseFixture(t, "nginx-docs.conf", Options{Location: "/login"})
	if len(im.Rules) != 2 {
		t.Errorf("--location /login kept %d rules, want its 2", len(im.Rules))
	}
	data, _ := os.ReadFile("testdata/nginx-docs.conf")
	if _, err := Parse(data, "x.conf", Options{Location: "/nowhere"}); !errors.Is(err, ErrNoLimits) {
		t.Errorf("--location /nowhere: %v, want ErrNoLimits", err)
	}
}

// TestLint: each static finding of the package doc, from its fixture.
func TestLint(t *testing.T) {
	has := func(im *Import, id string, line int, c verify.Certainty) bool {
		for _, f := range im.Findings {
			if f.ID == id && f.Source.Line == line && f.Certainty == c {
				return true
			}
		}
		return false
	}
	tests := []struct {
		name, file string
		id         string
		line       int
		cert       verify.Certainty
	}{
		{"dry run", "nginx-docs.conf", verify.IDConfigNotEnforced, 34, verify.Certain},
		{"rewrite ^ … permanent: every request", "nginx-docs.conf", verify.IDConfigNotEnforced, 39, verify.Certain},
		{"return under if", "nginx-docs.conf", verify.IDConfigNotEnforced, 50, verify.Possible},
		{"unused zone", "nginx-docs.conf", IDZoneUnused, 8, verify.Certain},
		{"burst without nodelay on a proxied location", "nginx-docs.conf", IDQueueingLatency, 23, verify.Certain},
		{"client address without realip", "nginx-docs.conf", IDKeyBehindProxy, 3, verify.Possible},
		{"unknown key", "nginx-docs.conf", IDKeyUnknown, 7, verify.Certain},
		{"regex location", "nginx-docs.conf", IDLimitUntestable, 33, verify.Certain},
		{"Envoy filter_enforced absent", "envoy-route.yaml", verify.IDConfigNotEnforced, 31, verify.Certain},
		{"Traefik average 0", "traefik.yaml", verify.IDConfigNotEnforced, 29, verify.Certain},
		{"Traefik TOML average 0", "traefik.toml", verify.IDConfigNotEnforced, 24, verify.Certain},
		{"Kong month", "kong.yaml", IDNotInterpreted, 23, verify.Certain},
	}
	for _, tt := range tests {
		im := parseFixture(t, tt.file, Options{})
		if !has(im, tt.id, tt.line, tt.cert) {
			t.Errorf("%s: no %s (%s) at %s:%d; findings: %+v", tt.name, tt.id, tt.cert, tt.file, tt.line, im.Findings)
		}
	}
	// A server-level return answers before any location.
	im, err := Parse([]byte("limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\nserver {\n  return 200;\n  location = /a { limit_req zone=z; }\n}\n"), "s.conf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !has(im, verify.IDConfigNotEnforced, 3, verify.Certain) {
		t.Errorf("server-level return: %+v", im.Findings)
	}
	// Envoy per-route limits without the filter in http_filters.
	im, err = Parse([]byte("virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - match: {path: /x}\n    typed_per_filter_config:\n      envoy.filters.http.local_ratelimit:\n        token_bucket: {max_tokens: 1, fill_interval: 1s}\n        filter_enabled: {default_value: {numerator: 100}}\n        filter_enforced: {default_value: {numerator: 100}}\n"), "e.yaml", Options{Format: Envoy})
	if err != nil {
		t.Fatal(err)
	}
	if !has(im, verify.IDConfigNotEnforced, 8, verify.Certain) {
		t.Errorf("per-route without the filter: %+v", im.Findings)
	}
}

// TestMalformed: errors carry the file and line, for every format.
func TestMalformed(t *testing.T) {
	tests := []struct {
		format Format
		conf   string
		line   int
		msg    string
	}{
		{Nginx, "http {\n  limit_req_zone $a zone=z:1m rate=1r/s;\n  server {\n", 4, "expecting \"}\""},
		{Nginx, "server {\n  location / {\n    limit_req zone=nope;\n  }\n}\n", 3, "unknown"},
		{Nginx, "limit_req_zone $a zone=z:1m rate=5r/h;\n", 1, "Nr/s or Nr/m"},
		{Nginx, "limit_req_zone $a zone=z:1m rate=1r/s;\nserver { location / { limit_req zone=z burst=x; } }\n", 2, "whole number"},
		{Nginx, "}\n", 1, "unexpected"},
		{Nginx, "a \"b\n", 2, "unexpected end of file"},
		{Nginx, "location / {\n  limit_req zone=z\n}\n", 3, "unexpected \"}\""},
		{Envoy, "token_bucket:\n  max_tokens: x\n  fill_interval: 1s\n", 2, "whole number"},
		{Envoy, "token_bucket:\n  max_tokens: 1\n  fill_interval: 1\n", 3, "protobuf duration"},
		{Envoy, "a: [\n", 1, "not YAML"},
		{Traefik, "http:\n  middlewares:\n    m:\n      rateLimit:\n        average: 1\n        period: forever\n", 6, "duration"},
		{Traefik, "[http.middlewares.m.rateLimit]\naverage = 1\nburst = \"x\"\n", 3, "whole number"},
		{Traefik, "[http\n", 1, "not TOML"},
		{Kong, "plugins:\n- name: rate-limiting\n  config:\n    minute: -1\n", 4, "positive"},
		{Kong, "plugins:\n- name: rate-limiting\n  config:\n    limit_by: moon\n    second: 1\n", 4, "limit_by"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.conf), "bad.cfg", Options{Format: tt.format})
		var e *problem.Error
		if !errors.As(err, &e) || len(e.Problems) != 1 || e.What != "limitconf" {
			t.Errorf("%s %q: err = %v, want a *problem.Error of limitconf with one problem", tt.format, tt.conf, err)
			continue
		}
		if p := e.Problems[0]; p.File != "bad.cfg" || p.Line != tt.line || !strings.Contains(e.Error(), tt.msg) {
			t.Errorf("%s %q: %v, want line %d and %q", tt.format, tt.conf, err, tt.line, tt.msg)
		}
	}
}

// TestNginxLexer covers quoting, escapes, ${var} braces and comments.
func TestNginxLexer(t *testing.T) {
	conf := "# c\nlimit_req_zone \"$binary_remote_addr\" zone=a:1m rate=2r/s; # trailing\n" +
		"limit_req_zone ${http_x_user}x zone=b:1m rate=1r/s;\n" +
		"server { server_name 'a.example' b.example; location = '/a;b' { limit_req zone=a; limit_req zone=b burst=1 nodelay; } }\n"
	im, err := Parse([]byte(conf), "l.conf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Rules) != 2 || im.Rules[0].Path != "/a;b" || im.Rules[0].Key != "ip" || im.Rules[0].Server != "a.example b.example" ||
		im.Rules[1].KeyExpr != "${http_x_user}x" || im.Rules[1].Key != KeyUnknown || im.Rules[0].Source.Line != 4 {
		t.Errorf("rules = %+v", im.Rules)
	}
	if !im.Rules[0].Binding {
		t.Errorf("capacity 1 at 2/s should bind over capacity 2 at 1/s")
	}
}

// TestLuaBlocks: OpenResty's *_by_lua_block bodies are Lua, braces in
// strings and comments included, and do not upset the nginx reader.
func TestLuaBlocks(t *testing.T) {
	conf := "limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\n" +
		"server {\n  set_by_lua_block $res { local s = \"}\" -- a } in a comment\n    local t = [[ { ]]\n    return 1 }\n" +
		"  location = /x {\n    limit_req zone=z;\n    content_by_lua_block { ngx.say(\"}\") }\n  }\n}\n"
	im, err := Parse([]byte(conf), "lua.conf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Rules) != 1 || im.Rules[0].Source.Line != 7 || im.Rules[0].Path != "/x" {
		t.Errorf("rules = %+v", im.Rules)
	}
	if _, err := Parse([]byte("server { content_by_lua_block { ngx.say(1)\n"), "lua.conf", Options{Format: Nginx}); err == nil || !strings.Contains(err.Error(), "lua.conf:1") {
		t.Errorf("an unclosed Lua block: %v", err)
	}
}

// TestIncludes: includes are read relative to the main file's directory
// (nginx's configuration prefix), and reported when they cannot be.
func TestIncludes(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "conf.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "conf.d", "http.conf"), []byte("include zones.conf;\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "zones.conf"), []byte("limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\n"), 0o644)
	main := []byte("http {\n  include conf.d/*.conf;\n  server { location = /x { limit_req zone=z; } }\n}\n")
	im, err := Parse(main, filepath.Join(dir, "nginx.conf"), Options{ReadFile: os.ReadFile, Glob: filepath.Glob})
	if err != nil || len(im.Rules) != 1 || im.Rules[0].ZoneAt.File != filepath.Join(dir, "zones.conf") {
		t.Fatalf("Parse with include = %+v, %v", im, err)
	}
	_, err = Parse(main, "nginx.conf", Options{})
	if err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("without reading includes the zone is unknown: %v", err)
	}
}

func TestDetectFormat(t *testing.T) {
	for name, want := range map[string]Format{"nginx-docs.conf": Nginx, "envoy.yaml": Envoy, "envoy-route.yaml": Envoy,
		"traefik.yaml": Traefik, "traefik.toml": Traefik, "traefik-crd.yaml": Traefik, "kong.yaml": Kong} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		if got, err := DetectFormat(name, data); got != want || err != nil {
			t.Errorf("DetectFormat(%s) = %s, %v; want %s", name, got, err, want)
		}
	}
}
