package limitconf

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/internal/testenv"
)

// nginxChecker returns nginx -t in a private prefix, or nil when nginx
// is not installed (a failure under CI=true, where it must be): the
// tables then compare the importer with the verdicts they record.
func nginxChecker(t testing.TB) *testenv.NginxChecker {
	t.Helper()
	if _, err := exec.LookPath("nginx"); err != nil && os.Getenv("CI") != "true" {
		if _, err := os.Stat(testenv.NginxPath); err != nil {
			return nil
		}
	}
	return testenv.NewNginxChecker(t)
}

// ourVerdict is the importer's accept or refuse of an nginx
// configuration: refused when Parse fails (no limit at all is not a
// refusal) or a limit was not read (placeholder-unset, not-interpreted
// on a directive holding a limit) — what nginx -t refuses too.
func ourVerdict(conf string, strict bool) (bool, string) {
	im, err := Parse([]byte(conf), "t.conf", Options{Format: Nginx, Strict: strict})
	if err != nil && !errors.Is(err, ErrNoLimits) {
		return false, err.Error()
	}
	if im != nil {
		if err := im.Importable(); err != nil && !errors.Is(err, ErrNoLimits) {
			return false, err.Error()
		}
	}
	return true, ""
}

func verdictWord(ok bool) string {
	if ok {
		return "accept"
	}
	return "refuse"
}

// nginxRow is one nginx construct: where it goes, and the verdict nginx
// -t gives it (recorded from nginx 1.22.1 with lua-nginx-module 0.10.23,
// and checked against the nginx -t at hand).
type nginxRow struct {
	name   string
	main   string // before events
	http   string // inside http
	lua    bool   // needs lua-nginx-module
	strict bool   // read with --strict (nginx refuses unknown directives)
	accept bool
}

const zoneZ = "limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\n"

func srv(body string) string {
	return zoneZ + "server {\n  listen 127.0.0.1:8080;\n  " + body + "\n}\n"
}

func loc(body string) string { return srv("location / {\n    " + body + "\n  }") }

