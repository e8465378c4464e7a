package record

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merged is several agents' runs put on one timeline, as Merge returns it.
//
// All times in Results are nanoseconds since Start on the reference clock
// (the target's): Sched, Sent, Wrote, TTFB and Done have had their agent's
// clock offset removed, and Arrival (the server's own echo) needed no
// correction. A zero Sent, Wrote, TTFB or Done still means "did not happen".
//
// Clock offsets are estimates: each agent's corrected times are only known
// to within ± its ClockUncertaintyNS (see Uncertainty). Verdict code widens
// an accepted request's arrival bounds [Wrote, TTFB] by that amount on both
// sides; an Arrival echo is on the reference clock already and needs no
// widening for clock offset.
type Merged struct {
	// Start is the earliest agent start on the reference clock: the
	// minimum over the runs of Header.Start − the run's clock offset (see
	// Run.Clock). The zero time
	// when no runs were merged.
	Start time.Time
	// Agents describes the merged runs in argument order.
	Agents []AgentInfo
	// Results holds every run's results, sorted by send time (Sent, or
	// Sched for a result that was never sent), ties broken by agent order
	// then Seq. Each result's Agent is its agent's merged name, so Ref(r)
	// names it uniquely.
	Results []Result
	// Findings and Inferences are the runs' finding and inference lines,
	// in argument order, as read. Refs inside them use the names the
	// agents had in their own files.
	Findings   []json.RawMessage
	Inferences []json.RawMessage
	// Uncertainty maps an agent's merged name to its clock uncertainty in
	// nanoseconds (as Run.Clock gives it, never negative).
	Uncertainty map[string]int64
	// EpochOffsetNS and EpochUncertaintyNS place the reference clock under
	// a lone run whose times Merge kept as they were, the run's estimate
	// coming from its own answers (ClockSourceDate): at merged time t the
	// reference clock read Start + t − EpochOffsetNS, within
	// ± EpochUncertaintyNS. What needs the reference clock's own epoch
	// (windows aligned to it) places itself by them; relative times need
	// neither. Both are zero when the times are on the reference clock
	// already (a --time-ref measurement, several runs) or nothing is known
	// of it.
	EpochOffsetNS, EpochUncertaintyNS int64
	// ClockSource says how the reference clock was placed: "" when some
	// run had no estimate, so that its agent's own clock stood in for the
	// reference clock; else ClockSourceDate when some run's estimate came
	// from its answers, else ClockSourceTimeRef.
	ClockSource string
	// Warnings holds the runs' reader warnings, each prefixed with its
	// agent's merged name.
	Warnings []string
}

// AgentInfo describes one run of a Merged.
type AgentInfo struct {
	// Name is the agent's name in refs, unique within the merge: the
	// header's Agent, with "-2", "-3", … appended for the second and later
	// runs of one name; "aN" for an empty Agent, where N is the run's
	// 1-based position among Merge's arguments (see AgentNames).
	Name string
	// Run is the run's 0-based position among Merge's arguments.
	Run int
	// Header is the run's header as read, unchanged.
	Header Header
	// End is the run's end line, nil when the run was cut short.
	End *End
	// ShiftNS is what was added to this run's relative times to rebase
	// them onto Merged.Start: (Header.Start − offset) − Merged.Start, with
	// the run's offset from Run.Clock; never negative.
	ShiftNS int64
	// Results is how many results the run contributed.
	Results int
}

// Complete reports whether every merged run ended with ReasonCompleted.
// It is false when no runs were merged.
func (m *Merged) Complete() bool {
	if len(m.Agents) == 0 {
		return false
	}
	for _, a := range m.Agents {
		if a.End == nil || a.End.Reason != ReasonCompleted {
			return false
		}
	}
	return true
}

