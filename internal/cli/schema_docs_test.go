package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// dryRunTarget is never contacted: a dry run sends nothing.
const dryRunTarget = "http://127.0.0.1:9/"

// compileDocSchema compiles docs/schema/name with every sibling schema
// available to its $refs under their $id.
func compileDocSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	return testenv.CompileSchema(t, filepath.Join("..", "..", "docs", "schema"), name)
}

// decodeDoc decodes a document the way the validator reads it (numbers
// as json.Number), so a mutation can be validated again.
func decodeDoc(t *testing.T, raw string) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not a JSON object:\n%s", raw)
	}
	return m
}

// mustValidate fails the test unless doc validates against sch.
func mustValidate(t *testing.T, sch *jsonschema.Schema, what, raw string) {
	t.Helper()
	if err := sch.Validate(decodeDoc(t, raw)); err != nil {
		t.Errorf("%s does not validate against %s: %v\n%s", what, sch.Location, err, raw)
	}
}

// schemaBreak is a mutation that makes a valid document invalid.
type schemaBreak struct {
	name   string
	mutate func(doc map[string]any)
}

// mustReject applies each break to a fresh copy of the valid document raw
// and fails the test when the schema still accepts the result: the schema
// is not vacuous where it claims to be precise.
func mustReject(t *testing.T, sch *jsonschema.Schema, raw string, breaks []schemaBreak) {
	t.Helper()
	for _, b := range breaks {
		doc := decodeDoc(t, raw)
		b.mutate(doc)
		if err := sch.Validate(doc); err == nil {
			t.Errorf("%s: the schema accepts a broken document (%s)", sch.Location, b.name)
		}
	}
}

// member walks doc through object keys and array indexes ("cases", 0).
func member(doc any, steps ...any) map[string]any {
	for _, s := range steps {
		switch k := s.(type) {
		case string:
			doc = doc.(map[string]any)[k]
		case int:
			doc = doc.([]any)[k]
		}
	}
	return doc.(map[string]any)
}

// TestSchemaSelftest: the selftest document of one right case (no limiter,
// inferred none) and one that cannot run (its server refuses the policy:
// error, no inference, param_errors null) validates against
// selftest.schema.json.
func TestSchemaSelftest(t *testing.T) {
	hook := func(f *Factory) {
		f.Selftest = func(o *scenario.SelftestOptions) {
			o.Cases = []scenario.SelftestCase{
				{Name: "none", Want: scenario.SelftestWant{Family: infer.None}},
				{Name: "broken", Policy: &testserver.Policy{Limiter: limiter.Config{Algorithm: "no-such-algorithm"}},
					Want: scenario.SelftestWant{Family: infer.TokenBucket}},
			}
		}
	}
	code, stdout, stderr := runCLIWith(t, hook, "selftest", "--json", "-q")
	if code != ExitFindings {
		t.Fatalf("exit %d, want 1 (the broken case misses)\n%s\n%s", code, stdout, stderr)
	}
	var doc scenario.SelftestDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) != 2 || !doc.Cases[0].Right || doc.Cases[0].Inference == nil ||
		doc.Cases[1].Error == "" || doc.Cases[1].Inference != nil || doc.Cases[1].ParamErrors != nil {
		t.Fatalf("want a right case and a case that could not run:\n%s", stdout)
	}
	sch := compileDocSchema(t, "selftest.schema.json")
	mustValidate(t, sch, "selftest document", stdout)
	mustReject(t, sch, stdout, []schemaBreak{
		{"matrix removed", func(d map[string]any) { delete(d, "matrix") }},
		{"case without param_errors", func(d map[string]any) { delete(member(d, "cases", 0), "param_errors") }},
		{"want gcra (a server algorithm, not an inferred family)", func(d map[string]any) { member(d, "cases", 0)["want"] = "gcra" }},
		{"unknown family in families", func(d map[string]any) { d["families"].([]any)[0] = "fixed" }},
		{"param_errors for an unknown parameter", func(d map[string]any) { member(d, "cases", 0)["param_errors"] = map[string]any{"burst": 0.0} }},
		{"pass with a wrong case", func(d map[string]any) { d["pass"] = true }},
		{"right with problems", func(d map[string]any) { member(d, "cases", 0)["problems"] = []any{"family none, want token-bucket"} }},
		{"right with an error", func(d map[string]any) { member(d, "cases", 0)["error"] = "listen: refused" }},
		{"inference not an infer document", func(d map[string]any) { delete(member(d, "cases", 0, "inference"), "algorithm") }},
	})
}

