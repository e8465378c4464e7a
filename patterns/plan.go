package patterns

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"go.yaml.in/yaml/v3"
)

// PlanVersion is the plan file version this package reads and writes.
const PlanVersion = 1

// maxPlanBytes bounds a plan file.
const maxPlanBytes = 1 << 20

// Plan is a traffic plan: phases played one after another. It is plain
// data; its keys are the names of run's pattern flags, so a plan is what
// `rlprobe run --pattern …` would build, several times over:
//
//	version: 1
//	phases:
//	  - pattern: burst
//	    count: 8
//	  - pause: 2s
//	  - pattern: steady
//	    rate: 5/s
//	    duration: 10s
//
// Load one with LoadPlan, check it with Validate, turn it into sends with
// Schedule. A Plan is safe for concurrent use by readers.
type Plan struct {
	// Version must be PlanVersion.
	Version int `json:"version" yaml:"version"`
	// Phases are played in order.
	Phases []Phase `json:"phases" yaml:"phases"`

	src   string     // source name for messages ("" for plans built in code)
	lines []phaseSrc // per phase, where its keys are in the source
}

// phaseSrc is where a phase and its keys sit in the source file.
type phaseSrc struct {
	line int
	keys map[string]int // key → line
}

// Phase is one phase of a plan: a pattern with its parameters, or a pause.
// Exactly one of Pattern and Pause is set. Which parameters a pattern takes
// (the others must be unset):
//
//	steady    rate, duration
//	burst     count, [spread]
//	edge      count, gap, and at or period [+ phase]
//	recovery  every, span
//	race      count, [race-mode]
//	ramp      from, to, duration
//
// Every pattern also takes clients (each client plays the whole pattern;
// default 1) and name; all but race take jitter.
type Phase struct {
	// Name labels the phase's requests (record field "phase"); default the
	// pattern name, numbered (burst#2) when a pattern occurs more than once.
	Name string `json:"name,omitempty" yaml:"name"`
	// Pattern is steady, burst, edge, recovery, race or ramp.
	Pattern string `json:"pattern,omitempty" yaml:"pattern"`
	// Pause, when set instead of Pattern, is idle time before the next phase.
	Pause Duration `json:"pause,omitempty" yaml:"pause"`
	// Clients is how many client identities play the pattern, each the
	// whole of it; 0 means 1.
	Clients int `json:"clients,omitempty" yaml:"clients"`
	// Rate (steady) in requests per second.
	Rate Rate `json:"rate,omitempty" yaml:"rate"`
	// Duration (steady, ramp).
	Duration Duration `json:"duration,omitempty" yaml:"duration"`
	// Count (burst, edge: per side; race: per client).
	Count int `json:"count,omitempty" yaml:"count"`
	// Spread (burst): spread the burst evenly over this long; 0 = at once.
	Spread Duration `json:"spread,omitempty" yaml:"spread"`
	// At (edge): where the window edge is — a Go duration from the start of
	// the phase (2s), or a wall-clock instant (RFC 3339, or a time of day
	// such as 12:00:05).
	At string `json:"at,omitempty" yaml:"at"`
	// Period and EdgePhase (edge): aim at the next edge of windows of
	// length Period starting EdgePhase past each multiple of Period since
	// the Unix epoch.
	Period    Duration `json:"period,omitempty" yaml:"period"`
	EdgePhase Duration `json:"phase,omitempty" yaml:"phase"`
	// Gap (edge): time between the group before the edge and the group
	// after it; each is gap/2 from the edge.
	Gap Duration `json:"gap,omitempty" yaml:"gap"`
	// Every and Span (recovery): one request every Every for Span.
	Every Duration `json:"every,omitempty" yaml:"every"`
	Span  Duration `json:"span,omitempty" yaml:"span"`
	// RaceMode (race): barrier (default), last-byte or single-packet.
	RaceMode RaceMode `json:"race-mode,omitempty" yaml:"race-mode"`
	// From and To (ramp): the rates at the start and the end, requests per
	// second.
	From Rate `json:"from,omitempty" yaml:"from"`
	To   Rate `json:"to,omitempty" yaml:"to"`
	// Jitter delays each request by a seeded pseudo-random amount in
	// [0, Jitter); not for race.
	Jitter Duration `json:"jitter,omitempty" yaml:"jitter"`
}

