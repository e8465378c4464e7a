package limitconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/verify"
)

// findingsOf lists an import's findings as "id certainty line" strings.
func findingsOf(im *Import) []string {
	var out []string
	for _, f := range im.Findings {
		out = append(out, f.ID+" "+string(f.Certainty)+" "+f.Source.String())
	}
	return out
}

func hasFinding(im *Import, id string, cert verify.Certainty, line int) bool {
	for _, f := range im.Findings {
		if f.ID == id && f.Certainty == cert && f.Source.Line == line {
			return true
		}
	}
	return false
}

func mustParse(t *testing.T, conf string, o Options) *Import {
	t.Helper()
	if o.Format == "" {
		o.Format = Nginx
	}
	im, err := Parse([]byte(conf), "t.conf", o)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, conf)
	}
	return im
}

// TestUnknownDirectives: an unknown directive is skipped with a warning
// and its block read as part of the enclosing one; one holding a limit
// directive is an error (the limit was not read); --strict refuses any.
func TestUnknownDirectives(t *testing.T) {
	conf := zoneZ + "server {\n  my_module on;\n  my_block x {\n    location = /a { limit_req zone=z; }\n  }\n" +
		"  location = /b {\n    ${FLAG} limit_req zone=z;\n    more_set_headers 'X: y';\n  }\n}\n"
	im := mustParse(t, conf, Options{})
	if !hasFinding(im, IDNotInterpreted, verify.Certain, 3) || !hasFinding(im, IDNotInterpreted, verify.Certain, 4) {
		t.Errorf("unknown directives not reported: %v", findingsOf(im))
	}
	if len(im.Rules) != 1 || im.Rules[0].Path != "/a" {
		t.Errorf("the limit inside the unknown block should be read: %+v", im.Rules)
	}
	var templ *Finding
	for i, f := range im.Findings {
		if f.Source.Line == 8 {
			templ = &im.Findings[i]
		}
	}
	if templ == nil || templ.Severity != verify.SeverityError || !strings.Contains(templ.Message, "this limit was not read") || !strings.Contains(templ.Hint, "--set FLAG=") {
		t.Errorf("${FLAG} limit_req: %+v", templ)
	}
	if hasFinding(im, IDNotInterpreted, verify.Certain, 9) {
		t.Errorf("more_set_headers is a known module's directive: %v", findingsOf(im))
	}
	if err := im.Importable(); err == nil || !strings.Contains(err.Error(), "1 limit was not read") {
		t.Errorf("Importable = %v", err)
	}
	// --set FLAG='#' comments the limit out (as envsubst would); FLAG=''
	// keeps it.
	if im := mustParse(t, conf, Options{Vars: map[string]string{"FLAG": "#"}}); len(im.Rules) != 1 || im.Importable() != nil {
		t.Errorf("FLAG=#: rules %d, %v", len(im.Rules), im.Importable())
	}
	if im := mustParse(t, conf, Options{Vars: map[string]string{"FLAG": ""}}); len(im.Rules) != 2 {
		t.Errorf("FLAG='': %d rules, want 2", len(im.Rules))
	}
	if _, err := Parse([]byte(conf), "t.conf", Options{Format: Nginx, Strict: true}); err == nil || !strings.Contains(err.Error(), `t.conf:3: unknown directive "my_module"`) {
		t.Errorf("--strict: %v", err)
	}
}