// Clock returns the clock offset of the run's agent (agent − reference, in
// nanoseconds), the uncertainty of that offset (its half-width, never
// negative) and where they come from, as Merge applies them:
//
//   - the Header's ClockOffsetNS and ClockUncertaintyNS when either is
//     nonzero (a measurement made before the run, against --time-ref):
//     source ClockSourceTimeRef;
//   - otherwise — both zero in the Header means "not measured" — the End's
//     values, when the End has any (a ClockSource or a nonzero value): the
//     estimate made after the run from its own responses' Date headers;
//   - otherwise 0, 0 and "": the agent's clock is taken as the reference.
//
// So a --time-ref measurement in the header wins over the end line's
// estimate. Clock reads the run only; it is safe for concurrent use while
// nobody modifies the run.
func (r *Run) Clock() (offsetNS, uncertaintyNS int64, source string) {
	h := r.Header
	switch {
	case h.ClockOffsetNS != 0 || h.ClockUncertaintyNS != 0:
		offsetNS, uncertaintyNS, source = h.ClockOffsetNS, h.ClockUncertaintyNS, ClockSourceTimeRef
	case r.End != nil && (r.End.ClockSource != "" || r.End.ClockOffsetNS != 0 || r.End.ClockUncertaintyNS != 0):
		offsetNS, uncertaintyNS, source = r.End.ClockOffsetNS, r.End.ClockUncertaintyNS, r.End.ClockSource
	}
	if uncertaintyNS < 0 {
		uncertaintyNS = -uncertaintyNS
	}
	return offsetNS, uncertaintyNS, source
}

// Merge puts the runs — one per agent, typically one per file — on one
// timeline. Each run's relative time t becomes Header.Start + t − offset
// on the reference clock, expressed relative to the merged Start, where
// offset is the run's clock offset as Run.Clock gives it (the header's
// --time-ref measurement, else the end line's estimate from the run's Date
// headers, else zero; a lone run uses only a --time-ref measurement, since
// it needs no alignment with another agent and a Date estimate would only
// blur its exact relative times); the results are sorted by send time and carry their
// agent's merged name (see AgentInfo.Name). A single run keeps its
// agent-clock times unchanged (its shift is zero), while its Arrival echoes
// move by its offset, since Start moved under them: a --time-ref
// measurement's, else by the lower end of the end line's estimate (offset
// − uncertainty), which puts each echo on the agent's clock no later than
// the arrival it stamps. The runs are not modified; every run must be
// non-nil.
func Merge(runs ...*Run) *Merged {
	m := &Merged{Uncertainty: make(map[string]int64, len(runs))}
	if len(runs) == 0 {
		return m
	}
	starts := make([]time.Time, len(runs))
	offsets := make([]int64, len(runs))
	uncs := make([]int64, len(runs))
	m.ClockSource = ClockSourceTimeRef
	for i, run := range runs {
		var source string
		offsets[i], uncs[i], source = run.Clock()
		switch {
		case source == "":
			m.ClockSource = ""
		case source == ClockSourceDate && m.ClockSource != "":
			m.ClockSource = ClockSourceDate
		}
		if len(runs) == 1 && source != ClockSourceTimeRef {
			// One agent needs no alignment with another, and its own
			// times are exact relative to each other: a Date-header
			// estimate (up to ±0.5 s) would only blur them. Only an
			// explicit --time-ref measurement moves a lone run; the
			// estimate places the reference clock's epoch instead.
			m.EpochOffsetNS, m.EpochUncertaintyNS = offsets[i], uncs[i]
			offsets[i], uncs[i] = 0, 0
		}
		starts[i] = run.Header.Start.Add(-time.Duration(offsets[i]))
		if i == 0 || starts[i].Before(m.Start) {
			m.Start = starts[i]
		}
	}
	names := agentNames(runs)
	total := 0
	for i, run := range runs {
		unc := uncs[i]
		m.Agents = append(m.Agents, AgentInfo{
			Name:    names[i],
			Run:     i,
			Header:  run.Header,
			End:     run.End,
			ShiftNS: int64(starts[i].Sub(m.Start)),
			Results: len(run.Results),
		})
		m.Uncertainty[names[i]] = unc
		m.Findings = append(m.Findings, run.Findings...)
		m.Inferences = append(m.Inferences, run.Inferences...)
		for _, w := range run.Warnings {
			m.Warnings = append(m.Warnings, names[i]+": "+w)
		}
		total += len(run.Results)
	}

	// Sort small keys, then copy the results once in order.
	type item struct {
		key      int64
		run, idx int
	}
	items := make([]item, 0, total)
	for i, run := range runs {
		shift := m.Agents[i].ShiftNS
		for j := range run.Results {
			r := &run.Results[j]
			k := r.Sent
			if k == 0 {
				k = r.Sched
			}
			items = append(items, item{key: k + shift, run: i, idx: j})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.run, b.run),
			cmp.Compare(runs[a.run].Results[a.idx].Seq, runs[b.run].Results[b.idx].Seq),
			cmp.Compare(a.idx, b.idx))
	})
	// A lone run's echoes, stamped on the reference clock, go onto its
	// agent's clock at the earliest its estimate allows: a lower bound of
	// each arrival (every answer's own bounds hold the offset's).
	echoShift := offsets
	if len(runs) == 1 && (m.EpochOffsetNS != 0 || m.EpochUncertaintyNS != 0) {
		echoShift = []int64{m.EpochOffsetNS - m.EpochUncertaintyNS}
	}
	m.Results = make([]Result, len(items))
	for n, it := range items {
		m.Results[n] = rebase(runs[it.run].Results[it.idx], m.Agents[it.run].ShiftNS,
			echoShift[it.run], names[it.run])
	}
	return m
}