// phaseKeys lists every key of a phase, in the order problems are reported.
var phaseKeys = []string{"name", "pattern", "pause", "clients", "rate", "duration", "count", "spread",
	"at", "period", "phase", "gap", "every", "span", "race-mode", "from", "to", "jitter"}

// patternKeys lists, per pattern, the keys it requires and those it allows.
var patternKeys = map[string]struct{ required, optional []string }{
	PatternSteady:   {[]string{"rate", "duration"}, []string{"jitter"}},
	PatternBurst:    {[]string{"count"}, []string{"spread", "jitter"}},
	PatternEdge:     {[]string{"count", "gap"}, []string{"at", "period", "phase", "jitter"}},
	PatternRecovery: {[]string{"every", "span"}, []string{"jitter"}},
	PatternRace:     {[]string{"count"}, []string{"race-mode"}},
	PatternRamp:     {[]string{"from", "to", "duration"}, []string{"jitter"}},
}

// isSet reports whether key holds a non-zero value.
func (p *Phase) isSet(key string) bool {
	switch key {
	case "name":
		return p.Name != ""
	case "pattern":
		return p.Pattern != ""
	case "pause":
		return p.Pause != 0
	case "clients":
		return p.Clients != 0
	case "rate":
		return p.Rate != 0
	case "duration":
		return p.Duration != 0
	case "count":
		return p.Count != 0
	case "spread":
		return p.Spread != 0
	case "at":
		return p.At != ""
	case "period":
		return p.Period != 0
	case "phase":
		return p.EdgePhase != 0
	case "gap":
		return p.Gap != 0
	case "every":
		return p.Every != 0
	case "span":
		return p.Span != 0
	case "race-mode":
		return p.RaceMode != ""
	case "from":
		return p.From != 0
	case "to":
		return p.To != 0
	case "jitter":
		return p.Jitter != 0
	}
	return false
}

// planError is the error of the plan name's problems: a *problem.Error
// "patterns: invalid plan" whose problems each name the file (and their
// phase as their Field).
func planError(name string, probs []problem.Problem) error {
	for i := range probs {
		probs[i].File = name
	}
	return &problem.Error{What: "patterns: invalid plan", Problems: probs}
}

