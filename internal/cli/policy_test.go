package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/verify"
)

const exampleNginx = "../../examples/nginx.conf"

// TestPolicyLintExample: lint flags /trap with its line, exits 1, and its
// JSON document validates.
func TestPolicyLintExample(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "policy", "lint", exampleNginx)
	if code != ExitFindings {
		t.Fatalf("policy lint = exit %d, want 1; stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "FAIL: config-not-enforced") || !strings.Contains(out, "nginx.conf:73: = /trap is limited by limit_req zone=trap") {
		t.Errorf("policy lint output:\n%s", out)
	}
	if strings.Count(out, "error   certain") != 1 {
		t.Errorf("want exactly one certain error (/trap):\n%s", out)
	}

	code, out, _ = runCLI(t, nil, "policy", "lint", exampleNginx, "--json")
	if code != ExitFindings {
		t.Fatalf("policy lint --json = exit %d, want 1", code)
	}
	sch := compileDocSchema(t, "policy-lint.schema.json")
	mustValidate(t, sch, "policy lint --json", out)
	doc := decodeDoc(t, out)
	f := member(doc, "findings", 0)
	if f["id"] != "config-not-enforced" || f["endpoint"] != "= /trap" || f["line"].(interface{ String() string }).String() != "73" {
		t.Errorf("first finding = %v, want config-not-enforced on = /trap at line 73", f)
	}
	mustReject(t, sch, out, []schemaBreak{
		{"schema", func(d map[string]any) { d["schema"] = "rlprobe.policy-lint/v2" }},
		{"unknown finding id", func(d map[string]any) { member(d, "findings", 0)["id"] = "nope" }},
		{"finding without line", func(d map[string]any) { delete(member(d, "findings", 0), "line") }},
		{"unknown family", func(d map[string]any) { member(d, "rules", 0)["family"] = "gcra" }},
		{"extra key", func(d map[string]any) { d["extra"] = 1 }},
	})

	// --location keeps one location: / lints clean (exit 0).
	code, out, _ = runCLI(t, nil, "policy", "lint", exampleNginx, "--location", "/")
	if code != ExitOK || !strings.HasPrefix(out, "PASS") || !strings.Contains(out, ": 1 limit\n") {
		t.Errorf("policy lint --location / = exit %d:\n%s", code, out)
	}
}

// TestPolicyImportExample: the import is a policy file verify reads, one
// endpoint per location of the README's variants table.
func TestPolicyImportExample(t *testing.T) {
	out := filepath.Join(t.TempDir(), "policy.yaml")
	code, stdout, errOut := runCLI(t, nil, "policy", "import", exampleNginx, "-o", out)
	if code != ExitOK || stdout != "" {
		t.Fatalf("policy import = exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "config-not-enforced") || !strings.Contains(errOut, "6 rules") {
		t.Errorf("stderr should carry the lint error and the count: %q", errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p, err := verify.ParsePolicyFile(data, out)
	if err != nil {
		t.Fatalf("the imported policy does not read back: %v\n%s", err, data)
	}
	want := map[string]int{"/": 503, "/trap": 503, "/queue": 503, "/delay": 503, "/429": 429, "/retry-after": 503}
	if len(p.Endpoints) != len(want) {
		t.Fatalf("%d endpoints, want %d:\n%s", len(p.Endpoints), len(want), data)
	}
	for _, e := range p.Endpoints {
		if st, ok := want[e.Path]; !ok || e.Rate != 1 || e.Capacity != 4 || e.Key != "ip" || e.Status != st {
			t.Errorf("endpoint %s key %s status %d, want rate 1/s capacity 4 key ip status %d", e.String(), e.Key, e.Status, st)
		}
	}
	if !strings.Contains(string(data), "# ../../examples/nginx.conf:72: = /trap") || !strings.Contains(string(data), "lint config-not-enforced") {
		t.Errorf("the policy file should name /trap's source line and its lint finding:\n%s", data)
	}

	code, stdout, _ = runCLI(t, nil, "policy", "import", exampleNginx, "--json", "-q")
	if code != ExitOK {
		t.Fatalf("policy import --json = exit %d", code)
	}
	mustValidate(t, compileDocSchema(t, "policy-import.schema.json"), "policy import --json", stdout)
}

func TestPolicyErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("http {\n  limit_req_zone $a zone=z:1m rate=1r/s;\n  server {\n"), 0o644)
	tests := []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"policy", "lint", bad}, ExitUsage, "bad.conf:4: unexpected end of file"},
		{[]string{"policy", "import", bad}, ExitUsage, "bad.conf:4"},
		{[]string{"policy", "lint", filepath.Join(dir, "missing.conf")}, ExitUsage, "no such file"},
		{[]string{"policy", "lint", exampleNginx, "--format", "haproxy"}, ExitUsage, "format must be"},
		{[]string{"policy", "lint", exampleNginx, "--fail-on", "fatal"}, ExitUsage, "severity"},
		{[]string{"policy", "import", exampleNginx, "--location", "/nowhere"}, ExitUsage, "no rate limit"},
		{[]string{"policy", "lint"}, ExitUsage, "arg"},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, nil, tt.args...)
		if code != tt.want || !strings.Contains(errOut, tt.msg) {
			t.Errorf("rlprobe %v = exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.want, tt.msg)
		}
	}
}