// TestSchemaDemo: `demo --json --no-infer` validates against
// demo.schema.json, and so does the document with an inference (the full
// demo takes 15 s of real time, so the inference here is built, not run).
func TestSchemaDemo(t *testing.T) {
	code, stdout, stderr := runCLI(t, nil, "demo", "--json", "--no-infer")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sch := compileDocSchema(t, "demo.schema.json")
	mustValidate(t, sch, "demo --no-infer document", stdout)

	var doc scenario.DemoDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Inference != nil {
		t.Fatalf("--no-infer printed an inference:\n%s", stdout)
	}
	countsRejected, status := false, 503
	doc.Inference = &infer.Inference{Schema: infer.Schema, Tool: "rlprobe v0.0.0-test", Algorithm: infer.TokenBucket, Fit: infer.FitExact, Closest: infer.TokenBucket, Misses: []infer.Miss{},
		Params: infer.Params{
			RatePerS: &infer.Param{Value: 1.001, Low: 1, High: 1.001},
			Capacity: &infer.Param{Value: 4, Low: 4, High: 4},
		},
		CountsRejected: &countsRejected, Key: infer.KeyUnknown, RejectStatus: &status, Headers: []string{"none"},
		Reproduced: 1, Alternatives: []infer.Alternative{{Algorithm: infer.None, Reproduced: 0.16, RuledOutBy: "90 requests were rejected"}},
		Requests: 107, DurationS: 15.1, Complete: true}
	withInference, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, sch, "demo document with an inference", string(withInference))

	mustReject(t, sch, stdout, []schemaBreak{
		{"verdict removed", func(d map[string]any) { delete(d, "verdict") }},
		{"inference removed", func(d map[string]any) { delete(d, "inference") }},
		{"unknown outcome", func(d map[string]any) { member(d, "requests", 0)["outcome"] = "served" }},
		{"count of an unknown outcome", func(d map[string]any) { member(d, "counts")["delayed"] = json.Number("1") }},
		{"server algorithm not a server algorithm", func(d map[string]any) { member(d, "server")["algorithm"] = "leaky-bucket-queue" }},
		{"server without status", func(d map[string]any) { delete(member(d, "server"), "status") }},
		{"verdict not a check document", func(d map[string]any) { member(d, "verdict")["verdict"] = "ok" }},
	})
	mustReject(t, sch, string(withInference), []schemaBreak{
		{"inferred gcra", func(d map[string]any) { member(d, "inference")["algorithm"] = "gcra" }},
	})
}

// TestSchemaRunDryRun: `run --dry-run --json` of a pattern, of a pattern
// anchored to the clock (start), of a race (race_mode) and of a plan file
// with a pause validates against run-dry-run.schema.json.
func TestSchemaRunDryRun(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte("version: 1\nphases:\n  - pattern: steady\n    rate: 5/s\n    duration: 2s\n    jitter: 10ms\n  - pause: 1500ms\n  - pattern: ramp\n    from: 1/s\n    to: 30/m\n    duration: 3s\n    clients: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sch := compileDocSchema(t, "run-dry-run.schema.json")
	var burst string
	for _, tt := range []struct {
		name string
		args []string
		want string // a member the document must carry
	}{
		{"burst", []string{"--pattern", "burst", "--count", "5", "--spread", "40ms"}, `"spread": "40ms"`},
		{"edge", []string{"--pattern", "edge", "--count", "3", "--period", "1s", "--gap", "100ms"}, `"start": "`},
		{"race", []string{"--pattern", "race", "--clients", "3", "--count", "2", "--race-mode", "last-byte"}, `"race_mode": "last-byte"`},
		{"plan", []string{"--plan", plan}, `"pause": "1.5s"`},
	} {
		args := append([]string{"run", dryRunTarget, "--dry-run", "--json"}, tt.args...)
		code, stdout, stderr := runCLI(t, nil, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.name, code, stderr)
		}
		if !strings.Contains(stdout, tt.want) {
			t.Errorf("%s: the document lacks %s:\n%s", tt.name, tt.want, stdout)
		}
		mustValidate(t, sch, "run --dry-run document ("+tt.name+")", stdout)
		if tt.name == "burst" {
			burst = stdout
		}
	}
	mustReject(t, sch, burst, []schemaBreak{
		{"caps removed", func(d map[string]any) { delete(d, "caps") }},
		{"not a dry run", func(d map[string]any) { d["dry_run"] = false }},
		{"unknown phase pattern", func(d map[string]any) { member(d, "phases", 0)["pattern"] = "surge" }},
		{"plan phase with pattern and pause", func(d map[string]any) { member(d, "plan", "phases", 0)["pause"] = "1s" }},
		{"plan duration without a unit", func(d map[string]any) { member(d, "plan", "phases", 0)["spread"] = "40" }},
		{"unknown race mode", func(d map[string]any) { d["race_mode"] = "together" }},
	})
}

