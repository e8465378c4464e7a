package cli

import (
	"fmt"
	"io"
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

// printRunDryRun prints the plan of a run and its duration; nothing is sent.
func printRunDryRun(f *Factory, g *GlobalOptions, sess *session.Session, plan *patterns.Plan, s patterns.Schedule) error {
	cfg := sess.Config()
	if g.JSON {
		return writeJSON(f.IO.Out, sess.RunDryRun(plan, s))
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

// printCheckDryRun prints the suite's plan without sending anything.
func printCheckDryRun(f *Factory, g *GlobalOptions, sess *session.Session, p *verify.Policy, only, skip []string) error {
	if g.JSON {
		return writeJSON(f.IO.Out, sess.CheckDryRun(p, only, skip))
	}
	if p == nil {
		_, err := fmt.Fprintln(f.IO.Out, "plan: the policy will come from the target's advertised headers (preflight); declare one to see the plan")
		return err
	}
	var b strings.Builder
	for _, e := range p.Endpoints {
		pl := verify.PlanSuite(e, verify.SuiteOptions{Only: only, Skip: skip, Identities: 1, Spoofing: true})
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