// LoadPlan reads a plan in YAML or JSON (JSON is read as YAML, so both get
// line numbers) from r, where name is the file name used in messages.
// Unknown keys, bad values, duplicate keys and everything Validate checks
// are errors; all are reported at once in a *problem.Error (see planError). On error the plan
// is nil.
func LoadPlan(r io.Reader, name string) (*Plan, error) {
	if name == "" {
		name = "plan"
	}
	data, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("patterns: read plan %s: %w", name, err)
	}
	if len(data) > maxPlanBytes {
		return nil, planError(name, []problem.Problem{{Message: fmt.Sprintf("larger than %d bytes", maxPlanBytes)}})
	}
	// First pass: the node tree, for syntax errors and line numbers.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, planError(name, yamlProblems(err))
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, planError(name, []problem.Problem{{Message: "the plan is empty: it needs version: 1 and phases"}})
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, planError(name, []problem.Problem{{Line: doc.Line, Message: "a plan must be a mapping with version and phases"}})
	}
	// Second pass: the struct, with known-fields checking; type errors are
	// collected, not fatal.
	p := &Plan{src: name}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var problems []problem.Problem
	if err := dec.Decode(p); err != nil {
		problems = yamlProblems(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		problems = append(problems, problem.Problem{Line: extra.Line, Message: "a plan file holds one YAML document; found another"})
	}
	p.lines = phaseLines(doc)
	if len(problems) > 0 {
		return nil, planError(name, problems)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

var (
	yamlLineRE    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownKeyRE  = regexp.MustCompile(`^field (\S+) not found in type patterns\.(\w+)$`)
	cannotUnmarRE = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

// yamlProblems turns a yaml error into problems with line numbers and
// messages in the plan's own words.
func yamlProblems(err error) []problem.Problem {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make([]problem.Problem, 0, len(msgs))
	for _, m := range msgs {
		var pr problem.Problem
		if sub := yamlLineRE.FindStringSubmatch(m); sub != nil {
			pr.Line, _ = strconv.Atoi(sub[1])
			m = sub[2]
		}
		m = strings.TrimPrefix(m, "yaml: ")
		if sub := unknownKeyRE.FindStringSubmatch(m); sub != nil {
			known := "version, phases"
			if sub[2] == "Phase" {
				known = strings.Join(phaseKeys, ", ")
			}
			m = fmt.Sprintf("unknown key %q (known keys: %s)", sub[1], known)
		} else if sub := cannotUnmarRE.FindStringSubmatch(m); sub != nil {
			want := sub[3]
			switch want {
			case "int":
				want = "a whole number"
			case "string":
				want = "a string"
			case "[]patterns.Phase":
				want = "a list of phases"
			case "patterns.Phase":
				want = "a phase (a mapping with pattern or pause)"
			case "patterns.Plan":
				want = "a mapping with version and phases"
			}
			m = fmt.Sprintf("%q is not %s", sub[2], want)
		}
		pr.Message = m
		out = append(out, pr)
	}
	return out
}

// phaseLines finds each phase's line and the lines of its keys.
func phaseLines(doc *yaml.Node) []phaseSrc {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "phases" || doc.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		var out []phaseSrc
		for _, item := range doc.Content[i+1].Content {
			src := phaseSrc{line: item.Line, keys: map[string]int{}}
			if item.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(item.Content); j += 2 {
					src.keys[item.Content[j].Value] = item.Content[j].Line
				}
			}
			out = append(out, src)
		}
		return out
	}
	return nil
}

// lineOf returns the line of phase i's key (or of the phase), 0 if unknown.
func (p *Plan) lineOf(i int, key string) int {
	if i >= len(p.lines) {
		return 0
	}
	if l, ok := p.lines[i].keys[key]; ok && key != "" {
		return l
	}
	return p.lines[i].line
}

// has reports whether phase i sets key: present in the source, or non-zero.
func (p *Plan) has(i int, key string) bool {
	if i < len(p.lines) {
		if _, ok := p.lines[i].keys[key]; ok {
			return true
		}
	}
	return p.Phases[i].isSet(key)
}

// Validate checks the plan and reports every problem at once in a
// *problem.Error (see planError): the version, that each phase is a pattern or a pause, that
// each pattern has its required keys and no keys it does not take, that
// values are in range, that all races share one race mode, that phase
// names are unique, and that the plan holds at most MaxSends requests
// (MaxStreamSends when it is Streamable).
// Wall-clock edges (at as a time, or period) are checked for form only;
// whether they fit is known when Schedule is given the start time.
func (p *Plan) Validate() error {
	name := p.src
	if name == "" {
		name = "plan"
	}
	var probs []problem.Problem
	add := func(line int, field, format string, a ...any) {
		probs = append(probs, problem.Problem{Line: line, Field: field, Message: fmt.Sprintf(format, a...)})
	}
	switch p.Version {
	case PlanVersion:
	case 0:
		add(0, "", "version is missing: write version: %d", PlanVersion)
	default:
		add(0, "", "version %d is not supported: this rlprobe reads version %d", p.Version, PlanVersion)
	}
	if len(p.Phases) == 0 {
		add(0, "phases", "the plan needs at least one phase")
	}
	var mode RaceMode
	modeLine := 0
	total := 0.0
	names := p.phaseNames()
	seenNames := map[string]int{}
	for i := range p.Phases {
		ph := &p.Phases[i]
		label := fmt.Sprintf("phase %d", i+1)
		if ph.Pattern != "" {
			label += " (" + ph.Pattern + ")"
		}
		line := p.lineOf(i, "")
		if prev, dup := seenNames[names[i]]; dup {
			add(p.lineOf(i, "name"), label, "name %q is already used by phase %d", names[i], prev+1)
		}
		seenNames[names[i]] = i
		if ph.Pattern == "" {
			probs = append(probs, p.checkPause(i, label)...)
			continue
		}
		before := len(probs)
		keyProbs, known := p.checkKeys(i, label)
		probs = append(probs, keyProbs...)
		if !known {
			continue
		}
		if ph.Clients < 0 || (p.has(i, "clients") && ph.Clients == 0) {
			add(p.lineOf(i, "clients"), label, "clients must be at least 1, not %d", ph.Clients)
		}
		if ph.Jitter < 0 {
			add(p.lineOf(i, "jitter"), label, "jitter must not be negative, not %v", time.Duration(ph.Jitter))
		}
		if ph.Pattern == PatternEdge {
			probs = append(probs, p.checkEdge(i, label)...)
		}
		if ph.Pattern == PatternRace {
			m := ph.RaceMode
			if m == "" {
				m = Barrier
			}
			if mode != "" && m != mode && slices.Contains(RaceModes, m) {
				add(p.lineOf(i, "race-mode"), label, "race-mode %s differs from %s (line %d); one plan has one race mode", m, mode, modeLine)
			} else if mode == "" {
				mode, modeLine = m, p.lineOf(i, "race-mode")
			}
		}
		if len(probs) > before {
			continue // the constructor would only restate these
		}
		// Values: build the phase (edges at a relative offset stand in for
		// wall-clock ones) and report what the constructor refuses. A
		// phase that can stream is counted in closed form, not built.
		refused := func(err error) {
			var pe *ParamError
			if errors.As(err, &pe) {
				add(p.lineOf(i, pe.Param), label, "%s %s", pe.Param, pe.Msg)
			} else {
				add(line, label, "%v", err)
			}
		}
		if ph.streams() {
			if g, err := ph.segment("", 0); err != nil {
				refused(err)
			} else {
				total += float64(g.count())
			}
			continue
		}
		if s, err := ph.build(time.Time{}, 0, true); err != nil {
			refused(err)
		} else {
			total += float64(len(s.Sends))
		}
	}
	switch {
	case p.Streamable() && total > MaxStreamSends:
		add(0, "", "the plan holds %.0f requests, more than the %d one streamed schedule may hold", total, int64(MaxStreamSends))
	case !p.Streamable() && total > MaxSends:
		add(0, "", "the plan holds %.0f requests, more than the %d one schedule may hold", total, MaxSends)
	}
	if len(probs) > 0 {
		return planError(name, dedupe(probs))
	}
	return nil
}

// checkPause checks phase i, which has no pattern: a positive pause and
// no pattern keys.
func (p *Plan) checkPause(i int, label string) []problem.Problem {
	ph := &p.Phases[i]
	var probs []problem.Problem
	if !p.has(i, "pause") {
		return []problem.Problem{{Line: p.lineOf(i, ""), Field: label, Message: fmt.Sprintf("set pattern (%s) or pause", strings.Join(Patterns, ", "))}}
	}
	if ph.Pause <= 0 {
		probs = append(probs, problem.Problem{Line: p.lineOf(i, "pause"), Field: label, Message: fmt.Sprintf("pause must be positive, not %v", time.Duration(ph.Pause))})
	}
	for _, k := range phaseKeys {
		if k != "pause" && k != "name" && p.has(i, k) {
			probs = append(probs, problem.Problem{Line: p.lineOf(i, k), Field: label, Message: k + " does not apply to a pause"})
		}
	}
	return probs
}

// checkKeys checks that phase i's pattern is known (known false when it
// is not) and that it has the keys its pattern requires and no other.
func (p *Plan) checkKeys(i int, label string) (probs []problem.Problem, known bool) {
	ph := &p.Phases[i]
	keys, ok := patternKeys[ph.Pattern]
	if !ok {
		return []problem.Problem{{Line: p.lineOf(i, "pattern"), Field: label, Message: fmt.Sprintf("pattern %q is not one of %s", ph.Pattern, strings.Join(Patterns, ", "))}}, false
	}
	for _, k := range phaseKeys {
		switch {
		case k == "name" || k == "pattern" || k == "clients":
		case slices.Contains(keys.required, k):
			if !p.has(i, k) {
				probs = append(probs, problem.Problem{Line: p.lineOf(i, ""), Field: label, Message: k + " is required"})
			}
		case slices.Contains(keys.optional, k):
		case p.has(i, k):
			probs = append(probs, problem.Problem{Line: p.lineOf(i, k), Field: label, Message: fmt.Sprintf("%s does not apply to %s (it takes %s)", k, ph.Pattern,
				strings.Join(append(slices.Clone(keys.required), keys.optional...), ", "))})
		}
	}
	return probs, true
}

// dedupe drops repeated problems (a constructor may restate a key check).
func dedupe(ps []problem.Problem) []problem.Problem {
	var out []problem.Problem
	for _, p := range ps {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// checkEdge checks an edge phase's at / period / phase keys.
func (p *Plan) checkEdge(i int, label string) []problem.Problem {
	ph := &p.Phases[i]
	var probs []problem.Problem
	add := func(key, format string, a ...any) {
		probs = append(probs, problem.Problem{Line: p.lineOf(i, key), Field: label, Message: fmt.Sprintf(format, a...)})
	}
	hasAt, hasPeriod := p.has(i, "at"), p.has(i, "period")
	switch {
	case hasAt && hasPeriod:
		add("period", "set at or period, not both")
	case !hasAt && !hasPeriod:
		add("", "set at (where the window edge is) or period (the window length)")
	case hasAt:
		if p.has(i, "phase") {
			add("phase", "phase goes with period, not with at")
		}
		if _, _, err := parseAt(ph.At, time.Time{}); err != nil {
			add("at", "at %v", err)
		}
	case hasPeriod:
		if ph.Period <= 0 {
			add("period", "period must be positive, not %v", time.Duration(ph.Period))
		} else if ph.EdgePhase < 0 || ph.EdgePhase >= ph.Period {
			add("phase", "phase must be in [0, period), not %v", time.Duration(ph.EdgePhase))
		}
	}
	return probs
}

// parseAt reads an edge's at: a Go duration (relative, rel = true) or a
// wall-clock instant. Its error is a bare message ("\"x\" has no unit: ..."),
// which its callers place under the at key.
func parseAt(s string, now time.Time) (d time.Duration, abs time.Time, err error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, time.Time{}, fmt.Errorf("%q must not be negative", s)
		}
		return d, time.Time{}, nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, time.Time{}, fmt.Errorf("%q has no unit: write a duration from the start of the phase (%ss) or a time (12:00:05)", s, s)
	}
	t, err := ParseTime(s, now)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("%q is neither a duration (2s) nor a time (RFC 3339 or 12:00:05)", s)
	}
	return 0, t, nil
}

