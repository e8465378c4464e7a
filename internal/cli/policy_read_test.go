package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const realistic = "../../limitconf/testdata/realistic/"

// TestPolicyTemplates: a template's placeholders fail lint (exit 1,
// placeholder-unset naming --set) and refuse import (exit 2); --env and
// --set fill them.
func TestPolicyTemplates(t *testing.T) {
	tmpl := realistic + "gateway.conf.template"
	code, out, _ := runCLI(t, nil, "policy", "lint", tmpl)
	if code != ExitFindings || !strings.Contains(out, "placeholder-unset") || !strings.Contains(out, "--set GW_RATE=VALUE") {
		t.Errorf("lint of an unrendered template = exit %d:\n%s", code, out)
	}
	code, _, errOut := runCLI(t, nil, "policy", "import", tmpl)
	if code != ExitUsage || !strings.Contains(errOut, "5 limits were not read") {
		t.Errorf("import of an unrendered template = exit %d, %q", code, errOut)
	}
	code, out, errOut = runCLI(t, nil, "policy", "import", tmpl, "--env", realistic+"gateway.env", "--set", "GW_BURST=9")
	if code != ExitOK || !strings.Contains(out, "capacity: 10") || !strings.Contains(out, "rate: 20/s") || !strings.Contains(out, "rate: 0.1/s") {
		t.Errorf("import with --env and --set = exit %d, %q:\n%s", code, errOut, out)
	}
	code, _, errOut = runCLI(t, nil, "policy", "lint", tmpl, "--env", filepath.Join(t.TempDir(), "nope.env"))
	if code != ExitUsage || !strings.Contains(errOut, "--env") {
		t.Errorf("a missing --env file = exit %d, %q", code, errOut)
	}
}

// TestPolicyUnusedZones: zones no limit_req uses lint with exit 0 (the
// --json document printed), and import nothing, naming them (exit 2).
func TestPolicyUnusedZones(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "zones.conf")
	os.WriteFile(conf, []byte("limit_req_zone $binary_remote_addr zone=a:1m rate=1r/s;\nlimit_req_zone $uri zone=b:1m rate=2r/s;\nserver { location / { return 200; } }\n"), 0o644)
	code, out, _ := runCLI(t, nil, "policy", "lint", conf, "--json")
	if code != ExitOK || strings.Count(out, `"zone-unused"`) != 2 {
		t.Errorf("lint = exit %d:\n%s", code, out)
	}
	mustValidate(t, compileDocSchema(t, "policy-lint.schema.json"), "policy lint --json", out)
	code, _, errOut := runCLI(t, nil, "policy", "import", conf)
	if code != ExitUsage || !strings.Contains(errOut, "nothing to import") || !strings.Contains(errOut, "zone a, b") {
		t.Errorf("import = exit %d, %q", code, errOut)
	}
}

// TestPolicyServerBlocks: --server reports and exits on that server's
// findings alone, whatever other servers share its locations' text.
func TestPolicyServerBlocks(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "two.conf")
	os.WriteFile(conf, []byte("limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\n"+
		"server { server_name a.example; location = /x { limit_req zone=z; return 200; } }\n"+
		"server { server_name b.example; location = /x { limit_req zone=z; proxy_pass http://127.0.0.1:9; } }\n"), 0o644)
	if code, _, _ := runCLI(t, nil, "policy", "lint", conf); code != ExitFindings {
		t.Errorf("lint of both = exit %d, want 1", code)
	}
	code, out, _ := runCLI(t, nil, "policy", "lint", conf, "--server", "b.example")
	if code != ExitOK || strings.Contains(out, "config-not-enforced") {
		t.Errorf("lint --server b.example = exit %d:\n%s", code, out)
	}
}

// TestPolicyIncludes: a missing include is a warning and the rest is
// read; --strict-includes refuses it; --root reads absolute ones.
func TestPolicyIncludes(t *testing.T) {
	conf := realistic + "etc-root.conf"
	code, out, _ := runCLI(t, nil, "policy", "lint", conf)
	if code != ExitOK || !strings.Contains(out, "include-missing") || !strings.Contains(out, ": 1 limit\n") {
		t.Errorf("lint = exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, nil, "policy", "lint", conf, "--strict-includes"); code != ExitUsage || !strings.Contains(errOut, "1 includes cannot be read") {
		t.Errorf("--strict-includes = exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI(t, nil, "policy", "lint", conf, "--root", realistic+"root", "--strict-includes"); code != ExitOK || !strings.Contains(out, ": 3 limits") {
		t.Errorf("--root = exit %d:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, nil, "policy", "lint", realistic+"shop.conf", "--strict"); code != ExitFindings {
		t.Errorf("--strict on a config nginx reads = exit %d, %q", code, errOut)
	}
}