var nginxRows = []nginxRow{
	// The tokenizer.
	{name: "`)` right after a single-quoted string", http: srv(`if ($http_x_bad = '1') { return 444; }`), accept: true},
	{name: "`)` right after a double-quoted regex", http: srv(`if ($uri ~* "^/(a|b)$") { return 404; }`), accept: true},
	{name: "`)` right after an empty string", http: srv(`if ($http_x = '') { return 400; }`), accept: true},
	{name: "`}` inside an unquoted word", http: srv(`set $x a}b;`), accept: true},
	{name: "`}` ending an unquoted word", http: srv(`set $x a};`), accept: true},
	{name: "`${` does not end a word", http: srv(`set $x ${uri}x;`), accept: true},
	{name: "`#` inside a word", http: srv(`set $x a#b;`), accept: true},
	{name: "comment after a statement", http: srv("set $x a; # } {\n"), accept: true},
	{name: "escaped quote in a string", http: srv(`set $x "a\"b";`), accept: true},
	{name: "escaped `;` in a word", http: srv(`set $x a\;b;`), accept: true},
	{name: "quoted directive name", http: srv(`"set" $x 'v';`), accept: true},
	{name: "CRLF line ends", http: srv("set $x a;\r\n  set $y b;\r\n"), accept: true},
	{name: "a letter right after a quote", http: srv(`set $x "a"b;`), accept: false},
	{name: "`}` right after a quote", http: srv(`set $x "a"}`), accept: false},
	{name: "an unterminated string", http: srv(`set $x "abc;`), accept: false},
	{name: "a missing `;`", http: srv("set $x a\n"), accept: false},
	{name: "a lone `;`", http: srv(";"), accept: false},
	{name: "a `}` too many", http: srv("") + "}\n", accept: false},
	{name: "`{` inside a map", http: "map $http_x $y { default {; }\n", accept: false},
	{name: "a quoted type in types", http: "types { \"text/x-a\" xa; 'text/x-b' xb; }\n", accept: true},
	// Directives nginx does not know.
	{name: "unknown directive (--strict)", http: srv("foo_bar on;"), strict: true, accept: false},
	{name: "templated `${FLAG} limit_req`", http: loc("${FLAG} limit_req zone=z;"), accept: false},
	// What nginx refuses about limits.
	{name: "limit_req_zone outside http", main: zoneZ, http: "", accept: false},
	{name: "limit_req_zone inside server", http: "server { listen 127.0.0.1:8080; " + zoneZ + "}\n", accept: false},
	{name: "limit_req inside if", http: loc("if ($http_x) { limit_req zone=z; }"), accept: false},
	{name: "limit_req inside server-level if", http: srv("if ($http_x) { limit_req zone=z; }"), accept: false},
	{name: "zone defined twice", http: zoneZ + srv(""), accept: false},
	{name: "zone defined twice, another size", http: "limit_req_zone $uri zone=z:2m rate=1r/s;\n" + srv(""), accept: false},
	{name: "burst=0", http: loc("limit_req zone=z burst=0;"), accept: false},
	{name: "burst=-1", http: loc("limit_req zone=z burst=-1;"), accept: false},
	{name: "delay=0", http: loc("limit_req zone=z burst=5 delay=0;"), accept: false},
	{name: "nodelay and delay= together", http: loc("limit_req zone=z nodelay delay=2;"), accept: true},
	{name: "limit_req with 4 parameters", http: loc("limit_req zone=z burst=5 delay=2 nodelay;"), accept: false},
	{name: "limit_req without zone", http: loc("limit_req burst=5;"), accept: false},
	{name: "limit_req on an undefined zone", http: loc("limit_req zone=nope;"), accept: false},
	{name: "the same zone twice on one level", http: loc("limit_req zone=z; limit_req zone=z burst=2;"), accept: false},
	{name: "rate=0r/s", http: strings.Replace(srv(""), "1r/s", "0r/s", 1), accept: false},
	{name: "rate=5 (per second)", http: strings.Replace(loc("limit_req zone=z;"), "1r/s", "5", 1), accept: true},
	{name: "rate=1r/m", http: strings.Replace(loc("limit_req zone=z;"), "1r/s", "1r/m", 1), accept: true},
	{name: "rate=5r/h", http: strings.Replace(srv(""), "1r/s", "5r/h", 1), accept: false},
	{name: "zone of 1k (too small)", http: strings.Replace(srv(""), ":1m", ":1k", 1), accept: false},
	{name: "zone of 32k", http: strings.Replace(loc("limit_req zone=z;"), ":1m", ":32k", 1), accept: true},
	{name: "zone without size", http: strings.Replace(srv(""), ":1m", "", 1), accept: false},
	{name: "limit_req_zone without zone=", http: "limit_req_zone $uri rate=1r/s rate=2r/s;\n", accept: false},
	{name: "limit_req_status 600", http: loc("limit_req zone=z; limit_req_status 600;"), accept: false},
	{name: "limit_req_status 429", http: loc("limit_req zone=z; limit_req_status 429;"), accept: true},
	{name: "limit_req_status twice", http: loc("limit_req zone=z; limit_req_status 429; limit_req_status 503;"), accept: false},
	{name: "limit_req_dry_run maybe", http: loc("limit_req zone=z; limit_req_dry_run maybe;"), accept: false},
	{name: "limit_req_dry_run ON", http: loc("limit_req zone=z; limit_req_dry_run ON;"), accept: true},
	{name: "burst=${BURST} left unset", http: loc("limit_req zone=z burst=${BURST};"), accept: false},
	{name: "rate=${RATE} left unset", http: strings.Replace(loc("limit_req zone=z;"), "1r/s", "${RATE}", 1), accept: false},
	{name: "zone size ${SIZE} left unset", http: strings.Replace(loc("limit_req zone=z;"), ":1m", ":${SIZE}", 1), accept: false},
	// Lua blocks (lua-nginx-module).
	{name: "Lua: `}` in a string", http: loc(`content_by_lua_block { ngx.say("}") }`), lua: true, accept: true},
	{name: "Lua: `}` in a long bracket", http: loc("content_by_lua_block { local s = [[ } ]] ngx.say(s) }"), lua: true, accept: true},
	{name: "Lua: `}` in a --[[ ]] comment over lines", http: loc("content_by_lua_block { --[[\n } ]] ngx.say(1) }"), lua: true, accept: true},
	{name: "Lua: level-2 long bracket", http: loc("content_by_lua_block { local a = [==[ ]] } ]==] ngx.say(a) }"), lua: true, accept: true},
	{name: "Lua: `}` in a line comment", http: loc("content_by_lua_block { -- }\n ngx.say(1) }"), lua: true, accept: true},
	{name: "Lua: nested tables", http: loc("content_by_lua_block { local t = {a = {1}} ngx.say(#t) }"), lua: true, accept: true},
	{name: "Lua: set_by_lua_block with a string", http: srv(`set_by_lua_block $v { return "}{" }`), lua: true, accept: true},
	{name: "Lua: unclosed long bracket", http: loc("content_by_lua_block { ngx.say([[ x) }"), lua: true, accept: false},
	{name: "Lua: one `}` too many", http: loc(`content_by_lua_block { ngx.say("x") } }`), lua: true, accept: false},
	{name: "Lua: a quote left open ends nothing", http: loc("content_by_lua_block { local s = \"x\n } }"), lua: true, accept: false},
}

