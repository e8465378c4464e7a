package verify

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
)

// Document schemas.
const (
	SchemaCheck   = "rlprobe.check/v1"
	SchemaAnalyze = "rlprobe.analyze/v1"
)

// Verdicts.
const (
	VerdictPass       = "pass"
	VerdictFail       = "fail"
	VerdictIncomplete = "incomplete"
)

// Report is the check / analyze document of contract.md. Verdict is fail
// when a certain finding is at or above the fail-on severity, else
// incomplete when the run did not finish, else pass; Pass is Verdict ==
// "pass".
type Report struct {
	Schema string `json:"schema"`
	Tool   string `json:"tool"`
	// Time is when the verdict was given (Options.Time).
	Time     time.Time `json:"time"`
	Verdict  string    `json:"verdict"`
	Complete bool      `json:"complete"`
	Pass     bool      `json:"pass"`
	Targets  []string  `json:"targets"`
	Policy   Policy    `json:"policy"`
	Findings []Finding `json:"findings"`
	// Notes say what the findings alone do not: e.g. that a per-client key
	// was not tested, the records showing one identity only.
	Notes      []string `json:"notes,omitempty"`
	RecordFile string   `json:"record_file,omitempty"`

	failOn Severity
}

// Failed reports whether a certain finding is at or above the fail-on
// severity: what makes the command exit 1.
func (r *Report) Failed() bool { return r.Verdict == VerdictFail }

// FailOn returns the severity the report was judged with.
func (r *Report) FailOn() Severity { return r.failOn }

// Options configure Analyze. The zero value analyzes with --fail-on error
// under the analyze schema.
type Options struct {
	// Schema is SchemaCheck or SchemaAnalyze (the default).
	Schema string
	// Tool is the document's "tool" ("rlprobe vX.Y.Z").
	Tool string
	// FailOn is the least severity of a certain finding that fails the
	// verdict; "" means SeverityError.
	FailOn Severity
	// Targets are the target URLs; nil means those of the merged runs.
	Targets []string
	// RecordFile names the record file(s) in the document.
	RecordFile string
	// Incomplete marks the verdict incomplete (the check suite did not
	// finish); a merged run that did not complete does so too.
	Incomplete bool
	// Time is when the verdict is given, the document's "time": the
	// caller reads the clock (Analyze reads none).
	Time time.Time
	// SharedQuota says other clients may spend the same quota while the
	// records were made (a watch in production): a finding that their
	// unseen requests could explain — a remaining lower than the probe's
	// own count leaves, retries rejected after the advertised moment,
	// rejections below the limit, a key refused long after its quota
	// returned — is possible, never certain. Counts of
	// accepted requests stay certain: unseen traffic only adds to them.
	SharedQuota bool
}

// foreignExplains lists the findings that another client's requests,
// unseen by the probe, could cause on an honest server.
var foreignExplains = []string{IDRateLimitHeaderInconsistent, IDRetryAfterEarly, IDUnderAdmission, IDUndeclaredPenalty, IDKeyCollapsed}

// Analyze judges the merged records against the policy p (normalized,
// valid) and returns the document. It reads no clock and runs in
// O(n log n) per rule and client for the counts. Analyze is safe for
// concurrent use on distinct inputs; it does not modify m.
func Analyze(m *record.Merged, p Policy, opt Options) Report {
	rep := Report{
		Schema:     cmp(opt.Schema, SchemaAnalyze),
		Tool:       opt.Tool,
		Time:       opt.Time,
		Targets:    opt.Targets,
		Policy:     p,
		RecordFile: opt.RecordFile,
		Findings:   []Finding{},
		failOn:     opt.FailOn,
	}
	if rep.failOn == "" {
		rep.failOn = SeverityError
	}
	if rep.Targets == nil {
		rep.Targets = []string{}
		for _, a := range m.Agents {
			for _, t := range a.Header.Targets {
				if !slices.Contains(rep.Targets, t) {
					rep.Targets = append(rep.Targets, t)
				}
			}
		}
	}
	for i := range p.Endpoints {
		found, note := analyzeRule(m, &p.Endpoints[i])
		rep.Findings = append(rep.Findings, found...)
		if note != "" {
			rep.Notes = append(rep.Notes, note)
		}
	}
	if note := epochUnplaced(m, p); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if opt.SharedQuota {
		for i := range rep.Findings {
			if slices.Contains(foreignExplains, rep.Findings[i].ID) {
				rep.Findings[i].Certainty = Possible
			}
		}
	}
	sortFindings(rep.Findings)
	rep.Complete = !opt.Incomplete && m.Complete()
	rep.judge()
	return rep
}

