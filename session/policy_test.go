package session

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/verify"
)

// changed answers Changed for the flags named.
func changed(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

// TestPolicySpecGiven: Given lists the policy flags given, in PolicyFlags
// order, and nothing else (other flags of the command are not policy).
func TestPolicySpecGiven(t *testing.T) {
	tests := []struct {
		changed func(string) bool
		want    []string
	}{
		{nil, nil},
		{changed("format", "only"), nil},
		{changed("policy-file", "limit", "status", "format"), []string{"--limit", "--status", "--policy-file"}},
		{changed(PolicyFlags...), func() []string {
			var all []string
			for _, n := range PolicyFlags {
				all = append(all, "--"+n)
			}
			return all
		}()},
	}
	for i, tt := range tests {
		p := &PolicySpec{Changed: tt.changed}
		if got := p.Given(); !slices.Equal(got, tt.want) {
			t.Errorf("%d: Given() = %q, want %q", i, got, tt.want)
		}
	}
}

// TestPolicySpecCheckOptions: the check's options carry the choices and
// the spec's status only when given; every bad choice is named at once.
func TestPolicySpecCheckOptions(t *testing.T) {
	tests := []struct {
		name       string
		spec       PolicySpec
		failOn     string
		only, skip []string
		want       CheckOptions // Advertised not compared
		wantErr    []string     // parts of the Usage error; nil for none
	}{
		{name: "defaults", failOn: "error", want: CheckOptions{FailOn: verify.SeverityError}},
		{name: "choices", failOn: "Warning", only: []string{"burst"}, skip: []string{"edge"},
			want: CheckOptions{FailOn: verify.SeverityWarning, Only: []string{"burst"}, Skip: []string{"edge"}}},
		{name: "status given", spec: PolicySpec{Status: 503, Changed: changed("status")}, failOn: "info",
			want: CheckOptions{FailOn: verify.SeverityInfo, Status: 503}},
		{name: "status not given", spec: PolicySpec{Status: 503}, failOn: "info", want: CheckOptions{FailOn: verify.SeverityInfo}},
		{name: "one problem", failOn: "fatal", wantErr: []string{"--fail-on: must be info, warning or error"}},
		{name: "no fail-on", failOn: "", wantErr: []string{"--fail-on"}},
		{name: "every problem", failOn: "fatal", only: []string{"nope"}, skip: []string{"nada"},
			wantErr: []string{"3 problems:", "\n  --fail-on: must be", "\n  --only: ", "nope", "\n  --skip: ", "nada"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.CheckOptions(tt.failOn, tt.only, tt.skip)
			if tt.wantErr != nil {
				if ClassOf(err) != Usage {
					t.Fatalf("err %v (class %d), want a Usage error", err, ClassOf(err))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err %q should contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.FailOn != tt.want.FailOn || got.Status != tt.want.Status || !slices.Equal(got.Only, tt.want.Only) ||
				!slices.Equal(got.Skip, tt.want.Skip) || got.Advertised == nil || got.Judge != nil {
				t.Errorf("CheckOptions = %+v, want %+v", got, tt.want)
			}
		})
	}
	// Advertised applies the spec's modifiers.
	spec := PolicySpec{Key: "ip", Changed: changed("key")}
	opts, _ := spec.CheckOptions("error", nil, nil)
	pol, err := opts.Advertised([]verify.Endpoint{{Limit: 3, Window: 1e9}})
	if err != nil || pol.Endpoints[0].Key != "ip" {
		t.Errorf("Advertised = %+v, %v; want the key ip", pol, err)
	}
}

// TestProblems: none is nil; one is itself; several are counted and
// listed one a line; all are Usage errors.
func TestProblems(t *testing.T) {
	tests := []struct {
		probs []problem.Problem
		want  string
	}{
		{nil, ""},
		{[]problem.Problem{{Field: "--a", Message: "bad"}}, "--a: bad"},
		{[]problem.Problem{{Field: "--a", Message: "bad"}, {Message: "--b is worse"}}, "2 problems:\n  --a: bad\n  --b is worse"},
	}
	for _, tt := range tests {
		err := Problems(tt.probs)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Problems(%q) = %v, want nil", tt.probs, err)
			}
			continue
		}
		if err == nil || err.Error() != tt.want || ClassOf(err) != Usage {
			t.Errorf("Problems(%q) = %v (class %d), want %q", tt.probs, err, ClassOf(err), tt.want)
		}
	}
}

// TestVerdictOutputError: a write failure is reported with the class the
// verdict decides when the verdict's error has nothing of its own to say;
// a verdict error with a message is kept.
func TestVerdictOutputError(t *testing.T) {
	pass := &verify.Report{Verdict: verify.VerdictPass, Complete: true}
	fail := &verify.Report{Verdict: verify.VerdictFail, Complete: true}
	partial := &verify.Report{Verdict: verify.VerdictPass}
	werr := WithClass(Usage, errors.New("--html: permission denied"))
	plain := errors.New("stdout: broken pipe")
	aborted := Errorf(Aborted, "the target stopped answering")
	tests := []struct {
		name      string
		rep       *verify.Report
		err, werr error
		class     Class
		msg       string
	}{
		{"nothing failed", pass, nil, nil, OK, ""},
		{"no write failure keeps err", fail, VerdictError(fail, nil), nil, Findings, "exit 1"},
		{"pass, write failed", pass, nil, werr, Usage, "--html"},
		{"fail, write failed", fail, VerdictError(fail, nil), werr, Usage, "--html"},
		{"fail, print failed (unclassified: Usage)", fail, VerdictError(fail, nil), plain, Usage, "broken pipe"},
		{"fail, an aborted write", fail, VerdictError(fail, nil), aborted, Findings, "stopped answering"},
		{"incomplete, print failed", partial, VerdictError(partial, nil), plain, Usage, "broken pipe"},
		{"an error of its own is kept", partial, aborted, werr, Aborted, "stopped answering"},
	}
	for _, tt := range tests {
		got := VerdictOutputError(tt.rep, tt.err, tt.werr)
		msg := ""
		if got != nil {
			msg = got.Error()
		}
		if ClassOf(got) != tt.class || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: %v (class %d), want class %d with %q", tt.name, got, ClassOf(got), tt.class, tt.msg)
		}
	}
}

