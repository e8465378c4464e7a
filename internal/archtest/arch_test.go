// Package archtest holds the test that keeps the package arrows of
// design.md true.
package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rlprobe/rlprobe"

// allowed lists, for every package of the module, which of our packages it
// may import directly (design.md), each edge with its reason. Transitive
// imports follow from these. A package missing here fails TestArrows, and
// so does a package listed here that does not exist.
var allowed = map[string]map[string]string{
	"units": {},
	// problem is the one validation Problem and its joined error: a leaf
	// every package that checks input reports through.
	"problem": {},
	"limiter": {
		"units":   "rates in the contract's grammar",
		"problem": "Config.Validate and ParsePenalty report problem.Problems",
	},
	"headers": {"units": "durations and rates in header values"},
	"record": {
		"units":   "durations in the record file",
		"problem": "CheckAgent's problem, which session puts under --agent",
	},
	"patterns": {
		"units":   "rates and durations of plans and flags",
		"problem": "a plan's problems, each with its file, line and phase",
	},
	"probe": {
		"record":  "it writes one record.Result per send",
		"headers": "which response headers to capture",
		"units":   "rates and durations of options",
	},
	"verify": {
		"limiter":  "bucket and window arithmetic of the policy",
		"headers":  "parsing the captured rate-limit headers",
		"record":   "it judges recorded results, never the engine",
		"patterns": "the check suite's schedules",
		"units":    "rates and durations of policies",
		"problem":  "a policy's problems, with field and line; limiter's put under their field",
	},
	"infer": {
		"limiter":  "candidate models replayed over arrivals",
		"headers":  "advertised policies as evidence",
		"record":   "it fits recorded results, never the engine",
		"patterns": "experiment schedules",
		"verify":   "policy types, the Retry-After grade, arrival bounds",
		"units":    "rates and durations of parameters",
	},
	"report": {
		"verify":  "it renders verify's own report types",
		"infer":   "it renders infer's own inference type",
		"record":  "stored runs, findings and inferences",
		"headers": "dialect names and header values shown",
		"units":   "one display format for rates, durations and numbers",
	},
	"testserver": {
		"limiter": "the algorithms it serves",
		"headers": "it emits every dialect through headers",
		"units":   "rates and durations of its config",
	},
	"session": {
		"probe":    "it owns the probing engines",
		"verify":   "Check runs the suite and judges; policy types",
		"infer":    "Infer runs the adaptive experiments",
		"record":   "it owns the record file's life: header, one seq space, end line",
		"patterns": "plans and schedules of Run",
		"headers":  "the captured header names in the record header",
		"units":    "rates and durations in its messages",
		"problem":  "usage errors list problems; parsers' problems put under their flag",
	},
	"internal/scenario": {
		"session":    "the canned runs probe through a session",
		"testserver": "the embedded reference server of demo and selftest",
		"probe":      "the engine selftest drives",
		"patterns":   "the demo's burst",
		"verify":     "the demo's verdict",
		"infer":      "selftest's inferences",
		"record":     "records of the canned runs",
		"limiter":    "the algorithms of the selftest grid",
		"headers":    "dialects of the selftest grid",
		"report":     "rendering the demo and the confusion matrix",
		"units":      "rates and durations of the grid",
	},
	"internal/cli": {
		"limiter": "serve's algorithm flags", "headers": "dialect flags", "record": "record files",
		"patterns": "pattern flags and plans", "probe": "target flags to engine options",
		"verify": "policy flags", "infer": "infer options", "report": "every output format",
		"testserver": "serve", "internal/scenario": "demo and selftest", "units": "rate and duration flags",
		"watch":     "the watch daemon's flags and signals",
		"limitconf": "policy import and lint",
		"session":   "run, check and infer are session calls",
	},
	"watch": {
		"session":  "each cycle is a probing session of its own",
		"patterns": "a cycle's plan (a spread burst, an exhausting burst)",
		"verify":   "each cycle is judged against the declared policy; advertised rules",
		"infer":    "the first cycle's inference is the drift baseline",
		"record":   "cycles' results, classified by record.Classify",
		"headers":  "the dialects a cycle saw (a drift when they change)",
		"units":    "one display format in messages",
		"problem":  "Settings.Config lists its problems for session.Problems",
	},
	"limitconf": {
		"verify":  "configs become verify.Policy endpoints; lint findings reuse verify.Finding",
		"units":   "one grammar for the rates and durations configs write",
		"problem": "a config that cannot be read is a problem with its file and line",
	},
	"cmd/rlprobe": {"internal/cli": "main only runs the CLI"},
	// test-only helpers (StartRedis, StartNginx): imported from _test.go files only.
	"internal/testenv":  {},
	"internal/archtest": {},
	// test files only: the deployments over real sockets with the built binary.
	"internal/deploytest": {},
}

// mayExit lists the packages allowed to call os.Exit or use os/signal.
var mayExit = map[string]bool{"cmd/rlprobe": true, "internal/cli": true}

type pkg struct {
	Name       string
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
			if _, ok := allow[r]; !ok {
				t.Errorf("%s imports %s, which design.md does not allow (allowed: %v)", name, r, slices.Sorted(maps.Keys(allow)))
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

// TestEveryEdgeHasAReason keeps the table honest: an allowed import says
// why it is allowed, as tailscale's deptest does.
func TestEveryEdgeHasAReason(t *testing.T) {
	for from, to := range allowed {
		for imp, why := range to {
			if strings.TrimSpace(why) == "" {
				t.Errorf("%s → %s has no reason in the arrows table", from, imp)
			}
			if _, known := allowed[imp]; !known {
				t.Errorf("%s → %s names a package that is not in the table", from, imp)
			}
		}
	}
}