// epochUnplaced returns the note that epoch-aligned windows were placed on
// the agent's clock, when p declares some and the records say nothing of
// the server's (record.Merged's ClockSource is empty: no answer carried a
// Date or arrival echo, or they disagreed); else "".
func epochUnplaced(m *record.Merged, p Policy) string {
	if m.ClockSource != "" || len(m.Results) == 0 || !slices.ContainsFunc(p.Endpoints, func(e Endpoint) bool { return e.Align == limiter.AlignEpoch }) {
		return ""
	}
	return "epoch-aligned windows were placed on this machine's clock: no answer's Date header or arrival echo placed the server's, so a server clock that is off moves every window edge by as much"
}

// Rejudge orders the findings as Analyze does (most severe and certain
// first) and sets Verdict and Pass again from them and Complete, with the
// fail-on severity the report was judged with (SeverityError for a
// decoded report): for a caller that changed the findings, as check
// --from-config does with the config's findings.
func (r *Report) Rejudge() {
	if r.failOn == "" {
		r.failOn = SeverityError
	}
	sortFindings(r.Findings)
	r.judge()
}

// judge sets Verdict and Pass from the findings and Complete.
func (r *Report) judge() {
	r.Verdict = VerdictPass
	if !r.Complete {
		r.Verdict = VerdictIncomplete
	}
	for i := range r.Findings {
		if r.Findings[i].fails(r.failOn) {
			r.Verdict = VerdictFail
		}
	}
	r.Pass = r.Verdict == VerdictPass
}

// Count returns how many findings have the id and certainty.
func (r *Report) Count(id string, c Certainty) int {
	n := 0
	for _, f := range r.Findings {
		if f.ID == id && f.Certainty == c {
			n++
		}
	}
	return n
}

// rule is the analysis of one endpoint rule. Each check is a method that
// returns its findings; which checks run, and which findings silence which,
// is decided in group from those return values.
type rule struct {
	e        *Endpoint
	endpoint string
	all      []*obs
	// origin is the Unix time in nanoseconds of relative time 0 on the
	// records' clock (record.Merged's Start); epochOffset and epochUnc
	// place the server's clock under it (record.Merged's EpochOffsetNS
	// and EpochUncertaintyNS): epoch-aligned windows are the server's.
	origin, epochOffset, epochUnc int64
	// wins are the fixed windows of the group being analyzed.
	wins []Window
	// sp cuts the group's counts at refusals (penalty.go); nil: no cut.
	sp *split
	// collapsedObs are the refusals key-collapsed explains (collapse.go):
	// under-admission leaves them to it.
	collapsedObs map[*obs]bool
	// inst is what the paced series say about instances (instances.go).
	inst instances
	// late caches effectiveWindow; nil until asked.
	late *bool
}

