package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaBase is the $id prefix of the JSON Schema files in docs/schema.
const SchemaBase = "https://github.com/rlprobe/rlprobe/raw/main/docs/schema/"

// CompileSchema compiles the file name (e.g. "check.schema.json") of the
// schema directory dir, with every sibling *.schema.json available to its
// $refs under its $id (SchemaBase + file name). It fails the test on any
// error.
func CompileSchema(t testing.TB, dir, name string) *jsonschema.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files in %s: %v", dir, err)
	}
	c := jsonschema.NewCompiler()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource(SchemaBase+filepath.Base(f), doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	s, err := c.Compile(SchemaBase + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}
