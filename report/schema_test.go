package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/verify"
)

// compileSchema compiles docs/schema/name with its siblings available to
// $ref.
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	return testenv.CompileSchema(t, filepath.Join("..", "docs", "schema"), name)
}

func validate(t *testing.T, s *jsonschema.Schema, name string, data []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not validate against its schema: %v", name, err)
	}
}

// TestGoldenJSONValidates validates every JSON golden against
// report.schema.json, which refers to the check, infer and run schemas for
// the documents it embeds.
func TestGoldenJSONValidates(t *testing.T) {
	s := compileSchema(t, "report.schema.json")
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) < len(scenarios) {
		t.Fatalf("found %d JSON goldens, want %d", len(files), len(scenarios))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, s, f, data)
	}
}

// TestSchemaRejects shows that the schema is not vacuous: documents with a
// wrong verdict, finding id or estimate fail validation.
func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t, "report.schema.json")
	good, err := os.ReadFile(filepath.Join("testdata", "fixed-window-fail.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"verdict", `"verdict": "fail"`, `"verdict": "maybe"`},
		{"finding id", `"id": "window-limit-exceeded"`, `"id": "window-limit-exceded"`},
		{"certainty", `"certainty": "certain"`, `"certainty": "sure"`},
		{"algorithm", `"algorithm": "fixed-window"`, `"algorithm": "fixed"`},
		{"run counts", `"accepted": 40`, `"accepted": -1`},
		{"schema", `"schema": "rlprobe.report/v1"`, `"schema": "rlprobe.report/v2"`},
	} {
		bad := bytes.Replace(good, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(bad, good) {
			t.Fatalf("%s: %q not in the golden", tc.name, tc.from)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: a document with %s validates", tc.name, tc.to)
		}
	}
}

// TestFindingIDsMatchSchema keeps this package's finding ids and checks
// equal to the contract's, as the check schema lists them.
func TestFindingIDsMatchSchema(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "schema", "check.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	props := doc.(map[string]any)["$defs"].(map[string]any)["finding"].(map[string]any)["properties"].(map[string]any)
	var ids, checks []string
	for _, v := range props["id"].(map[string]any)["enum"].([]any) {
		ids = append(ids, v.(string))
	}
	for _, v := range props["check"].(map[string]any)["enum"].([]any) {
		if v.(string) != "" {
			checks = append(checks, v.(string))
		}
	}
	for _, id := range verify.FindingIDs {
		if !slices.Contains(ids, id) {
			t.Errorf("finding id %s is not in the schema's list %v", id, ids)
		}
	}
	if !slices.Equal(checks, verify.Checks) {
		t.Errorf("verify.Checks = %v, the schema lists %v", verify.Checks, checks)
	}
	for _, id := range verify.FindingIDs {
		if !slices.Contains(verify.Checks, verify.DefaultCheck(id)) {
			t.Errorf("finding %s has no default check", id)
		}
	}
}