// traffic is the observations of one quota key, split the ways the checks
// need them.
type traffic struct {
	g  string
	os []*obs // every observation, sorted by Lo
	// acc and rej are the accepted and rejected observations of every
	// check.
	acc, rej []*obs
	// judged is os without the race and key-spoof probes, which are
	// judged by their own checks only; counted is its accepted part.
	judged, counted []*obs
	// spoofed are the key-spoof requests that claimed another address
	// (phase "key-spoof/HEADER"): they may belong to another quota.
	spoofed []*obs
	// maxLen is the longest decision interval in os.
	maxLen int64
	// limited: a rejection, or a remaining value advertised for the rule,
	// proves that a limit exists.
	limited bool
	// settled is when the rule's state surely holds the group's own
	// requests only (see settledFrom); doubtEnd is the latest decision
	// bound of a request before it. Both are math.MinInt64 when the run
	// began from rest.
	settled, doubtEnd int64
	// unrested is when requests from before the run surely no longer count
	// in the state, also for a run whose first response, admitted, carried
	// no remaining value: the earlier of settledFrom's silence and
	// priorHorizon; math.MinInt64 from a proven rest. A rejection before
	// it is no under-admission (underAdmission). The other judges take a
	// headerless run to begin from rest: its admissions are their
	// evidence, and prior traffic only lowers them.
	unrested int64
}

func (r *rule) traffic(g string, os []*obs) *traffic {
	t := &traffic{g: g, os: os}
	probe := func(o *obs) bool { return o.check == CheckRace || o.check == CheckKeySpoof }
	for _, o := range os {
		t.maxLen = max(t.maxLen, o.iv.Hi-o.iv.Lo)
		switch o.class {
		case record.ClassAccepted:
			t.acc = append(t.acc, o)
		case record.ClassRejected:
			t.rej = append(t.rej, o)
		}
		if o.check == CheckKeySpoof && strings.Contains(o.phase, "/") && o.class != record.ClassNotSent {
			t.spoofed = append(t.spoofed, o)
		}
		if o.class.Counts() && !o.cached && len(limitsFor(&o.ph, r.e)) > 0 {
			t.limited = true
		}
		if probe(o) {
			continue
		}
		t.judged = append(t.judged, o)
		if o.class == record.ClassAccepted {
			t.counted = append(t.counted, o)
		}
	}
	t.limited = t.limited || len(t.rej) > 0
	t.settled, t.doubtEnd = r.settledFrom(os, false)
	t.unrested, _ = r.settledFrom(os, true)
	if h, ok := r.priorHorizon(os); ok {
		t.unrested = min(t.unrested, h)
	}
	return t
}

// priorHorizon returns when requests from before the run surely no longer
// count in the declared state, whatever came between: Fresh after the
// first request's decision bound, for a policy whose windows are bounded
// by the clock or by each request (a sliding window, epoch or timer
// windows, a bucket's refill, a block). ok is false for first-request
// windows and for extend and restart penalties: there an earlier request
// may have opened the window, or kept it open, that the run's own
// requests still meet, until a silence (settledFrom).
func (r *rule) priorHorizon(os []*obs) (int64, bool) {
	if r.e.firstRequest() || r.e.Penalty.Kind == limiter.PenaltyExtend || r.e.Penalty.Kind == limiter.PenaltyRestart {
		return 0, false
	}
	first := slices.IndexFunc(os, func(o *obs) bool { return o.class.Counts() && !o.cached })
	if first < 0 {
		return 0, false
	}
	return os[first].iv.Hi + int64(r.e.Fresh()), true
}

