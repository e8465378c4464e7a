package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// statusExempt lists the packages that may compare statuses with literals:
// record holds the one classifier; testserver emits statuses.
var statusExempt = map[string]bool{"record": true, "testserver": true}

// statusFuncExempt lists functions, as "package.Func", that compare a
// status that is not a result's, each with its reason.
var statusFuncExempt = map[string]string{
	"verify.validate":    "the range of a declared reject status (400–599), not a result's",
	"session.StatusHint": "a hint for an answer record.Classify already called other (which family of status it is), not a class",
}

// TestOneClassifier: outside record (and testserver, which emits
// statuses), no comparison of a status with an integer literal or an
// http.Status* constant — record.Classify is the one answer to "is this a
// rejection?". A status is any expression whose last name is Status or
// status (r.Status, res.Status, status).
func TestOneClassifier(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		if statusExempt[name] {
			continue
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, pos := range statusComparisons(fset, file, p.Name) {
				t.Errorf("%s: a status compared with a constant; call record.Classify", pos)
			}
		}
	}
}

// statusComparisons returns where file compares a status with an integer
// literal or an http.Status* constant (comparisons, or a switch on a
// status with such cases), outside the exempt functions of pkg.
func statusComparisons(fset *token.FileSet, file *ast.File, pkg string) []token.Position {
	var out []token.Position
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if _, ok := statusFuncExempt[pkg+"."+n.Name.Name]; ok {
				return false
			}
		case *ast.BinaryExpr:
			switch n.Op {
			case token.EQL, token.NEQ, token.LSS, token.LEQ, token.GTR, token.GEQ:
				if isStatus(n.X) && isStatusConst(n.Y) || isStatus(n.Y) && isStatusConst(n.X) {
					out = append(out, fset.Position(n.Pos()))
				}
			}
		case *ast.SwitchStmt:
			if n.Tag != nil && isStatus(n.Tag) {
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if isStatusConst(e) {
							out = append(out, fset.Position(e.Pos()))
						}
					}
				}
			}
		}
		return true
	})
	return out
}

// TestStatusComparisonsFound: the check sees the shapes a second
// classifier takes, and lets the exempt and the unrelated pass.
func TestStatusComparisonsFound(t *testing.T) {
	src := `package verify
import "net/http"
func a(r R) bool { return r.Status == 429 }
func b(status int) bool { return status >= 200 && status < 300 }
func c(r R) bool { return http.StatusTooManyRequests == r.Status }
func d(r R) string { switch r.Status { case 503: return "x" }; return "" }
func validate(e E) bool { return e.Status < 400 }
func fine(r R) bool { return r.Count == 429 || r.Status == r.Declared }
`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, p := range statusComparisons(fset, file, "verify") {
		lines = append(lines, p.Line)
	}
	if want := []int{3, 4, 4, 5, 6}; !slices.Equal(lines, want) {
		t.Errorf("found comparisons on lines %v, want %v", lines, want)
	}
}

// isStatus reports whether e names a status: x.Status, status, Status.
func isStatus(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		// StatusCode (an http.Response's) is the wire protocol's concern
		// (1xx interim answers, 101), not an outcome.
		return e.Sel.Name == "Status"
	case *ast.Ident:
		return e.Name == "status" || e.Name == "Status"
	case *ast.ParenExpr:
		return isStatus(e.X)
	}
	return false
}

// isStatusConst reports whether e is an integer literal in the range of
// HTTP statuses or an http.Status* constant.
func isStatusConst(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return false
		}
		v, err := strconv.Atoi(e.Value)
		return err == nil && v >= 100 && v <= 599
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "http" && strings.HasPrefix(e.Sel.Name, "Status")
	}
	return false
}
