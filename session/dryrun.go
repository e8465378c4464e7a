package session

import (
	"maps"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/verify"
)

// capsDoc is the safety caps as the dry-run documents give them.
func capsDoc(c Caps) map[string]any {
	return map[string]any{"max_requests": c.MaxRequests, "max_duration_s": c.MaxDuration.Seconds(), "max_rate_per_s": c.MaxRate}
}

// RunDryRun is the dry-run document of a run (schema rlprobe.run/v1 with
// dry_run true): the plan and its schedule, nothing sent.
type RunDryRun struct {
	Schema    string            `json:"schema"`
	Tool      string            `json:"tool"`
	DryRun    bool              `json:"dry_run"`
	Targets   []string          `json:"targets"`
	Seed      uint64            `json:"seed"`
	Plan      *patterns.Plan    `json:"plan"`
	Requests  int               `json:"requests"`
	Clients   int               `json:"clients"`
	DurationS float64           `json:"duration_s"`
	Start     *time.Time        `json:"start,omitempty"`
	Phases    []DryRunPhase     `json:"phases"`
	RaceMode  patterns.RaceMode `json:"race_mode,omitempty"`
	Caps      map[string]any    `json:"caps"`
}

// DryRunPhase is one phase of a RunDryRun.
type DryRunPhase struct {
	Name      string  `json:"name"`
	Pattern   string  `json:"pattern"`
	OffsetS   float64 `json:"offset_s"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// CheckDryRun is the dry-run document of check: the suite's
// plan per rule (docs/schema/check-dry-run.schema.json). Policy is nil when
// it will come from the target's advertised headers.
type CheckDryRun struct {
	Schema    string            `json:"schema"`
	Tool      string            `json:"tool"`
	DryRun    bool              `json:"dry_run"`
	Targets   []string          `json:"targets"`
	Policy    *verify.Policy    `json:"policy"`
	Rules     []CheckDryRunRule `json:"rules"`
	DurationS float64           `json:"duration_s"`
	Caps      map[string]any    `json:"caps"`
}

// CheckDryRunRule is one rule's suite in a CheckDryRun.
type CheckDryRunRule struct {
	Rule      string            `json:"rule"`
	DurationS float64           `json:"duration_s"`
	Requests  int               `json:"requests"`
	Steps     []CheckDryRunStep `json:"steps"`
	Skipped   map[string]string `json:"skipped"`
}

// CheckDryRunStep is one step of a CheckDryRunRule.
type CheckDryRunStep struct {
	Check     string  `json:"check"`
	Name      string  `json:"name"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// RunDryRun returns the dry-run document of plan, scheduled as sc.
func (s *Session) RunDryRun(plan *patterns.Plan, sc patterns.Schedule) RunDryRun {
	doc := RunDryRun{
		Schema: "rlprobe.run/v1", Tool: s.cfg.Tool, DryRun: true,
		Targets: s.Targets(), Seed: s.cfg.Seed, Plan: plan,
		Requests: len(sc.Sends), Clients: sc.Clients, DurationS: sc.Duration.Seconds(), RaceMode: sc.RaceMode,
		Caps: capsDoc(s.cfg.Caps),
	}
	if !sc.Start.IsZero() {
		st := sc.Start.UTC()
		doc.Start = &st
	}
	for _, ph := range sc.Phases {
		doc.Phases = append(doc.Phases, DryRunPhase{ph.Name, ph.Pattern, ph.Offset.Seconds(), ph.Duration.Seconds(), ph.Requests})
	}
	return doc
}

// CheckDryRun returns the dry-run document of checking p (nil: the policy
// will be the advertised one) with the checks only and skip choose.
func (s *Session) CheckDryRun(p *verify.Policy, only, skip []string) CheckDryRun {
	doc := CheckDryRun{Schema: verify.SchemaCheck, Tool: s.cfg.Tool, DryRun: true, Targets: s.Targets(), Policy: p,
		Rules: []CheckDryRunRule{}, Caps: capsDoc(s.cfg.Caps)}
	if p == nil {
		return doc
	}
	for _, e := range p.Endpoints {
		pl := verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true})
		r := CheckDryRunRule{Rule: e.String(), DurationS: pl.Duration().Seconds(), Requests: pl.Requests(),
			Steps: []CheckDryRunStep{}, Skipped: map[string]string{}}
		for _, st := range pl.Steps {
			r.Steps = append(r.Steps, CheckDryRunStep{st.Check, st.Name, st.Duration.Seconds(), st.Requests})
		}
		maps.Copy(r.Skipped, pl.Skipped)
		doc.Rules = append(doc.Rules, r)
	}
	doc.DurationS = verify.PlanDuration(*p, only, skip).Seconds()
	return doc
}