// TestSchemaInferDryRun: `infer --dry-run --json` validates against
// infer-dry-run.schema.json, with and without --expect.
func TestSchemaInferDryRun(t *testing.T) {
	sch := compileDocSchema(t, "infer-dry-run.schema.json")
	var expect string
	for _, extra := range [][]string{nil, {"--expect", "sliding-log", "--clients", "2", "--max-requests", "300"}} {
		args := append([]string{"infer", dryRunTarget, "--dry-run", "--json"}, extra...)
		code, stdout, stderr := runCLI(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		mustValidate(t, sch, "infer --dry-run document", stdout)
		expect = stdout
	}
	if !strings.Contains(expect, `"expect": "sliding-log"`) {
		t.Errorf("the document lacks --expect:\n%s", expect)
	}
	mustReject(t, sch, expect, []schemaBreak{
		{"plan without its command", func(d map[string]any) { delete(member(d, "plan"), "command") }},
		{"expect gcra", func(d map[string]any) { member(d, "plan")["expect"] = "gcra" }},
		{"not a dry run", func(d map[string]any) { delete(d, "dry_run") }},
		{"no targets", func(d map[string]any) { d["targets"] = []any{} }},
	})
}

// TestSchemaCheckDryRun: `check --dry-run --json` prints the suite's plan
// as a document that validates against check-dry-run.schema.json, with a
// declared policy and without one (the policy then comes from the target).
func TestSchemaCheckDryRun(t *testing.T) {
	sch := compileDocSchema(t, "check-dry-run.schema.json")
	var declared string
	for _, extra := range [][]string{
		{"--limit", "5", "--window", "1s", "--skip", "race"},
		{"--rate", "2/s", "--burst", "3", "--status", "429"},
		nil,
	} {
		args := append([]string{"check", dryRunTarget, "--dry-run", "--json"}, extra...)
		code, stdout, stderr := runCLI(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		mustValidate(t, sch, "check --dry-run document", stdout)
		if extra == nil {
			if !strings.Contains(stdout, `"policy": null`) || !strings.Contains(stdout, `"rules": []`) {
				t.Errorf("without a policy: want a null policy and no rules:\n%s", stdout)
			}
			continue
		}
		if !strings.Contains(stdout, `"check": "burst"`) {
			t.Errorf("%v: the plan lacks the burst step:\n%s", extra, stdout)
		}
		if declared == "" {
			declared = stdout
		}
	}
	if strings.Contains(declared, `"check": "race"`) {
		t.Errorf("--skip race: the plan still has a race step:\n%s", declared)
	}
	mustReject(t, sch, declared, []schemaBreak{
		{"rules removed", func(d map[string]any) { delete(d, "rules") }},
		{"not a dry run", func(d map[string]any) { d["dry_run"] = false }},
		{"unknown check", func(d map[string]any) { member(d, "rules", 0, "steps", 0)["check"] = "flood" }},
		{"step without requests", func(d map[string]any) { delete(member(d, "rules", 0, "steps", 0), "requests") }},
		{"caps without a rate", func(d map[string]any) { delete(member(d, "caps"), "max_rate_per_s") }},
	})
}
