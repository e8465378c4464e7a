package verify

import (
	"fmt"
	"strings"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// String is the one description of a rule for people, in one line: every
// front end (terminal, HTML, Markdown, JUnit, watch's events and metrics)
// says a rule with it. Numbers are in the units package's display format
// (units.HumanRate, units.HumanDuration). Examples:
//
//	100 in any 1m0s
//	/api: 10 per 1s window (epoch-aligned) per ip
//	GET /*: rate 1/s, capacity 4
//
// A rule with neither a window nor a bucket says "rejects with STATUS" or
// "no limit".
func (e *Endpoint) String() string {
	var b strings.Builder
	if e.Method != "" || e.Path != "" {
		b.WriteString(strings.TrimSpace(e.Method+" "+cmp(e.Path, "/*")) + ": ")
	}
	switch {
	case e.IsBucket():
		fmt.Fprintf(&b, "rate %s, capacity %d", units.HumanRate(e.Rate), e.capacity())
	case e.Limit > 0 && e.WindowType == Fixed && e.Align == limiter.AlignTimer:
		fmt.Fprintf(&b, "%d per %s window (timer-aligned at phase %s ± %s)", e.Limit, units.HumanDuration(e.Window),
			units.HumanDuration(e.Phase), units.HumanDuration(e.PhaseSpread))
	case e.Limit > 0 && e.WindowType == Fixed:
		fmt.Fprintf(&b, "%d per %s window (%s-aligned)", e.Limit, units.HumanDuration(e.Window),
			cmp(string(e.Align), string(limiter.AlignFirstRequest)))
	case e.Limit > 0:
		fmt.Fprintf(&b, "%d in any %s", e.Limit, units.HumanDuration(e.Window))
	case e.Status != 0:
		fmt.Fprintf(&b, "rejects with %d", e.Status)
	default:
		b.WriteString("no limit")
	}
	if e.PerClient() {
		b.WriteString(" per " + e.Key)
	}
	if !e.Penalty.IsZero() {
		b.WriteString(", penalty " + e.Penalty.String())
	}
	return b.String()
}

// String describes the policy in one line: its rules' descriptions
// (Endpoint.String) joined by "; ", or "no policy" when it has none (or p is nil).
func (p *Policy) String() string {
	if p == nil || len(p.Endpoints) == 0 {
		return "no policy"
	}
	parts := make([]string, len(p.Endpoints))
	for i := range p.Endpoints {
		parts[i] = p.Endpoints[i].String()
	}
	return strings.Join(parts, "; ")
}