// TestTemplates: only the names given are substituted, $NAME and
// ${NAME}; nginx variables stay; a placeholder left in a number is
// placeholder-unset, naming --set.
func TestTemplates(t *testing.T) {
	conf := "limit_req_zone $binary_remote_addr zone=z:${SIZE} rate=${RATE};\nserver { location = /a { limit_req zone=z burst=$BURST; } }\n"
	im := mustParse(t, conf, Options{})
	if len(im.Rules) != 0 || !hasFinding(im, IDPlaceholderUnset, verify.Certain, 1) || !hasFinding(im, IDPlaceholderUnset, verify.Certain, 2) {
		t.Fatalf("unset: rules %+v findings %v", im.Rules, findingsOf(im))
	}
	for _, f := range im.Findings {
		if f.ID == IDPlaceholderUnset && (f.Severity != verify.SeverityError || !strings.Contains(f.Hint, "--set ")) {
			t.Errorf("placeholder-unset: %+v", f)
		}
	}
	if !im.Fails(verify.SeverityError) || im.Importable() == nil {
		t.Errorf("an unset placeholder fails lint and import")
	}
	im = mustParse(t, conf, Options{Vars: map[string]string{"SIZE": "10m", "RATE": "30r/m", "BURST": "4", "remote_addr": "no"}})
	if len(im.Rules) != 1 || im.Rules[0].Rate != 0.5 || im.Rules[0].Capacity != 5 || im.Rules[0].KeyExpr != "$binary_remote_addr" {
		t.Errorf("substituted: %+v", im.Rules)
	}
	vars, err := ParseVars([]string{"B=2", "C='x y'"}, []string{"a.env"}, func(string) ([]byte, error) {
		return []byte("# comment\nexport A=1\nB=1\n\n"), nil
	})
	if err != nil || vars["A"] != "1" || vars["B"] != "2" || vars["C"] != "x y" {
		t.Errorf("ParseVars = %v, %v", vars, err)
	}
	for _, bad := range []string{"=1", "A B=1", "nope"} {
		if _, err := ParseVars([]string{bad}, nil, nil); err == nil {
			t.Errorf("--set %q accepted", bad)
		}
	}
	// Envoy, Traefik and Kong: a placeholder in a number.
	for _, c := range []struct {
		format Format
		conf   string
		line   int
	}{
		{Envoy, "token_bucket:\n  max_tokens: ${MAX}\n  fill_interval: 1s\n", 2},
		{Envoy, "token_bucket:\n  max_tokens: 5\n  fill_interval: ${FILL}\n", 3},
		{Traefik, "http:\n  middlewares:\n    m:\n      rateLimit:\n        average: $AVG\n", 5},
		{Kong, "plugins:\n- name: rate-limiting\n  config:\n    second: 5\n    minute: ${PER_MINUTE}\n", 5},
	} {
		im := mustParse(t, c.conf, Options{Format: c.format})
		if !hasFinding(im, IDPlaceholderUnset, verify.Certain, c.line) || im.Importable() == nil {
			t.Errorf("%s %q: %v", c.format, c.conf, findingsOf(im))
		}
	}
}

// TestIncludesMissing: every include that cannot be read is
// include-missing and the rest is read; --strict-includes lists them all
// in one error; --root reads absolute includes under a directory.
func TestIncludesMissing(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "root", "etc", "nginx"), 0o755)
	os.WriteFile(filepath.Join(dir, "root", "etc", "nginx", "zones.conf"), []byte(zoneZ), 0o644)
	main := []byte("http {\n  include /etc/nginx/zones.conf;\n  include nope.conf;\n  include conf.d/*.conf;\n  include /nowhere/x.conf;\n" +
		"  server { location = /x { limit_req zone=z; } }\n}\n")
	path := filepath.Join(dir, "nginx.conf")
	os.WriteFile(path, main, 0o644)
	im, err := ParseFile(path, Options{Root: filepath.Join(dir, "root")})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Rules) != 1 || !hasFinding(im, IDIncludeMissing, verify.Certain, 3) || !hasFinding(im, IDIncludeMissing, verify.Certain, 5) || hasFinding(im, IDIncludeMissing, verify.Certain, 4) {
		t.Errorf("rules %d, findings %v", len(im.Rules), findingsOf(im))
	}
	if im.Fails(verify.SeverityError) || !im.Fails(verify.SeverityWarning) {
		t.Errorf("include-missing is a certain warning")
	}
	_, err = ParseFile(path, Options{Root: filepath.Join(dir, "root"), StrictIncludes: true})
	if err == nil || !strings.Contains(err.Error(), "2 includes cannot be read") || !strings.Contains(err.Error(), "nope.conf") || !strings.Contains(err.Error(), "/nowhere/x.conf") {
		t.Errorf("--strict-includes: %v", err)
	}
	// Without --root the zone is not read: limit_req names an unknown
	// zone, and the message says which includes were missing.
	if _, err := ParseFile(path, Options{}); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("without --root: %v", err)
	}
}

