package session

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/units"
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
	caps      Caps
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
		Requests: int(sc.Len()), Clients: sc.Clients, DurationS: sc.Duration.Seconds(), RaceMode: sc.RaceMode,
		Caps: capsDoc(s.cfg.Caps), caps: s.cfg.Caps,
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
	if c := s.cfg.Caps; c.MaxRequests <= 0 || c.MaxRequestsDefault {
		// As Check raises it, counting the preflight.
		c.MaxRequests = max(c.MaxRequests, SuiteCap(p, only, skip, 1))
		doc.Caps = capsDoc(c)
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

// WriteText writes the dry run for people: the targets, the phases (a
// table), the requests, clients and duration, the seed and the caps.
func (d *RunDryRun) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "dry run: nothing sent\ntargets: %s\n\n", strings.Join(d.Targets, ", "))
	rows := [][]string{{"phase", "pattern", "starts", "lasts", "requests"}}
	for _, ph := range d.Phases {
		rows = append(rows, []string{ph.Name, ph.Pattern, units.Seconds(ph.OffsetS).String(), units.Seconds(ph.DurationS).String(), fmt.Sprint(ph.Requests)})
	}
	writeColumns(w, rows, 2)
	fmt.Fprintf(w, "\n%d requests from %d client(s) over %v", d.Requests, d.Clients, units.Seconds(d.DurationS))
	if d.RaceMode != "" {
		fmt.Fprintf(w, ", races in %s mode", d.RaceMode)
	}
	if d.Start != nil {
		fmt.Fprintf(w, ", starting at %s", d.Start.Format(time.RFC3339Nano))
	}
	c := d.caps
	_, err := fmt.Fprintf(w, "\nseed %d; caps %d requests, %v, %s\n", d.Seed, c.MaxRequests, c.MaxDuration, units.FormatRate(c.MaxRate))
	return err
}

// writeColumns writes rows (the first is the header) as columns two
// spaces apart, left-aligned before column right and right-aligned from
// it.
func writeColumns(w io.Writer, rows [][]string, right int) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < right {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// WriteText writes the suite's plan for people: each rule with its
// duration, requests and steps, the checks skipped and why, and the whole
// plan's duration.
func (d *CheckDryRun) WriteText(w io.Writer) error {
	if d.Policy == nil {
		_, err := fmt.Fprintln(w, "plan: the policy will come from the target's advertised headers (preflight); declare one to see the plan")
		return err
	}
	var b strings.Builder
	ms := func(s float64) time.Duration { return units.Seconds(s).Round(time.Millisecond) }
	for _, r := range d.Rules {
		fmt.Fprintf(&b, "rule: %s — %v, at most %d requests\n", r.Rule, ms(r.DurationS), r.Requests)
		for _, s := range r.Steps {
			fmt.Fprintf(&b, "  %-10s %-10v %4d requests  %s\n", s.Check, ms(s.DurationS), s.Requests, s.Name)
		}
		var skipped []string
		for c, why := range r.Skipped {
			skipped = append(skipped, c+" ("+why+")")
		}
		slices.Sort(skipped)
		if len(skipped) > 0 {
			fmt.Fprintf(&b, "  skipped: %s\n", strings.Join(skipped, ", "))
		}
	}
	fmt.Fprintf(&b, "plan: %v\n", ms(d.DurationS))
	_, err := io.WriteString(w, b.String())
	return err
}

// InferDryRun is the dry-run document of infer (schema rlprobe.infer/v1
// with dry_run true): the plan Infer would record, nothing sent.
type InferDryRun struct {
	Schema  string    `json:"schema"`
	Tool    string    `json:"tool"`
	DryRun  bool      `json:"dry_run"`
	Targets []string  `json:"targets"`
	Plan    InferPlan `json:"plan"`
	caps    Caps
}

// InferDryRun returns the dry-run document of inferring, expecting expect
// (empty: no expectation).
func (s *Session) InferDryRun(expect infer.Family) InferDryRun {
	return InferDryRun{Schema: infer.Schema, Tool: s.cfg.Tool, DryRun: true, Targets: s.Targets(),
		Plan: s.InferPlan(expect), caps: s.cfg.Caps}
}

// WriteText writes what infer would do, for people.
func (d *InferDryRun) WriteText(w io.Writer) error {
	c := d.caps
	_, err := fmt.Fprintf(w, "targets: %s\ncaps: %d requests, %v, %s\nplan: adaptive experiments (bursts, recovery scans, designed probes) within 6·W + 30 s\nnothing sent (--dry-run)\n",
		strings.Join(d.Targets, ", "), c.MaxRequests, c.MaxDuration, units.FormatRate(c.MaxRate))
	return err
}
