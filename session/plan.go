package session

import (
	"errors"
	"os"
	"strings"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/problem"
)

// PatternFlags are the names of the pattern flags of `rlprobe run`; a
// plan file's phases use the same names as keys.
var PatternFlags = []string{"rate", "duration", "count", "spread", "at", "period", "phase", "gap",
	"every", "span", "race-mode", "from", "to", "jitter"}

// PlanSpec is a run's plan as a user gives it: a plan file (File), or one
// phase of a named pattern (Pattern, with Phase holding the pattern
// flags). Resolve turns it into a valid patterns.Plan.
type PlanSpec struct {
	// File is a plan file (YAML or JSON), exclusive with Pattern.
	File string
	// Pattern names the pattern of a one-phase plan built from Phase.
	Pattern string
	// Phase holds the pattern flags, named like a plan's keys.
	Phase patterns.Phase
	// Set are the pattern flags the user gave, as "--rate": with File they
	// are refused, since a plan file says them per phase.
	Set []string
}

// Resolve returns the plan: File loaded, or Phase as a one-phase plan of
// Pattern. clients is the number of client identities and chosen whether
// the user chose it; it fills the Clients of every pattern phase that does
// not name its own. Every problem is a usage error; those of a plan built
// from flags are worded as flags ("--pattern steady: --rate is required").
func (p *PlanSpec) Resolve(clients int, chosen bool) (*patterns.Plan, error) {
	switch {
	case p.File != "" && p.Pattern != "":
		return nil, Errorf(Usage, "--plan and --pattern are exclusive: a plan names the pattern of each phase")
	case p.File != "":
		if len(p.Set) > 0 {
			return nil, Errorf(Usage, "%s: pattern flags go with --pattern; in a plan file they are keys of its phases", strings.Join(p.Set, ", "))
		}
		return loadPlan(p.File, clients, chosen)
	case p.Pattern == "":
		return nil, Errorf(Usage, "give --pattern NAME (%s) or --plan FILE", strings.Join(patterns.Patterns, ", "))
	}
	ph := p.Phase
	ph.Pattern = p.Pattern
	if chosen || clients > 1 {
		ph.Clients = clients
	}
	plan := &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{ph}}
	if err := plan.Validate(); err != nil {
		return nil, WithClass(Usage, flagWords(err, p.Pattern))
	}
	return plan, nil
}

// loadPlan reads the plan file name; a chosen number of clients fills the
// pattern phases that do not name theirs.
func loadPlan(name string, clients int, chosen bool) (*patterns.Plan, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, Errorf(Usage, "--plan: %w", err)
	}
	defer file.Close()
	plan, err := patterns.LoadPlan(file, name)
	if err != nil {
		return nil, WithClass(Usage, err)
	}
	for i := range plan.Phases {
		if chosen && plan.Phases[i].Pattern != "" && plan.Phases[i].Clients == 0 {
			plan.Phases[i].Clients = clients
		}
	}
	return plan, nil
}

// flagWords rewrites the problems of a plan built from flags in the words
// of the flags: "phase 1 (steady): rate is required" (the phase is the
// problem's Field) becomes "--pattern steady: --rate is required".
func flagWords(err error, pattern string) error {
	var pe *problem.Error
	if !errors.As(err, &pe) {
		return err
	}
	var probs []problem.Problem
	for _, p := range pe.Problems {
		m := p.Message
		for _, k := range append(PatternFlags[:len(PatternFlags):len(PatternFlags)], "clients") {
			if strings.HasPrefix(m, k+" ") {
				m = "--" + m
				break
			}
		}
		m = strings.ReplaceAll(m, "pattern \"", "--pattern \"")
		probs = append(probs, problem.Problem{Field: "--pattern " + pattern, Message: m})
	}
	return problem.Join("", probs)
}