// settledFrom returns when the rule's state surely holds the group's own
// requests only, and the latest decision bound before then. The judges
// take a run to begin from rest (every quota whole) unless its first
// response says otherwise: a refusal, or an advertised remaining below
// the Quota−1 a whole limiter leaves after one request — a limiter busy
// with an earlier run's requests, or others'. Then nothing is known of the
// state until a silence of Fresh (every quota back) before a request of
// the group: what the requests before it were admitted, and the remaining
// values they were told, may hold prior traffic, so fewer admitted and
// lower remaining values there are no contradiction (consistency,
// underAdmission). Without such a silence, never (math.MaxInt64). The
// over-admission judges need no such care: prior traffic only lowers what
// the limiter admits. With unadvertised, an admitted first response that
// advertises no remaining value for the rule leaves the state unknown
// too.
func (r *rule) settledFrom(os []*obs, unadvertised bool) (settled, doubtEnd int64) {
	first := slices.IndexFunc(os, func(o *obs) bool { return o.class.Counts() && !o.cached })
	if first < 0 {
		return math.MinInt64, math.MinInt64
	}
	if o := os[first]; o.class == record.ClassAccepted {
		l, ok := limitFor(&o.ph, r.e)
		if !ok && !unadvertised || ok && l.Remaining >= r.e.Quota()-1 {
			return math.MinInt64, math.MinInt64
		}
	}
	fresh := int64(r.e.Fresh())
	doubtEnd = math.MinInt64
	for _, o := range os {
		if o.class == record.ClassNotSent {
			continue
		}
		if doubtEnd != math.MinInt64 && o.iv.Lo-doubtEnd >= fresh {
			return o.iv.Lo, doubtEnd
		}
		doubtEnd = max(doubtEnd, o.iv.Hi)
	}
	return math.MaxInt64, doubtEnd
}

// doubtful reports whether o may have met a state holding traffic from
// before the run (settledFrom).
func (t *traffic) doubtful(o *obs) bool { return o.iv.Lo < t.settled }

// unsure reports whether o may have met a state holding traffic from
// before the run, headers or none (traffic.unrested).
func (t *traffic) unsure(o *obs) bool { return o.iv.Lo < t.unrested }

// unknownStart reports whether the run may have begun busy, headers or
// none (traffic.unrested).
func (t *traffic) unknownStart() bool { return t.unrested != math.MinInt64 }

// busy reports whether the run began busy, not from rest (settledFrom).
func (t *traffic) busy() bool { return t.settled != math.MinInt64 }

func analyzeRule(m *record.Merged, e *Endpoint) ([]Finding, string) {
	all := observe(m, e)
	if len(all) == 0 {
		return nil, ""
	}
	r := &rule{e: e, all: all, origin: m.Start.UnixNano(), epochOffset: m.EpochOffsetNS, epochUnc: m.EpochUncertaintyNS}
	r.endpoint = endpointLabel(e, all)
	groups := map[string][]*obs{}
	var names []string
	for _, o := range all {
		if _, ok := groups[o.group]; !ok {
			names = append(names, o.group)
		}
		groups[o.group] = append(groups[o.group], o)
	}
	slices.Sort(names)
	out, explained := r.collapsed(groups, names)
	r.collapsedObs = explained
	r.inst = r.perInstance(groups, names)
	if r.inst.finding.ID != "" {
		out = append(out, r.inst.finding)
	}
	for _, g := range names {
		out = append(out, r.group(r.traffic(g, groups[g]))...)
	}
	out = append(out, r.headerPresence()...)
	out = append(out, r.policyMismatch()...)
	if len(explained) > 0 || slices.ContainsFunc(out, func(f Finding) bool { return f.ID == IDKeyCollapsed }) {
		return out, "" // the key was tested after all (the preflight's request counted)
	}
	return out, keyUntested(e, r.endpoint, all)
}

// group runs every per-client check on the traffic of one quota key.
// With no limiting at all, the counts, races and spoofed keys say nothing
// more; a count violation makes the remaining values' consistency moot.
// A certain per-instance-limit takes the place of the counts, races and
// remaining or reset values it explains (instances.absorb).
func (r *rule) group(t *traffic) []Finding {
	r.wins, r.sp = nil, r.splitOf(t)
	switch {
	case r.e.WindowType != Fixed:
	case r.sp != nil && r.e.firstRequest():
		r.wins = r.sp.splitWindows()
	default:
		r.wins = r.windowsFor(t)
	}
	out := r.inst.absorb(r.noLimiting(t))
	var counts []Finding
	if len(out) == 0 {
		if r.e.IsBucket() {
			counts = r.bucketCounts(t)
		} else {
			counts = r.windowCounts(t)
		}
		counts = r.inst.absorb(counts)
		out = append(out, counts...)
		out = append(out, r.inst.absorb(r.race(t))...)
		out = append(out, r.keySpoof(t)...)
	}
	penalty, witnesses := r.undeclaredPenalty(t)
	out = append(out, penalty...)
	out = append(out, r.underAdmission(t, witnesses)...)
	out = append(out, r.statusMismatch(t)...)
	out = append(out, r.retryAfter(t)...)
	out = append(out, r.retryAfterAudits(t)...)
	out = append(out, r.malformed(t)...)
	out = append(out, r.cacheable(t)...)
	if len(counts) == 0 {
		out = append(out, r.inst.absorb(r.consistency(t))...)
	}
	return append(out, r.inst.absorb(r.resets(t))...)
}