// phaseNames returns each phase's effective name: its Name, else its
// pattern, numbered (burst#2) when the pattern occurs more than once.
func (p *Plan) phaseNames() []string {
	count := map[string]int{}
	for _, ph := range p.Phases {
		if ph.Name == "" {
			count[ph.kind()]++
		}
	}
	seen := map[string]int{}
	names := make([]string, len(p.Phases))
	for i, ph := range p.Phases {
		switch {
		case ph.Name != "":
			names[i] = ph.Name
		case count[ph.kind()] > 1:
			seen[ph.kind()]++
			names[i] = fmt.Sprintf("%s#%d", ph.kind(), seen[ph.kind()])
		default:
			names[i] = ph.kind()
		}
	}
	return names
}

func (ph *Phase) kind() string {
	if ph.Pattern == "" {
		return PatternPause
	}
	return ph.Pattern
}

// build makes the schedule of one phase for a single client (then
// PerClient and Jitter are applied by the caller). phaseStart is the
// wall-clock time the phase begins (needed only by wall-clock edges);
// validating, the edge of a wall-clock phase is put right after gap/2.
func (ph *Phase) build(phaseStart time.Time, seed uint64, validating bool) (Schedule, error) {
	var s Schedule
	var err error
	switch ph.Pattern {
	case "":
		return Pause(time.Duration(ph.Pause))
	case PatternSteady:
		s, err = Steady(float64(ph.Rate), time.Duration(ph.Duration))
	case PatternBurst:
		s, err = Burst(ph.Count, time.Duration(ph.Spread))
	case PatternEdge:
		gap := time.Duration(ph.Gap)
		var edge time.Duration
		edge, err = ph.edgeOffset(phaseStart, validating)
		if err == nil {
			s, err = Edge(ph.Count, edge, gap)
		}
	case PatternRecovery:
		s, err = Recovery(time.Duration(ph.Every), time.Duration(ph.Span))
	case PatternRace:
		s, err = Race(1, ph.Count, ph.RaceMode)
	case PatternRamp:
		s, err = Ramp(float64(ph.From), float64(ph.To), time.Duration(ph.Duration))
	default:
		return Schedule{}, fmt.Errorf("patterns: unknown pattern %q", ph.Pattern)
	}
	if err != nil {
		return Schedule{}, err
	}
	clients := max(ph.Clients, 1)
	if s, err = s.PerClient(clients); err != nil {
		return Schedule{}, err
	}
	return s.Jitter(time.Duration(ph.Jitter), seed)
}

