package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/units"
)

// TestPlanSpecResolve: a plan from a file or from one pattern's flags;
// clients fill the phases that name none; every refusal is a usage error
// in the words of the flags.
func TestPlanSpecResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(file, []byte("version: 1\nphases:\n  - {pattern: burst, count: 3}\n  - {pattern: burst, count: 2, clients: 5}\n  - pause: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steady := patterns.Phase{Rate: units.Rate(5), Duration: units.Duration(2 * time.Second)}
	cases := []struct {
		name    string
		spec    PlanSpec
		clients int
		chosen  bool
		want    []int // clients of each phase
		wantErr string
	}{
		{name: "pattern", spec: PlanSpec{Pattern: "steady", Phase: steady}, clients: 1, want: []int{0}},
		{name: "pattern, clients chosen", spec: PlanSpec{Pattern: "steady", Phase: steady}, clients: 3, chosen: true, want: []int{3}},
		{name: "pattern, clients implied", spec: PlanSpec{Pattern: "steady", Phase: steady}, clients: 2, want: []int{2}},
		{name: "file", spec: PlanSpec{File: file}, clients: 1, want: []int{0, 5, 0}},
		{name: "file, clients chosen", spec: PlanSpec{File: file}, clients: 4, chosen: true, want: []int{4, 5, 0}},
		{name: "both", spec: PlanSpec{File: file, Pattern: "burst"}, wantErr: "--plan and --pattern are exclusive"},
		{name: "neither", spec: PlanSpec{}, wantErr: "give --pattern NAME"},
		{name: "flags with a file", spec: PlanSpec{File: file, Set: []string{"--rate"}}, wantErr: "--rate: pattern flags go with --pattern"},
		{name: "missing file", spec: PlanSpec{File: filepath.Join(dir, "none.yaml")}, wantErr: "--plan: open"},
		{name: "flag words", spec: PlanSpec{Pattern: "steady"}, wantErr: "2 problems:\n  --pattern steady: --rate is required\n  --pattern steady: --duration is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := c.spec.Resolve(c.clients, c.chosen)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || ClassOf(err) != Usage {
					t.Fatalf("error %v (class %d), want a usage error with %q", err, ClassOf(err), c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, ph := range plan.Phases {
				got = append(got, ph.Clients)
			}
			if len(got) != len(c.want) {
				t.Fatalf("phases %+v, want clients %v", plan.Phases, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("phase %d clients %d, want %d", i+1, got[i], c.want[i])
				}
			}
			if c.spec.Pattern != "" && plan.Phases[0].Pattern != c.spec.Pattern {
				t.Errorf("phase pattern %q, want %q", plan.Phases[0].Pattern, c.spec.Pattern)
			}
		})
	}
}