// TestPolicySpecResolveProblems: every problem of the policy flags is one
// line of the usage error, in the flags' words: verify's problems of a
// --policy value stand under their policy[i] field (not nested in a
// second "invalid policy" list), those of quota flags under the flag.
func TestPolicySpecResolveProblems(t *testing.T) {
	tests := []struct {
		name string
		spec PolicySpec
		want string
	}{
		{"draft and a quota flag", PolicySpec{Draft: `"a";q=-1;w=60`, Limit: 5, Changed: changed("policy", "limit")},
			"2 problems:\n  --policy declares the quota: drop --limit\n  policy[0].q: must be a non-negative integer"},
		{"draft with two problems", PolicySpec{Draft: `"a";q=-1;w=0`, Changed: changed("policy")},
			"2 problems:\n  policy[0].q: must be a non-negative integer\n  policy[0].w: must be a positive integer (seconds)"},
		{"draft not a policy", PolicySpec{Draft: `100;w=`, Changed: changed("policy")},
			`--policy "100;w=" is not a RateLimit-Policy value (want`},
		{"quota flags", PolicySpec{Limit: 0, Window: -1, Changed: changed("limit", "window")},
			"2 problems:\n  --limit: must be at least 1, not 0\n  --window: must be a positive duration"},
	}
	for _, tt := range tests {
		_, err := tt.spec.Resolve()
		if ClassOf(err) != Usage || err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: Resolve() = %v (class %d), want a usage error starting %q", tt.name, err, ClassOf(err), tt.want)
		}
	}
}
