package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// capsDoc is the safety caps as the dry-run documents give them.
func capsDoc(c session.Caps) map[string]any {
	return map[string]any{"max_requests": c.MaxRequests, "max_duration_s": c.MaxDuration.Seconds(), "max_rate_per_s": c.MaxRate}
}

// runDryRunDoc is the --json document of `rlprobe run --dry-run`.
type runDryRunDoc struct {
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
	Phases    []runDryRunPhase  `json:"phases"`
	RaceMode  patterns.RaceMode `json:"race_mode,omitempty"`
	Caps      map[string]any    `json:"caps"`
}

type runDryRunPhase struct {
	Name      string  `json:"name"`
	Pattern   string  `json:"pattern"`
	OffsetS   float64 `json:"offset_s"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// printRunDryRun prints the plan of a run and its duration; nothing is sent.
func printRunDryRun(f *Factory, g *GlobalOptions, sess *session.Session, plan *patterns.Plan, s patterns.Schedule) error {
	cfg := sess.Config()
	if g.JSON {
		doc := runDryRunDoc{
			Schema: "rlprobe.run/v1", Tool: f.tool(), DryRun: true,
			Targets: sess.Targets(), Seed: cfg.Seed, Plan: plan,
			Requests: len(s.Sends), Clients: s.Clients, DurationS: s.Duration.Seconds(), RaceMode: s.RaceMode,
			Caps: capsDoc(cfg.Caps),
		}
		if !s.Start.IsZero() {
			st := s.Start.UTC()
			doc.Start = &st
		}
		for _, ph := range s.Phases {
			doc.Phases = append(doc.Phases, runDryRunPhase{ph.Name, ph.Pattern, ph.Offset.Seconds(), ph.Duration.Seconds(), ph.Requests})
		}
		return writeJSON(f.IO.Out, doc)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "dry run: nothing sent\ntargets: %s\n", strings.Join(sess.Targets(), ", "))
	var rows [][]string
	for _, ph := range s.Phases {
		rows = append(rows, []string{ph.Name, ph.Pattern, ph.Offset.String(), ph.Duration.String(), strconv.Itoa(ph.Requests)})
	}
	fmt.Fprintln(w)
	report.WriteTableFrom(w, []string{"phase", "pattern", "starts", "lasts", "requests"}, rows, 2)
	fmt.Fprintf(w, "\n%d requests from %d client(s) over %v", len(s.Sends), s.Clients, s.Duration)
	if s.RaceMode != "" {
		fmt.Fprintf(w, ", races in %s mode", s.RaceMode)
	}
	if !s.Start.IsZero() {
		fmt.Fprintf(w, ", starting at %s", s.Start.Format(time.RFC3339Nano))
	}
	c := cfg.Caps
	_, err := fmt.Fprintf(w, "\nseed %d; caps %d requests, %v, %s\n", cfg.Seed, c.MaxRequests, c.MaxDuration, units.FormatRate(c.MaxRate))
	return err
}

// checkDryRunDoc is the --dry-run --json document of check: the suite's
// plan per rule (docs/schema/check-dry-run.schema.json). Policy is nil when
// it will come from the target's advertised headers.
type checkDryRunDoc struct {
	Schema    string            `json:"schema"`
	Tool      string            `json:"tool"`
	DryRun    bool              `json:"dry_run"`
	Targets   []string          `json:"targets"`
	Policy    *verify.Policy    `json:"policy"`
	Rules     []checkDryRunRule `json:"rules"`
	DurationS float64           `json:"duration_s"`
	Caps      map[string]any    `json:"caps"`
}

type checkDryRunRule struct {
	Rule      string            `json:"rule"`
	DurationS float64           `json:"duration_s"`
	Requests  int               `json:"requests"`
	Steps     []checkDryRunStep `json:"steps"`
	Skipped   map[string]string `json:"skipped"`
}

type checkDryRunStep struct {
	Check     string  `json:"check"`
	Name      string  `json:"name"`
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"`
}

// printCheckDryRun prints the suite's plan without sending anything.
func printCheckDryRun(f *Factory, g *GlobalOptions, sess *session.Session, p *verify.Policy, only, skip []string) error {
	plan := func(e verify.Endpoint) verify.Plan {
		return verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true})
	}
	if g.JSON {
		doc := checkDryRunDoc{Schema: verify.SchemaCheck, Tool: f.tool(), DryRun: true, Targets: sess.Targets(), Policy: p,
			Rules: []checkDryRunRule{}, Caps: capsDoc(sess.Config().Caps)}
		if p != nil {
			for _, e := range p.Endpoints {
				pl := plan(e)
				r := checkDryRunRule{Rule: e.String(), DurationS: pl.Duration().Seconds(), Requests: pl.Requests(),
					Steps: []checkDryRunStep{}, Skipped: map[string]string{}}
				for _, s := range pl.Steps {
					r.Steps = append(r.Steps, checkDryRunStep{s.Check, s.Name, s.Duration.Seconds(), s.Requests})
				}
				maps.Copy(r.Skipped, pl.Skipped)
				doc.Rules = append(doc.Rules, r)
			}
			doc.DurationS = verify.PlanDuration(*p, only, skip).Seconds()
		}
		return writeJSON(f.IO.Out, doc)
	}
	if p == nil {
		_, err := fmt.Fprintln(f.IO.Out, "plan: the policy will come from the target's advertised headers (preflight); declare one to see the plan")
		return err
	}
	var b strings.Builder
	for _, e := range p.Endpoints {
		pl := plan(e)
		fmt.Fprintf(&b, "rule: %s — %v, at most %d requests\n", e.String(), pl.Duration().Round(time.Millisecond), pl.Requests())
		for _, s := range pl.Steps {
			fmt.Fprintf(&b, "  %-10s %-10v %4d requests  %s\n", s.Check, s.Duration.Round(time.Millisecond), s.Requests, s.Name)
		}
		var skipped []string
		for c, why := range pl.Skipped {
			skipped = append(skipped, c+" ("+why+")")
		}
		slices.Sort(skipped)
		if len(skipped) > 0 {
			fmt.Fprintf(&b, "  skipped: %s\n", strings.Join(skipped, ", "))
		}
	}
	fmt.Fprintf(&b, "plan: %v\n", verify.PlanDuration(*p, only, skip).Round(time.Millisecond))
	_, err := io.WriteString(f.IO.Out, b.String())
	return err
}