// edgeOffset is where an edge phase's window edge falls, from the start of
// the phase.
func (ph *Phase) edgeOffset(phaseStart time.Time, validating bool) (time.Duration, error) {
	gap := time.Duration(ph.Gap)
	half := gap / 2
	if ph.At != "" {
		rel, abs, err := parseAt(ph.At, phaseStart)
		if err != nil {
			return 0, &ParamError{Pattern: PatternEdge, Param: "at", Msg: err.Error()}
		}
		if abs.IsZero() {
			return rel, nil
		}
		if validating {
			return half, nil
		}
		if phaseStart.IsZero() {
			return 0, &ParamError{Pattern: PatternEdge, Param: "at", Msg: "is a wall-clock time, but the schedule has no start time"}
		}
		off := abs.Sub(phaseStart)
		if off < half {
			return 0, &ParamError{Pattern: PatternEdge, Param: "at",
				Msg: fmt.Sprintf("%s is too soon: the phase starts at %s and the first requests are due gap/2 = %v before the edge",
					abs.Format(time.RFC3339Nano), phaseStart.Format(time.RFC3339Nano), half)}
		}
		return off, nil
	}
	period := time.Duration(ph.Period)
	if period <= 0 {
		return 0, &ParamError{Pattern: PatternEdge, Param: "period", Msg: fmt.Sprintf("must be positive, not %v", period)}
	}
	if validating {
		return half, nil
	}
	if phaseStart.IsZero() {
		return 0, &ParamError{Pattern: PatternEdge, Param: "period", Msg: "aims at the wall clock, but the schedule has no start time"}
	}
	edge := NextEdge(phaseStart.Add(half), period, time.Duration(ph.EdgePhase))
	return edge.Sub(phaseStart), nil
}

