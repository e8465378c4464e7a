package cli

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// parse runs cmd's flag parsing on argv (words split at spaces; "_"
// stands for a space inside one) through to its runF.
func parse(t *testing.T, cmd *cobra.Command, argv string) {
	t.Helper()
	args := strings.Fields(argv)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "_", " ")
	}
	cmd.SetArgs(args)
	cmd.SetOut(new(discard))
	cmd.SetErr(new(discard))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%s %s: %v", cmd.Name(), argv, err)
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }

// TestNewCmdFlags: each verb's flags land in its options struct, checked
// through runF without running anything.
func TestNewCmdFlags(t *testing.T) {
	f, _, _ := testFactory(nil)
	g := &GlobalOptions{}

	var run *RunOptions
	parse(t, NewCmdRun(f, g, func(_ context.Context, o *RunOptions) error { run = o; return nil }),
		"http://a/ http://b/ --pattern steady --rate 5/s --duration 2s --clients 3 --seed 9 --max-rate 20/s -H X-A:_1 --yes")
	if run.Plan.Pattern != "steady" || run.Plan.Phase.Rate != 5 || time.Duration(run.Plan.Phase.Duration) != 2*time.Second ||
		!slices.Equal(run.Target.URLs, []string{"http://a/", "http://b/"}) || run.Target.Clients != 3 || !run.Target.ClientsSet ||
		run.Target.Seed != 9 || !run.Target.SeedSet || run.Target.MaxRate != 20 || !run.Target.Yes ||
		!slices.Equal(run.Target.Headers, []string{"X-A: 1"}) || !slices.Equal(run.Plan.Set, []string{"--rate", "--duration"}) {
		t.Errorf("run options %+v", run)
	}
	if run.Target.MaxRequests != 10_000 {
		t.Errorf("run: caps %d", run.Target.MaxRequests)
	}

	var check *CheckOptions
	parse(t, NewCmdCheck(f, g, func(_ context.Context, o *CheckOptions) error { check = o; return nil }),
		"http://a/ --limit 5 --window 2s --only burst,edge --fail-on warning --html r.html --max-duration 1m")
	if check.Policy.Limit != 5 || check.Policy.Window != 2*time.Second || !check.Policy.Changed("limit") ||
		!slices.Equal(check.Only, []string{"burst", "edge"}) || check.Verdict.failOn != "warning" ||
		check.Verdict.out.HTML != "r.html" || check.Target.MaxDuration != time.Minute || check.Target.MaxRequests != 5_000 {
		t.Errorf("check options %+v", check)
	}

	parse(t, NewCmdCheck(f, g, func(_ context.Context, o *CheckOptions) error { check = o; return nil }),
		"http://a/ --from-config nginx.conf --format nginx --server api --location-url ~_^/api/=/api/1 --location-url /b=/b/c --set RATE=5r/s --env t.env --root r --strict --strict-includes")
	if check.FromConfig != "nginx.conf" || !reflect.DeepEqual(check.Config, ConfigSource{Format: "nginx", Server: "api",
		Set: []string{"RATE=5r/s"}, Env: []string{"t.env"}, Root: "r", Strict: true, StrictIncludes: true}) ||
		!slices.Equal(check.LocationURLs, []string{"~ ^/api/=/api/1", "/b=/b/c"}) {
		t.Errorf("check --from-config options %+v", check)
	}

	var inf *InferOptions
	parse(t, NewCmdInfer(f, g, func(_ context.Context, o *InferOptions) error { inf = o; return nil }),
		"http://a/ --expect token-bucket --client-header X-Key --clients 2 --dry-run")
	if inf.Expect != "token-bucket" || inf.Target.ClientHeader != "X-Key" || inf.Target.Clients != 2 || !inf.Target.DryRun {
		t.Errorf("infer options %+v", inf)
	}

	var an *AnalyzeOptions
	parse(t, NewCmdAnalyze(f, g, func(_ context.Context, o *AnalyzeOptions) error { an = o; return nil }),
		"a.jsonl b.jsonl --rate 1r/s --burst 3 --out m.jsonl --force")
	if !slices.Equal(an.Files, []string{"a.jsonl", "b.jsonl"}) || an.Policy.Rate != 1 || an.Policy.Burst != 3 || an.Out != "m.jsonl" || !an.Force || an.Append {
		t.Errorf("analyze options %+v", an)
	}

	var rep *ReportOptions
	parse(t, NewCmdReport(f, g, func(_ context.Context, o *ReportOptions) error { rep = o; return nil }),
		"a.jsonl --format html -o r.html --junit j.xml")
	if rep.Format != "html" || !rep.FormatSet || rep.Out != "r.html" || rep.Reports.JUnit != "j.xml" {
		t.Errorf("report options %+v", rep)
	}

	var srv *ServeOptions
	parse(t, NewCmdServe(f, g, func(_ context.Context, o *ServeOptions) error { srv = o; return nil }),
		"--algorithm leaky-bucket --rate 1r/s --burst 3 --nodelay --status 503 --listen 127.0.0.1:0 --log-requests")
	if srv.Route.Algorithm != "leaky-bucket" || srv.Route.Rate != 1 || srv.Route.Burst == nil || *srv.Route.Burst != 3 ||
		!srv.Route.NoDelay || srv.Route.Status != 503 || srv.Listen != "127.0.0.1:0" || !srv.LogRequests ||
		!slices.Contains(srv.RouteFlags, "burst") {
		t.Errorf("serve options %+v", srv)
	}

	var demo *DemoOptions
	parse(t, NewCmdDemo(f, g, func(_ context.Context, o *DemoOptions) error { demo = o; return nil }), "--no-infer --html d.html")
	if !demo.NoInfer || demo.Out.HTML != "d.html" {
		t.Errorf("demo options %+v", demo)
	}

	var st *SelftestOptions
	parse(t, NewCmdSelftest(f, g, func(_ context.Context, o *SelftestOptions) error { st = o; return nil }), "--quick")
	if !st.Quick {
		t.Errorf("selftest options %+v", st)
	}

	var imp *PolicyImportOptions
	parse(t, NewCmdPolicyImport(f, g, func(_ context.Context, o *PolicyImportOptions) error { imp = o; return nil }),
		"nginx.conf --format nginx --server api.example --location =_/login -o p.yaml --set A=1 --set B=2 --root /srv")
	if imp.File != "nginx.conf" || !reflect.DeepEqual(imp.Source, ConfigSource{Format: "nginx", Server: "api.example", Location: "= /login",
		Set: []string{"A=1", "B=2"}, Root: "/srv"}) || imp.Out != "p.yaml" {
		t.Errorf("policy import options %+v", imp)
	}

	var lint *PolicyLintOptions
	parse(t, NewCmdPolicyLint(f, g, func(_ context.Context, o *PolicyLintOptions) error { lint = o; return nil }),
		"envoy.yaml --format envoy --location /api --fail-on warning --env a.env --strict")
	if lint.File != "envoy.yaml" || !reflect.DeepEqual(lint.Source, ConfigSource{Format: "envoy", Location: "/api", Env: []string{"a.env"}, Strict: true}) || lint.FailOn != "warning" {
		t.Errorf("policy lint options %+v", lint)
	}

	reached := false
	parse(t, NewCmdVersion(f, g, func(context.Context, *VersionOptions) error { reached = true; return nil }), "")
	if !reached {
		t.Error("version: runF not called")
	}
}