// nginxHarness is a whole nginx.conf around a row.
func nginxHarness(loads, main, http string) string {
	return loads + main + "events {}\nhttp {\n  access_log off;\n" + http + "}\n"
}

// TestNginxAgreesWithNginxT: per nginx construct, the importer accepts
// or refuses as nginx -t does. Lua rows run with lua-nginx-module loaded
// when it is installed; else they are marked "module absent" and compare
// the importer with the recorded verdict only.
func TestNginxAgreesWithNginxT(t *testing.T) {
	nginx := nginxChecker(t)
	luaLoads, luaOK := "", false
	if nginx != nil {
		luaLoads, luaOK = testenv.NginxLuaModules(t)
	}
	agree, ran := 0, 0
	for _, row := range nginxRows {
		conf := nginxHarness("", row.main, row.http)
		ours, why := ourVerdict(conf, row.strict)
		if ours != row.accept {
			t.Errorf("%s: we %s (%s), nginx -t %ss\n%s", row.name, verdictWord(ours), why, verdictWord(row.accept), conf)
		}
		theirs := "not run"
		switch {
		case nginx == nil:
			theirs = "nginx absent"
		case row.lua && !luaOK:
			theirs = "module absent"
		default:
			ok, out := nginx.Check(t, nginxHarness(map[bool]string{true: luaLoads}[row.lua], row.main, row.http))
			theirs = verdictWord(ok)
			ran++
			if ok != ours {
				t.Errorf("%s: we %s (%s), nginx -t %ss: %s\n%s", row.name, verdictWord(ours), why, verdictWord(ok), out, conf)
			} else {
				agree++
			}
			if ok != row.accept {
				t.Errorf("%s: the recorded verdict is %s, nginx -t %ss: %s", row.name, verdictWord(row.accept), verdictWord(ok), out)
			}
		}
		t.Logf("%-48s nginx -t: %-13s ours: %s", row.name, theirs, verdictWord(ours))
	}
	t.Logf("%d rows, %d run through nginx -t, %d agree", len(nginxRows), ran, agree)
}

// TestNginxRowsRead: what the accepted rows read — rates truncated as
// nginx truncates them.
func TestNginxRowsRead(t *testing.T) {
	read := func(http string) *Import {
		t.Helper()
		im, err := Parse([]byte(nginxHarness("", "", http)), "t.conf", Options{Format: Nginx})
		if err != nil {
			t.Fatal(err)
		}
		return im
	}
	im := read(strings.Replace(loc("limit_req zone=z;"), "1r/s", "1r/m", 1))
	if r := im.Rules[0]; r.Rate != 0.016 || r.Endpoint.Rate != 0.016 || !strings.Contains(strings.Join(r.Notes, " "), "one request every 62.5 s") {
		t.Errorf("1r/m: rate %v, policy %v, notes %q; want 0.016/s (one per 62.5 s)", r.Rate, r.Endpoint.Rate, r.Notes)
	}
	if r := read(strings.Replace(loc("limit_req zone=z;"), "1r/s", "30r/m", 1)).Rules[0]; r.Rate != 0.5 {
		t.Errorf("30r/m: rate %v, want 0.5", r.Rate)
	}
	if r := read(strings.Replace(loc("limit_req zone=z;"), "1r/s", "5", 1)).Rules[0]; r.Rate != 5 {
		t.Errorf("rate=5: %v, want 5/s", r.Rate)
	}
	if r := read(loc("limit_req zone=z burst=5 delay=2;")).Rules[0]; r.Family != LeakyBucketQueue || r.Undelayed != 3 || r.Capacity != 6 {
		t.Errorf("burst=5 delay=2: %s undelayed %d capacity %d, want a queue, 3 at once, capacity 6", r.Family, r.Undelayed, r.Capacity)
	}
}