// clockAnchored reports whether some phase aims at the wall clock.
func (p *Plan) clockAnchored() bool {
	for _, ph := range p.Phases {
		if ph.Pattern != PatternEdge {
			continue
		}
		if ph.Period != 0 {
			return true
		}
		if ph.At != "" {
			if _, abs, err := parseAt(ph.At, time.Time{}); err == nil && !abs.IsZero() {
				return true
			}
		}
	}
	return false
}

// NeedsStart reports whether the plan aims at the wall clock (an edge with
// period, or with at as a time), so Schedule needs the start time.
func (p *Plan) NeedsStart() bool { return p.clockAnchored() }

// Schedule validates the plan and builds its schedule. seed drives jitter
// (phase k uses seed+k, so phases differ); the same plan, seed and start
// give the same schedule. start is the wall-clock time at which offset 0 is
// due: it is required when NeedsStart reports true, and then set as the
// schedule's Start; otherwise it is ignored and Start stays zero.
func (p *Plan) Schedule(seed uint64, start time.Time) (Schedule, error) {
	if err := p.Validate(); err != nil {
		return Schedule{}, err
	}
	anchored := p.clockAnchored()
	if anchored && start.IsZero() {
		return Schedule{}, errors.New("patterns: the plan aims at the wall clock (edge with period or a time): it needs a start time")
	}
	names := p.phaseNames()
	parts := make([]Schedule, 0, len(p.Phases))
	var cursor time.Duration
	for i := range p.Phases {
		ph := &p.Phases[i]
		var phaseStart time.Time
		if anchored {
			phaseStart = start.Add(cursor)
		}
		s, err := ph.build(phaseStart, seed+uint64(i), false)
		if err != nil {
			return Schedule{}, err
		}
		if ph.Pattern != "" {
			s = s.Named(names[i])
		}
		parts = append(parts, s)
		cursor += s.Duration
	}
	s, err := Sequence(parts...)
	if err != nil {
		return Schedule{}, err
	}
	if anchored {
		s.Start = start
	}
	return s, nil
}

