// Package archtest holds the test that keeps the package arrows of
// design.md true.
package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rlprobe/rlprobe"

// allowed lists, for every package of the module, which of our packages it
// may import directly (design.md). Transitive imports follow from these.
var allowed = map[string][]string{
	"limiter":    {},
	"headers":    {},
	"record":     {},
	"patterns":   {},
	"probe":      {"record", "headers"},
	"verify":     {"limiter", "headers", "record", "patterns"},
	"infer":      {"limiter", "headers", "record", "patterns", "verify"},
	"report":     {"verify", "infer", "record", "headers"},
	"testserver": {"limiter", "headers"},
	// limiter configs become verify.Policy endpoints and lint findings
	// reuse verify.Finding; units is the one rate/duration grammar.
	"limitconf":         {"verify", "units"},
	"internal/scenario": {"testserver", "probe", "patterns", "verify", "infer", "record", "limiter", "headers", "report"},
	"internal/cli":      {"limiter", "headers", "record", "patterns", "probe", "verify", "infer", "report", "testserver", "internal/scenario", "limitconf"},
	"cmd/rlprobe":       {"internal/cli"},
	// test-only helpers (StartRedis, StartNginx): imported from _test.go files only.
	"internal/testenv":  {},
	"internal/archtest": {},
}

// mayExit lists the packages allowed to call os.Exit or use os/signal.
var mayExit = map[string]bool{"cmd/rlprobe": true, "internal/cli": true}

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
	GoFiles    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func TestArrows(t *testing.T) {
	pkgs := listPackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		name, _ := rel(p.ImportPath)
		seen[name] = true
		allow, known := allowed[name]
		if !known {
			t.Errorf("package %s is not in the arrows table of design.md: add it (and its allowed imports) to internal/archtest", name)
			continue
		}
		for _, imp := range p.Imports {
			r, ours := rel(imp)
			if !ours {
				continue
			}
			if !slices.Contains(allow, r) {
				t.Errorf("%s imports %s, which design.md does not allow (allowed: %v)", name, r, allow)
			}
			if r == "internal/testenv" {
				t.Errorf("%s imports internal/testenv from non-test code; it is for tests only", name)
			}
		}
		if name != "internal/cli" && name != "cmd/rlprobe" && slices.Contains(p.Deps, "github.com/spf13/cobra") {
			t.Errorf("%s depends on cobra; only internal/cli may", name)
		}
	}
	for name := range allowed {
		if !seen[name] {
			t.Errorf("package %s of design.md is missing", name)
		}
	}
}

// TestNoExit checks that library packages never call os.Exit or log.Fatal*
// and never use os/signal.
func TestNoExit(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				if imp.Path.Value == `"os/signal"` && !mayExit[name] {
					t.Errorf("%s uses os/signal; only cmd/rlprobe and internal/cli may", path)
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch {
				case x.Name == "os" && sel.Sel.Name == "Exit" && name != "cmd/rlprobe":
					t.Errorf("%s calls os.Exit; only cmd/rlprobe may", path)
				case x.Name == "log" && strings.HasPrefix(sel.Sel.Name, "Fatal"):
					t.Errorf("%s calls log.%s; return an error instead", path, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