func endpointLabel(e *Endpoint, all []*obs) string {
	path := e.Path
	if path == "" {
		for _, o := range all {
			p := urlPath(o.res.URL)
			if path == "" {
				path = p
			} else if p != path {
				path = "*"
				break
			}
		}
	}
	if e.Method != "" {
		return e.Method + " " + path
	}
	return path
}

// finding completes f as finding id for group g with the observations as
// evidence: severity (unless f sets one), check and hint from the finding
// table, refs, count and interval from ev unless f gives them.
func (r *rule) finding(id string, c Certainty, g string, ev []*obs, f Finding) Finding {
	spec := specOf(id)
	f.ID, f.Certainty, f.Endpoint, f.Client = id, c, r.endpoint, g
	if f.Severity == "" {
		f.Severity = spec.severity
	}
	if f.Check == "" {
		f.Check = checkFor(spec.check, ev)
	}
	f.Hint = spec.hint
	if f.Evidence.Refs == nil {
		f.Evidence.Refs = refsOf(ev)
	}
	if f.Evidence.Count == 0 {
		f.Evidence.Count = len(ev)
	}
	if f.Evidence.StartNS == 0 && f.Evidence.EndNS == 0 && len(ev) > 0 {
		f.Evidence.StartNS, f.Evidence.EndNS = ev[0].iv.Lo, ev[0].iv.Hi
		for _, o := range ev {
			f.Evidence.StartNS = min(f.Evidence.StartNS, o.iv.Lo)
			f.Evidence.EndNS = max(f.Evidence.EndNS, o.iv.Hi)
		}
	}
	return f
}

// checkFor names the check a finding belongs to: the check of most of its
// evidence, else def, the check that looks for it.
func checkFor(def string, ev []*obs) string {
	n := map[string]int{}
	best := ""
	for _, o := range ev {
		if o.check == "" {
			continue
		}
		n[o.check]++
		if n[o.check] > n[best] {
			best = o.check
		}
	}
	if best != "" {
		return best
	}
	return def
}

// surelyAfter reports whether the server surely decided o after x: by its
// decision sequence when both carry one (the reference server's), else by
// time — o arrived after x was answered. Arrival echoes alone never order
// two requests whose bounds overlap.
func surelyAfter(x, o *obs) bool {
	if x.res.Decision != nil && o.res.Decision != nil {
		return *o.res.Decision > *x.res.Decision
	}
	return o.iv.Lo > x.iv.Hi
}

// possiblyAfter reports whether the server may have decided o after x.
func possiblyAfter(x, o *obs) bool {
	if x.res.Decision != nil && o.res.Decision != nil {
		return *o.res.Decision > *x.res.Decision
	}
	return o != x && o.iv.Hi >= x.iv.Lo
}

// from returns the observations of t.os that may have been decided at or
// after moment, in order of Lo (t.os is sorted by Lo).
func (t *traffic) from(moment int64) []*obs {
	return t.os[sort.Search(len(t.os), func(k int) bool { return t.os[k].iv.Lo >= moment-t.maxLen }):]
}

// dur formats nanoseconds as a rounded duration.
func dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}