// TestServerBlocks: findings belong to their server block — two servers
// named "_" with the same location keep their own — and every
// server-level answer in front of a limit is flagged, certain when it
// answers every request.
func TestServerBlocks(t *testing.T) {
	conf := zoneZ +
		"server {\n  listen 8081;\n  server_name _;\n  return 444;\n  location = /a { limit_req zone=z; }\n}\n" +
		"server {\n  listen 8082;\n  server_name _;\n  if ($http_x_bad) { return 403; }\n  if ($scheme = http) { rewrite ^ https://$host$request_uri permanent; }\n" +
		"  rewrite ^/old/(.*)$ /new/$1 permanent;\n  rewrite ^(.*)$ https://example.com$1;\n  location = /a { limit_req zone=z; }\n}\n" +
		"server {\n  listen 8083;\n  server_name b.example;\n  location = /a { limit_req zone=z; proxy_pass http://u; }\n}\n"
	im := mustParse(t, conf, Options{})
	want := map[int]verify.Certainty{5: verify.Certain, 11: verify.Possible, 12: verify.Possible, 13: verify.Possible, 14: verify.Certain}
	n := 0
	for _, f := range im.Findings {
		if f.ID != verify.IDConfigNotEnforced {
			continue
		}
		n++
		if c, ok := want[f.Source.Line]; !ok || c != f.Certainty {
			t.Errorf("unexpected %s %s at line %d: %s", f.ID, f.Certainty, f.Source.Line, f.Message)
		}
	}
	if n != len(want) {
		t.Errorf("%d config-not-enforced, want %d: %v", n, len(want), findingsOf(im))
	}
	// The first server's return is the first server's.
	var b strings.Builder
	WritePolicy(&b, im)
	if strings.Count(b.String(), "lint config-not-enforced") != 5 {
		t.Errorf("the policy file should carry each server's findings on its own rule:\n%s", b.String())
	}
	im = mustParse(t, conf, Options{Server: "b.example"})
	if len(im.Rules) != 1 || im.Fails(verify.SeverityInfo) && hasFinding(im, verify.IDConfigNotEnforced, verify.Certain, 5) {
		t.Errorf("--server b.example: rules %+v findings %v", im.Rules, findingsOf(im))
	}
	for _, f := range im.Findings {
		if f.ID == verify.IDConfigNotEnforced {
			t.Errorf("--server b.example reports another server's finding: %s", f.Message)
		}
	}
	if im := mustParse(t, conf, Options{Server: "_"}); len(im.Rules) != 2 || len(im.Findings) < 5 {
		t.Errorf("--server _ keeps both servers named _: %d rules, %v", len(im.Rules), findingsOf(im))
	}
}

// TestZonesUnused: zones without limit_req lint with zone-unused and
// import nothing, naming them.
func TestZonesUnused(t *testing.T) {
	im := mustParse(t, zoneZ+"limit_req_zone $uri zone=y:1m rate=2r/s;\nserver { location / { return 200; } }\n", Options{})
	if len(im.Rules) != 0 || !hasFinding(im, IDZoneUnused, verify.Certain, 1) || !hasFinding(im, IDZoneUnused, verify.Certain, 2) || im.Fails(verify.SeverityError) {
		t.Errorf("findings %v", findingsOf(im))
	}
	err := im.Importable()
	if !errors.Is(err, ErrNoLimits) || !strings.Contains(err.Error(), "nothing to import") || !strings.Contains(err.Error(), "zone z, y") {
		t.Errorf("Importable = %v", err)
	}
	if _, err := Parse([]byte("server { location / { return 200; } }\n"), "t.conf", Options{Format: Nginx}); !errors.Is(err, ErrNoLimits) {
		t.Errorf("no zone at all: %v", err)
	}
}

// TestEnvoyReads: camelCase fields, an Istio EnvoyFilter inserting the
// filter by patch, capacity max_tokens with its refill and the checked
// bound beside it, max_tokens 0 refused as Envoy refuses it.
func TestEnvoyReads(t *testing.T) {
	camel := "tokenBucket:\n  maxTokens: 10\n  tokensPerFill: 5\n  fillInterval: 1s\nfilterEnabled: {defaultValue: {numerator: 100}}\nfilterEnforced: {defaultValue: {numerator: 100}}\n"
	im := mustParse(t, camel, Options{Format: Envoy})
	r := im.Rules[0]
	if r.Capacity != 10 || r.RefillTokens != 5 || r.Rate != 5 || r.Endpoint.Quota() != 15 || len(im.Findings) != 0 {
		t.Errorf("camelCase: %+v %v", r, findingsOf(im))
	}
	if d := r.Describe(); !strings.Contains(d, "capacity 10, refill 5 every 1s") || !strings.Contains(d, "checked against 15: a fill may land inside a burst") {
		t.Errorf("Describe = %q", d)
	}
	if _, err := Parse([]byte(strings.Replace(camel, "maxTokens: 10", "maxTokens: 0", 1)), "e.yaml", Options{Format: Envoy}); err == nil ||
		!strings.Contains(err.Error(), "as Envoy refuses it (max_tokens must be > 0)") {
		t.Errorf("max_tokens 0: %v", err)
	}
	data, err := os.ReadFile("testdata/realistic/istio-local-ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	im = mustParse(t, string(data), Options{Format: Envoy})
	for _, f := range im.Findings {
		if f.ID == verify.IDConfigNotEnforced && f.Certainty == verify.Certain {
			t.Errorf("Istio's patch inserts the filter: %s", f.Message)
		}
	}
}

// TestCondText: an if's condition is written back as a config writes it.
func TestCondText(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"($request_method", "=", "OPTIONS", ")"}, "($request_method = OPTIONS)"},
		{[]string{"($http_x", "=", "", ")"}, "($http_x = '')"},
		{[]string{"($http_x", "~*", "a b", ")"}, "($http_x ~* 'a b')"},
		{[]string{"($bad)"}, "($bad)"},
	} {
		if got := condText(tt.args); got != tt.want {
			t.Errorf("condText(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
