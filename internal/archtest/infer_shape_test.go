package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxInferFileLines is the most lines a file of package infer may hold
// (issue 22: a package of small files, each one concern).
const maxInferFileLines = 600

// TestInferShape keeps package infer as issue 22 left it: no file over
// maxInferFileLines lines, and no type named session (the phases are the
// prober's stages, driven by one loop).
func TestInferShape(t *testing.T) {
	files, err := filepath.Glob("../../infer/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no infer sources found: %v", err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(src, []byte("\n")); n > maxInferFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by concern", filepath.Base(f), n, maxInferFileLines)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "session" {
				t.Errorf("%s: infer declares a type named session", fset.Position(ts.Pos()))
			}
			return true
		})
	}
}
