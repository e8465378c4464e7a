package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NginxChecker runs `nginx -t` — nginx's own verdict on a configuration,
// nothing bound, nothing started — in a private prefix under the test's
// temporary directory. It is not safe for concurrent use.
type NginxChecker struct {
	bin, prefix string
}

// NewNginxChecker finds nginx (skipping the test when it is missing,
// failing it under CI) and makes its prefix, with the logs and temp
// directories nginx opens while testing a configuration.
func NewNginxChecker(t testing.TB) *NginxChecker {
	t.Helper()
	c := &NginxChecker{bin: lookBinary(t, "nginx", NginxPath), prefix: t.TempDir()}
	for _, sub := range []string{"logs", "tmp", "html"} {
		if err := os.MkdirAll(filepath.Join(c.prefix, sub), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	return c
}

// Prefix is the prefix directory (absolute): write files a configuration
// includes under it.
func (c *NginxChecker) Prefix() string { return c.prefix }

// Check writes conf as PREFIX/nginx.conf, {{PREFIX}} replaced and the
// temp paths set under the prefix right after "http {" (as StartNginx
// does, unless conf sets client_body_temp_path), and runs nginx -t on it.
// It reports whether nginx accepts it, with nginx's messages.
func (c *NginxChecker) Check(t testing.TB, conf string) (ok bool, output string) {
	t.Helper()
	if !strings.Contains(conf, "client_body_temp_path") {
		if i := strings.Index(conf, "http {"); i >= 0 {
			i += len("http {")
			conf = conf[:i] + tempPathDirectives + conf[i:]
		}
	}
	conf = strings.ReplaceAll(conf, PrefixPlaceholder, c.prefix)
	path := filepath.Join(c.prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c.CheckFile(t, path)
}

// CheckFile runs nginx -t on the configuration file at path, as it is:
// nginx reads its relative includes from path's directory. The file
// sets its own temp paths when nginx's compiled-in ones are not
// writable.
func (c *NginxChecker) CheckFile(t testing.TB, path string) (ok bool, output string) {
	t.Helper()
	cmd := exec.Command(c.bin, "-t", "-q", "-p", c.prefix+"/", "-c", path, "-e", "stderr")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("testenv: nginx -t: %v", err)
		}
	}
	return err == nil, string(out)
}

// Debian's dynamic modules for Lua: lua-nginx-module needs the NDK
// loaded first.
var luaModules = []string{"/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so"}

// NginxLuaModules returns the load_module lines that load
// lua-nginx-module (Debian's libnginx-mod-http-lua), for the top of a
// configuration, and true; or "" and false when the module is not
// installed — a failure under CI (environment CI=true), which installs
// it.
func NginxLuaModules(t testing.TB) (loadModules string, ok bool) {
	t.Helper()
	var b strings.Builder
	for _, m := range luaModules {
		if _, err := os.Stat(m); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("testenv: %s is missing (CI=true: install libnginx-mod-http-lua)", m)
			}
			return "", false
		}
		b.WriteString("load_module " + m + ";\n")
	}
	return b.String(), true
}