// MaxRate returns the highest sustained rate the plan asks for, in requests
// per second over all clients: the largest steady rate or ramp end point,
// or recovery's 1/every, times the phase's clients. Bursts, edges and races
// are deliberately instantaneous and do not count. It is what a --max-rate
// guard is compared with before anything is sent.
func (p *Plan) MaxRate() float64 {
	peak := 0.0
	for _, ph := range p.Phases {
		c := float64(max(ph.Clients, 1))
		r := 0.0
		switch ph.Pattern {
		case PatternSteady:
			r = float64(ph.Rate)
		case PatternRamp:
			r = math.Max(float64(ph.From), float64(ph.To))
		case PatternRecovery:
			if ph.Every > 0 {
				r = float64(time.Second) / float64(ph.Every)
			}
		}
		peak = math.Max(peak, r*c)
	}
	return peak
}

// streams reports whether the phase can be streamed: a pause, or a steady,
// ramp or recovery without jitter (jitter re-sorts the sends, which takes
// them all in memory).
func (ph *Phase) streams() bool {
	switch ph.Pattern {
	case "":
		return true
	case PatternSteady, PatternRamp, PatternRecovery:
		return ph.Jitter == 0
	}
	return false
}

// segment returns the closed form of a streamable pattern phase (not a
// pause), due offset into the schedule, its sends named name.
func (ph *Phase) segment(name string, offset time.Duration) (segment, error) {
	var sh shape
	var err error
	switch ph.Pattern {
	case PatternSteady:
		sh, err = steadyShape(float64(ph.Rate), time.Duration(ph.Duration))
	case PatternRamp:
		sh, err = rampShape(float64(ph.From), float64(ph.To), time.Duration(ph.Duration))
	case PatternRecovery:
		sh, err = recoveryShape(time.Duration(ph.Every), time.Duration(ph.Span))
	default:
		return segment{}, fmt.Errorf("patterns: %s cannot be streamed", ph.kind())
	}
	if err != nil {
		return segment{}, err
	}
	clients := max(ph.Clients, 1)
	if float64(sh.n)*float64(clients) > MaxStreamSends {
		return segment{}, tooManyStream(ph.Pattern, float64(sh.n)*float64(clients))
	}
	return segment{sh: sh, clients: clients, offset: offset, phase: name}, nil
}

// duration returns a streamable pattern phase's planned length.
func (ph *Phase) duration() time.Duration {
	if ph.Pattern == PatternRecovery {
		return time.Duration(ph.Span)
	}
	return time.Duration(ph.Duration)
}

// Streamable reports whether every phase of the plan is a steady, ramp or
// recovery without jitter, or a pause: whether Streamed makes a streamed
// schedule.
func (p *Plan) Streamable() bool {
	for i := range p.Phases {
		if !p.Phases[i].streams() {
			return false
		}
	}
	return len(p.Phases) > 0
}

// Streamed is Schedule for a plan that is Streamable, with the sends
// produced on demand (Schedule.All) instead of held in memory: the same
// sends, phases, clients and duration Schedule gives, and no MaxSends
// ceiling. A plan that is not Streamable gets Schedule's schedule. seed
// and start are as for Schedule.
func (p *Plan) Streamed(seed uint64, start time.Time) (Schedule, error) {
	if !p.Streamable() {
		return p.Schedule(seed, start)
	}
	if err := p.Validate(); err != nil {
		return Schedule{}, err
	}
	names := p.phaseNames()
	out := Schedule{stream: []segment{}}
	var cursor time.Duration
	for i := range p.Phases {
		ph := &p.Phases[i]
		if ph.Pattern == "" {
			d := time.Duration(ph.Pause)
			out.Phases = append(out.Phases, PhaseInfo{Name: PatternPause, Pattern: PatternPause, Offset: cursor, Duration: d})
			cursor += d
			continue
		}
		g, err := ph.segment(names[i], cursor)
		if err != nil {
			return Schedule{}, err
		}
		d := ph.duration()
		out.stream = append(out.stream, g)
		out.Phases = append(out.Phases, PhaseInfo{Name: names[i], Pattern: ph.Pattern, Offset: cursor, Duration: d, Requests: int(g.count())})
		out.Clients = max(out.Clients, g.clients)
		cursor += d
	}
	out.Duration = cursor
	return out, nil
}