// rebase returns r with its times moved by shift (and its Arrival by shift
// + offset, since the echo was on the reference clock) and its Agent set.
func rebase(r Result, shift, offset int64, agent string) Result {
	r.Agent = agent
	r.Sched += shift
	for _, t := range []*int64{&r.Sent, &r.Wrote, &r.TTFB, &r.Done} {
		if *t != 0 {
			*t += shift
		}
	}
	if r.Arrival != nil {
		a := *r.Arrival + shift + offset
		r.Arrival = &a
	}
	return r
}

// AgentNames returns the merged name of each agent, given the agent names
// of the runs' headers in file order. Names are kept: a name set once is
// kept as it is; a name several runs share is kept by the first of them and
// becomes NAME-2, NAME-3, … for the next ones (in file order, skipping any
// name another run has); an empty name becomes "aN" (N the file's position
// from 1, suffixed "-2", "-3" … should that collide).
func AgentNames(agents []string) []string {
	used := make(map[string]bool, len(agents))
	for _, n := range agents {
		if n != "" {
			used[n] = true
		}
	}
	names := make([]string, len(agents))
	seen := make(map[string]int, len(agents))
	for i, n := range agents {
		if n == "" {
			continue
		}
		seen[n]++
		if seen[n] == 1 {
			names[i] = n
			continue
		}
		k := seen[n]
		c := fmt.Sprintf("%s-%d", n, k)
		for ; used[c]; k++ {
			c = fmt.Sprintf("%s-%d", n, k+1)
		}
		seen[n] = k
		names[i] = c
		used[c] = true
	}
	for i := range agents {
		if names[i] != "" {
			continue
		}
		n := fmt.Sprintf("a%d", i+1)
		for k := 2; used[n]; k++ {
			n = fmt.Sprintf("a%d-%d", i+1, k)
		}
		names[i] = n
		used[n] = true
	}
	return names
}

// agentNames names each run's agent uniquely (see AgentInfo.Name).
func agentNames(runs []*Run) []string {
	agents := make([]string, len(runs))
	for i, run := range runs {
		agents[i] = run.Header.Agent
	}
	return AgentNames(agents)
}

// Ref returns the reference of r used in findings' evidence: "agent:seq".
func Ref(r Result) string {
	return r.Agent + ":" + strconv.FormatInt(r.Seq, 10)
}

// ParseRef splits a reference made by Ref into its agent and seq. The agent
// is everything before the last colon, so it may itself contain colons.
func ParseRef(ref string) (agent string, seq int64, err error) {
	i := strings.LastIndexByte(ref, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("record: ref %q: %w", ref, errors.New("want agent:seq"))
	}
	seq, err = strconv.ParseInt(ref[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("record: ref %q: want agent:seq: %w", ref, err)
	}
	return ref[:i], seq, nil
}
