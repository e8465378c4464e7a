package verify

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
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
	Schema     string    `json:"schema"`
	Tool       string    `json:"tool"`
	Verdict    string    `json:"verdict"`
	Complete   bool      `json:"complete"`
	Pass       bool      `json:"pass"`
	Targets    []string  `json:"targets"`
	Policy     Policy    `json:"policy"`
	Findings   []Finding `json:"findings"`
	RecordFile string    `json:"record_file,omitempty"`

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
}

// Analyze judges the merged records against the policy p (normalized,
// valid) and returns the document. It reads no clock and runs in
// O(n log n) per rule and client for the counts. Analyze is safe for
// concurrent use on distinct inputs; it does not modify m.
func Analyze(m *record.Merged, p Policy, opt Options) Report {
	rep := Report{
		Schema:     cmp(opt.Schema, SchemaAnalyze),
		Tool:       opt.Tool,
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
		rep.Findings = append(rep.Findings, analyzeRule(m, &p.Endpoints[i])...)
	}
	sortFindings(rep.Findings)
	rep.Complete = !opt.Incomplete && m.Complete()
	rep.judge()
	return rep
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

// rule is the analysis of one endpoint rule.
type rule struct {
	e        *Endpoint
	endpoint string
	all      []*obs
	origin   int64 // Unix ns of relative time 0
	out      []Finding
	wins     []Window // fixed windows of the group being analyzed
}

func analyzeRule(m *record.Merged, e *Endpoint) []Finding {
	all := observe(m, e)
	if len(all) == 0 {
		return nil
	}
	r := &rule{e: e, all: all, origin: m.Start.UnixNano()}
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
	for _, g := range names {
		r.group(g, groups[g])
	}
	r.headerPresence()
	r.policyMismatch()
	return r.out
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

// add records a finding for group g with the observations as evidence.
func (r *rule) add(id string, sev Severity, c Certainty, g string, ev []*obs, f Finding) {
	f.ID, f.Severity, f.Certainty, f.Endpoint, f.Client = id, sev, c, r.endpoint, g
	if f.Check == "" {
		f.Check = checkFor(id, ev)
	}
	f.Hint = hints[id]
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
	r.out = append(r.out, f)
}

// checkFor names the check a finding belongs to: the check of most of its
// evidence, else the check that looks for it.
func checkFor(id string, ev []*obs) string {
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
	return defaultCheck[id]
}

var defaultCheck = map[string]string{
	IDWindowLimitExceeded: CheckBurst, IDBurstLimitExceeded: CheckBurst, IDRateLimitExceeded: CheckSustained,
	IDNoLimitingObserved: CheckSustained, IDRaceOverAdmission: CheckRace, IDRejectStatusMismatch: CheckHeaders,
	IDRetryAfterMalformed: CheckHeaders, IDRateLimitHeaderMalformed: CheckHeaders, IDRetryAfterEarly: CheckRetryAfter,
	IDRateLimitHeaderInconsistent: CheckHeaders, IDRateLimitPolicyMismatch: CheckHeaders, IDCacheable429: CheckHeaders,
	IDKeySpoofable: CheckKeySpoof, IDRetryAfterMissing: CheckRetryAfter, IDRetryAfterLate: CheckRetryAfter,
	IDUnderAdmission: CheckBurst, IDRateLimitHeaderMissing: CheckHeaders,
}

// hints are one line a user can act on, per finding.
var hints = map[string]string{
	IDWindowLimitExceeded:         "The limiter admits more than the policy allows in some window; a fixed window lets up to 2N through around its edge: use a sliding log or sliding-window counter, or declare --window-type fixed if that is the intended promise.",
	IDBurstLimitExceeded:          "The bucket admits a larger burst than declared: lower its capacity (nginx burst = capacity − 1) or declare the real one.",
	IDRateLimitExceeded:           "The long-run admitted rate is above the declared rate: check the configured refill rate and its unit (r/s vs r/m), and that every replica shares one limiter.",
	IDNoLimitingObserved:          "Nothing was rejected under twice the allowed load: check that the limiter is enabled for this route (nginx: 'return' runs before limit_req) and keyed as declared.",
	IDRaceOverAdmission:           "Concurrent requests were admitted beyond the quota: make the check-and-increment atomic (a Lua script, INCR before compare, or a lock per key).",
	IDRejectStatusMismatch:        "Rejections use another status than declared: set the limiter's reject status (nginx limit_req_status 429) or declare --status.",
	IDRetryAfterMalformed:         "Send Retry-After as whole seconds (1*DIGIT) or an IMF-fixdate HTTP-date (RFC 9110 §10.2.3).",
	IDRateLimitHeaderMalformed:    "Fix the header's syntax: clients must ignore malformed RateLimit fields (Structured Fields, RFC 9651).",
	IDRetryAfterEarly:             "Retry-After tells clients to come back before a retry can succeed: advertise the real wait, rounded up.",
	IDRateLimitHeaderInconsistent: "The advertised remaining/reset values contradict what the server did: compute them from the same state the decision uses.",
	IDRateLimitPolicyMismatch:     "The advertised quota or window differs from the declared or observed policy: advertise what is enforced (buckets: q=capacity, w=ceil(capacity/rate)).",
	IDCacheable429:                "Rejections must not be cached (RFC 6585): send Cache-Control: no-store on them.",
	IDKeySpoofable:                "The per-IP limit trusts client-supplied headers: key on the connection's address, or on X-Forwarded-For only as set by your own proxy.",
	IDRetryAfterMissing:           "Send Retry-After on rejections so that clients know when to retry.",
	IDRetryAfterLate:              "Retry-After asks clients to wait much longer than needed: advertise the real wait.",
	IDUnderAdmission:              "Requests were rejected well below the declared limit: check for rejected requests counting against the quota, a smaller configured limit, or a key shared with other traffic; a sliding-window counter also rejects early after a busy window, as it weighs in the previous window's traffic.",
	IDRateLimitHeaderMissing:      "Send rate-limit headers (e.g. RateLimit and RateLimit-Policy) so that clients can pace themselves.",
}

// group runs every per-client check on the observations of one quota key.
func (r *rule) group(g string, os []*obs) {
	e := r.e
	acc := filter(os, func(o *obs) bool { return o.class == classAccepted })
	rej := filter(os, func(o *obs) bool { return o.class == classRejected })
	// Race and key-spoof traffic is judged by its own checks.
	counted := filter(acc, func(o *obs) bool { return o.check != CheckRace && o.check != CheckKeySpoof })

	r.wins = nil
	if e.WindowType == Fixed {
		r.wins = r.windowsFor(os)
	}
	before := len(r.out)
	if len(rej) == 0 {
		r.noLimiting(g, os)
	}
	noLimiting := len(r.out) > before
	countStart := len(r.out)
	if !noLimiting {
		if e.IsBucket() {
			r.bucketCounts(g, counted)
		} else {
			r.windowCounts(g, counted, os)
		}
	}
	violated := len(r.out) > countStart
	if !noLimiting {
		// With no limiting at all, over-admission by races or spoofed
		// keys says nothing more.
		r.race(g, os, acc)
		if e.Key == KeyIP {
			r.keySpoof(g, os, acc)
		}
	}
	r.underAdmission(g, os, acc, rej)
	r.statusMismatch(g, rej)
	r.retryAfter(g, os, rej)
	r.malformed(g, os)
	r.cacheable(g, rej)
	if !violated {
		r.consistency(g, os, acc)
	}
	r.resets(g, os)
}

// windowsFor returns the fixed windows of rule e touching the group.
func (r *rule) windowsFor(os []*obs) []Window {
	seen := filter(os, func(o *obs) bool { return o.class == classAccepted || o.class == classRejected })
	if len(seen) == 0 {
		return nil
	}
	w := int64(r.e.Window)
	if r.e.Align == limiter.AlignEpoch {
		lo, hi := seen[0].iv.Lo, seen[0].iv.Hi
		for _, o := range seen {
			lo, hi = min(lo, o.iv.Lo), max(hi, o.iv.Hi)
		}
		return EpochWindows(r.origin, lo, hi, w)
	}
	return FirstRequestWindows(ivsOf(seen), w)
}

func (r *rule) windowCounts(g string, acc, os []*obs) {
	e := r.e
	n := int(e.Limit)
	var c, p Span
	what := "in any " + e.Window.String()
	if e.WindowType == Fixed {
		c, p = MaxInFixedWindows(ivsOf(acc), r.wins)
		what = "in one " + e.Window.String() + " window"
	} else {
		c, p = MaxInWindow(ivsOf(acc), int64(e.Window))
	}
	switch {
	case c.Count > n:
		ev := pick(acc, c.Members)
		r.add(IDWindowLimitExceeded, SeverityError, Certain, g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted %s, certainly within %s (the policy allows %d)", c.Count, what, dur(c.End-c.Start), n),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(int64(n)),
				Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})
	case p.Count > n:
		ev := pick(acc, p.Members)
		r.add(IDWindowLimitExceeded, SeverityError, Possible, g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted %s if they arrived as early/late as the timing allows (the policy allows %d); measurement uncertainty leaves it open", p.Count, what, n),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(int64(n)),
				Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})
	}
}

// burstWindow is the longest interval over which the burst bound is
// judged: a quarter of the refill interval, so that a bucket refilled up
// to four times too fast shows as a rate, not a burst, finding.
func burstWindow(rate float64) int64 { return int64(math.Ceil(1e9 / (4 * rate))) }

func (r *rule) bucketCounts(g string, acc []*obs) {
	e := r.e
	iv := ivsOf(acc)
	c, p := MaxBucketExcess(iv, e.Rate, burstWindow(e.Rate))
	capF := float64(e.Capacity) + 1e-6
	switch {
	case c.Excess > capF:
		ev := pick(acc, c.Members)
		b := c.Bound(e.Capacity, e.Rate)
		r.add(IDBurstLimitExceeded, SeverityError, Certain, g, ev, Finding{
			Message:  fmt.Sprintf("%d requests were accepted within %s (capacity %d + %s × %s allows %d)", c.Count, dur(c.Length), e.Capacity, FormatRate(e.Rate), dur(c.Length), b),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(b), Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})
	case p.Excess > capF:
		ev := pick(acc, p.Members)
		b := p.Bound(e.Capacity, e.Rate)
		r.add(IDBurstLimitExceeded, SeverityError, Possible, g, ev, Finding{
			Message:  fmt.Sprintf("%d requests may have been accepted within %s (capacity %d allows %d); measurement uncertainty leaves it open", p.Count, dur(p.Length), e.Capacity, b),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(b), Refs: refsOf(ev), Headers: ev[len(ev)-1].res.Headers},
		})
	}
	// The sustained rate: a bucket admits at most C + rate·L in any span L.
	// A larger bucket shows as an excess that stops growing after a
	// period; a faster refill as one that keeps growing. So the long-run
	// excess is compared with the largest excess over spans up to a period
	// (never less than the declared capacity).
	short, _ := MaxBucketExcess(iv, e.Rate, int64(max(e.Period(), time.Duration(1e9/e.Rate))))
	capEff := max(e.Capacity, int64(math.Floor(short.Excess+1e-9)))
	c, p = MaxBucketExcess(iv, e.Rate, 0)
	capEffF := max(float64(e.Capacity), short.Excess) + 1e-6
	switch {
	case c.Excess > capEffF:
		ev := pick(acc, c.Members)
		b := c.Bound(capEff, e.Rate)
		r.add(IDRateLimitExceeded, SeverityError, Certain, g, ev, Finding{
			Message: fmt.Sprintf("%d requests were accepted over %s (%.3g/s), more than a bucket refilled at %s allows even with the burst of %d seen (%d)",
				c.Count, dur(c.Length), rateOver(c.Count, c.Length), FormatRate(e.Rate), capEff, b),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(b), Refs: refsOf(ev)},
		})
	case p.Excess > capEffF:
		ev := pick(acc, p.Members)
		b := p.Bound(capEff, e.Rate)
		r.add(IDRateLimitExceeded, SeverityError, Possible, g, ev, Finding{
			Message:  fmt.Sprintf("%d requests may have been accepted over %s (the policy allows %d); measurement uncertainty leaves it open", p.Count, dur(p.Length), b),
			Evidence: Evidence{StartNS: p.Start, EndNS: p.End, Count: p.Count, Bound: bound(b), Refs: refsOf(ev)},
		})
	}
}

func rateOver(n int, ns int64) float64 {
	if ns <= 0 {
		return math.Inf(1)
	}
	return float64(n) / (float64(ns) / 1e9)
}

// noLimiting raises no-limiting-observed when nothing was rejected while
// the offered load certainly reached twice the bound somewhere.
func (r *rule) noLimiting(g string, os []*obs) {
	e := r.e
	offered := filter(os, func(o *obs) bool {
		return (o.class == classAccepted || o.class == classOther) && o.check != CheckKeySpoof
	})
	if len(offered) == 0 {
		return
	}
	iv := ivsOf(offered)
	if e.IsBucket() {
		c, _ := MaxBucketExcess(iv, 2*e.Rate, 0)
		if c.Excess >= float64(2*e.Capacity) {
			ev := pick(offered, c.Members)
			b := c.Bound(e.Capacity, e.Rate)
			r.add(IDNoLimitingObserved, SeverityError, Certain, g, ev, Finding{
				Message:  fmt.Sprintf("no request was rejected, although %d were sent within %s (the policy allows %d)", c.Count, dur(c.Length), b),
				Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(b), Refs: refsOf(ev)},
			})
		}
		return
	}
	var c Span
	if e.WindowType == Fixed {
		c, _ = MaxInFixedWindows(iv, r.wins)
	} else {
		c, _ = MaxInWindow(iv, int64(e.Window))
	}
	if c.Count >= 2*int(e.Limit) {
		ev := pick(offered, c.Members)
		r.add(IDNoLimitingObserved, SeverityError, Certain, g, ev, Finding{
			Message:  fmt.Sprintf("no request was rejected, although %d were sent within %s (the policy allows %d)", c.Count, dur(c.End-c.Start), e.Limit),
			Evidence: Evidence{StartNS: c.Start, EndNS: c.End, Count: c.Count, Bound: bound(e.Limit), Refs: refsOf(ev)},
		})
	}
}

// availMax bounds from above the quota available to the group over
// [lo, hi], given the accepted requests prior (not in the set judged):
// only prior requests that certainly still count are subtracted.
func (r *rule) availMax(lo, hi int64, prior []*obs, os []*obs) int64 {
	e := r.e
	switch {
	case e.IsBucket():
		// Tokens with every prior request as early as possible.
		ps := slices.Clone(prior)
		slices.SortFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
		rate := e.Rate / 1e9
		tok, at := float64(e.Capacity), int64(math.MinInt64)
		for _, o := range ps {
			if o.iv.Lo > lo {
				break
			}
			if at != math.MinInt64 {
				tok = min(float64(e.Capacity), tok+rate*float64(o.iv.Lo-at))
			}
			// A request the declared bucket could not have admitted
			// takes nothing from it: the quota is judged as declared.
			tok, at = max(0, tok-1), o.iv.Lo
		}
		if at != math.MinInt64 {
			tok = min(float64(e.Capacity), tok+rate*float64(lo-at))
		}
		return int64(math.Floor(max(0, tok) + rate*float64(hi-lo) + 1e-9))
	case e.WindowType == Fixed:
		var touched []Window
		for _, w := range r.wins {
			if w.StartLo <= hi && w.StartHi+w.Length > lo {
				touched = append(touched, w)
			}
		}
		if len(touched) != 1 || !touched[0].certainly(Interval{lo, hi}) {
			return int64(max(1, len(touched))) * e.Limit
		}
		n := int64(0)
		for _, o := range prior {
			if touched[0].certainly(o.iv) && o.iv.Hi < lo {
				n++
			}
		}
		return max(0, e.Limit-n)
	default:
		n := int64(0)
		for _, o := range prior {
			if o.iv.Lo > hi-int64(e.Window) && o.iv.Hi < lo {
				n++
			}
		}
		return max(0, e.Limit-n)
	}
}

// batches returns the synchronised releases among os with the given
// check: results of one agent, phase and scheduled time, at least two.
func batches(os []*obs, check string) [][]*obs {
	type key struct {
		agent, phase string
		sched        int64
	}
	m := map[key][]*obs{}
	var keys []key
	for _, o := range os {
		if o.check != check || o.class == classNotSent {
			continue
		}
		k := key{o.res.Agent, o.phase, o.res.Sched}
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
		m[k] = append(m[k], o)
	}
	var out [][]*obs
	for _, k := range keys {
		if len(m[k]) >= 2 {
			out = append(out, m[k])
		}
	}
	return out
}

func span(os []*obs) (int64, int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, o := range os {
		lo, hi = min(lo, o.iv.Lo), max(hi, o.iv.Hi)
	}
	return lo, hi
}

func (r *rule) race(g string, os, acc []*obs) {
	for _, b := range batches(os, CheckRace) {
		in := map[*obs]bool{}
		for _, o := range b {
			in[o] = true
		}
		a := filter(b, func(o *obs) bool { return o.class == classAccepted })
		lo, hi := span(b)
		prior := filter(acc, func(o *obs) bool { return !in[o] })
		avail := r.availMax(lo, hi, prior, os)
		if int64(len(a)) > avail {
			r.add(IDRaceOverAdmission, SeverityError, Certain, g, a, Finding{
				Message: fmt.Sprintf("a batch of %d requests released together had %d accepted, but at most %d were available", len(b), len(a), avail),
				Evidence: Evidence{StartNS: lo, EndNS: hi, Count: len(a), Bound: bound(avail), Refs: refsOf(b),
					Headers: a[len(a)-1].res.Headers},
			})
		}
	}
}

// keySpoof judges the key-spoof check's requests: each phase
// "key-spoof/HEADER" varies one header from one IP.
func (r *rule) keySpoof(g string, os, acc []*obs) {
	phases := map[string][]*obs{}
	var names []string
	for _, o := range os {
		if o.check == CheckKeySpoof && strings.Contains(o.phase, "/") && o.class != classNotSent {
			if _, ok := phases[o.phase]; !ok {
				names = append(names, o.phase)
			}
			phases[o.phase] = append(phases[o.phase], o)
		}
	}
	for _, ph := range names {
		set := phases[ph]
		in := map[*obs]bool{}
		for _, o := range set {
			in[o] = true
		}
		a := filter(set, func(o *obs) bool { return o.class == classAccepted })
		lo, hi := span(set)
		prior := filter(acc, func(o *obs) bool { return !in[o] })
		avail := r.availMax(lo, hi, prior, os)
		if int64(len(a)) > avail {
			_, hdr, _ := strings.Cut(ph, "/")
			r.add(IDKeySpoofable, SeverityError, Certain, g, a, Finding{
				Message: fmt.Sprintf("%d of %d requests from %s with a different %s each were accepted, but that address had at most %d left", len(a), len(set), cmp(g, "one address"), hdr, avail),
				Evidence: Evidence{StartNS: lo, EndNS: hi, Count: len(a), Bound: bound(avail), Refs: refsOf(set),
					Headers: a[0].res.Headers},
			})
		}
	}
}

// underAdmission raises a warning for rejections while even the
// pessimistic count left at least max(1, ⌈N/10⌉) of the quota. Under a
// fixed-window policy only the current window's acceptances count, so a
// sliding-window counter, which honestly rejects early after a busy
// previous window, shows here: it stays a warning (the policy's promise is
// kept, but clients get less than it grants), never hidden.
func (r *rule) underAdmission(g string, os, acc, rej []*obs) {
	e := r.e
	q := e.Quota()
	slack := max(1, (q+9)/10)
	var bad []*obs
	var worst int64 = -1
	judged := filter(rej, func(o *obs) bool { return o.check != CheckRace && o.check != CheckKeySpoof })
	if len(judged) == 0 {
		return
	}
	var avail func(o *obs) int64
	switch {
	case e.IsBucket():
		avail = r.bucketPessimist(acc)
	case e.WindowType == Fixed:
		wins := r.wins
		avail = func(x *obs) int64 {
			most := int64(0)
			for _, w := range wins {
				if !w.possibly(x.iv) {
					continue
				}
				n := int64(0)
				for _, o := range acc {
					if w.possibly(o.iv) && o.iv.Lo <= x.iv.Hi {
						n++
					}
				}
				most = max(most, n)
			}
			return q - most
		}
	default:
		los := make([]int64, len(acc))
		his := make([]int64, len(acc))
		for i, o := range acc {
			los[i], his[i] = o.iv.Lo, o.iv.Hi
		}
		slices.Sort(los)
		slices.Sort(his)
		w := int64(e.Window)
		avail = func(x *obs) int64 {
			n := sort.Search(len(los), func(k int) bool { return los[k] > x.iv.Hi }) -
				sort.Search(len(his), func(k int) bool { return his[k] > x.iv.Lo-w })
			return q - int64(n)
		}
	}
	for _, o := range judged {
		if a := avail(o); a >= slack {
			bad = append(bad, o)
			worst = max(worst, a)
		}
	}
	if len(bad) == 0 {
		return
	}
	r.add(IDUnderAdmission, SeverityWarning, Certain, g, bad, Finding{
		Message: fmt.Sprintf("%d requests were rejected while at least %d of the quota of %d was left (up to %d)", len(bad), slack, q, worst),
		Evidence: Evidence{Count: len(bad), Bound: bound(q - slack), Refs: refsOf(bad),
			Headers: bad[0].res.Headers},
	})
}

// bucketPessimist returns, for a rejection, the fewest tokens the bucket
// can have held: every accepted request as late as possible.
func (r *rule) bucketPessimist(acc []*obs) func(*obs) int64 {
	e := r.e
	ps := slices.Clone(acc)
	slices.SortFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Hi, b.iv.Hi) })
	rate := e.Rate / 1e9
	// tokens after the k-th accepted request (at its Hi), computed once.
	after := make([]float64, len(ps))
	tok, at := float64(e.Capacity), int64(0)
	for k, o := range ps {
		if k > 0 {
			tok = min(float64(e.Capacity), tok+rate*float64(o.iv.Hi-at))
		}
		tok, at = tok-1, o.iv.Hi
		after[k] = tok
	}
	his := make([]int64, len(ps))
	los := make([]int64, len(ps))
	for k, o := range ps {
		his[k] = o.iv.Hi
		los[k] = o.iv.Lo
	}
	return func(x *obs) int64 {
		k := sort.Search(len(his), func(i int) bool { return his[i] > x.iv.Hi })
		t := float64(e.Capacity)
		if k > 0 {
			t = min(float64(e.Capacity), after[k-1]+rate*float64(x.iv.Hi-his[k-1]))
		}
		// Later accepted requests that may have come first, and the refill
		// that may not have happened yet; a millisecond for clocks.
		for _, lo := range los[k:] {
			if lo <= x.iv.Hi {
				t--
			}
		}
		t -= rate * float64(x.iv.Hi-x.iv.Lo+int64(time.Millisecond))
		return int64(math.Floor(t + 1e-9))
	}
}

func (r *rule) statusMismatch(g string, rej []*obs) {
	bad := filter(rej, func(o *obs) bool { return o.mismatch })
	if len(bad) == 0 {
		return
	}
	statuses := map[int]int{}
	for _, o := range bad {
		statuses[o.res.Status]++
	}
	var parts []string
	for s, n := range statuses {
		parts = append(parts, fmt.Sprintf("%d × %d", n, s))
	}
	slices.Sort(parts)
	r.add(IDRejectStatusMismatch, SeverityError, Certain, g, bad, Finding{
		Message:  fmt.Sprintf("%d rejections answered %s instead of the declared %d", len(bad), strings.Join(parts, ", "), r.e.Status),
		Evidence: Evidence{Headers: bad[0].res.Headers},
	})
}

// retryAfter checks Retry-After on rejections: missing, early, late.
func (r *rule) retryAfter(g string, os, rej []*obs) {
	var missing []*obs
	for _, o := range rej {
		if len(o.res.Headers.Values("Retry-After")) == 0 {
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		sev := SeverityWarning
		if r.e.RetryAfter == RetryAfterRequired {
			sev = SeverityError
		}
		r.add(IDRetryAfterMissing, sev, Certain, g, missing, Finding{
			Message:  fmt.Sprintf("%d of %d rejections carry no Retry-After", len(missing), len(rej)),
			Evidence: Evidence{Headers: missing[0].res.Headers},
		})
	}
	var early, late [][]*obs
	for _, o := range rej {
		if o.cached || o.ph.RetryAfter == nil {
			continue
		}
		d := int64(*o.ph.RetryAfter)
		if ev := r.earlyRetries(os, o, o.recv+o.u+d); ev != nil {
			early = append(early, ev)
		}
		if ev := r.lateAccept(os, o, d); ev != nil {
			late = append(late, ev)
		}
	}
	if len(early) > 0 {
		ev := early[0]
		r.add(IDRetryAfterEarly, SeverityError, Certain, g, flatten(early), Finding{
			Message: fmt.Sprintf("Retry-After: %s was too early: both retries at or after the advertised moment were rejected (%d times)",
				ev[0].res.Headers.Get("Retry-After"), len(early)),
			Evidence: Evidence{Count: len(early), Headers: ev[0].res.Headers},
		})
	}
	if len(late) > 0 {
		ev := late[0]
		r.add(IDRetryAfterLate, SeverityWarning, Certain, g, flatten(late), Finding{
			Message: fmt.Sprintf("Retry-After: %s was late: a request was accepted %s before the advertised moment (%d times)",
				ev[0].res.Headers.Get("Retry-After"), dur(ev[0].iv.Lo+int64(*ev[0].ph.RetryAfter)-ev[1].iv.Hi), len(late)),
			Evidence: Evidence{Count: len(late), Headers: ev[0].res.Headers},
		})
	}
}

func flatten(evs [][]*obs) []*obs {
	var out []*obs
	seen := map[*obs]bool{}
	for _, ev := range evs {
		for _, o := range ev {
			if !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	return out
}

// earlyRetries returns [x, q1, q2] when the first two requests of the
// group surely arriving at or after moment were both rejected, and no
// request surely after x was accepted before them; nil otherwise.
func (r *rule) earlyRetries(os []*obs, x *obs, moment int64) []*obs {
	// os is sorted by Lo.
	var qs []*obs
	for _, o := range os[sort.Search(len(os), func(k int) bool { return os[k].iv.Lo >= moment }):] {
		if o.class != classAccepted && o.class != classRejected {
			continue
		}
		qs = append(qs, o)
		if len(qs) == 2 {
			break
		}
	}
	if len(qs) < 2 || qs[0].class != classRejected || qs[1].class != classRejected {
		return nil
	}
	end := max(qs[0].iv.Hi, qs[1].iv.Hi)
	for _, o := range os[sort.Search(len(os), func(k int) bool { return os[k].iv.Lo > x.iv.Hi }):] {
		if o.iv.Lo > end {
			break
		}
		if o.class == classAccepted {
			return nil
		}
	}
	return []*obs{x, qs[0], qs[1]}
}

// lateAccept returns [x, a] when a request a surely after x was accepted
// at least max(2 s, d/2) before x's advertised moment (counted from x's
// earliest arrival); nil otherwise.
func (r *rule) lateAccept(os []*obs, x *obs, d int64) []*obs {
	margin := max(int64(2*time.Second), d/2)
	limit := x.iv.Lo + d - margin
	for _, o := range os[sort.Search(len(os), func(k int) bool { return os[k].iv.Lo > x.iv.Hi }):] {
		if o.iv.Lo > limit {
			break
		}
		if o.class == classAccepted && o.iv.Hi <= limit {
			return []*obs{x, o}
		}
	}
	return nil
}

// malformed reports header values that break their grammar.
func (r *rule) malformed(g string, os []*obs) {
	type agg struct {
		ev    []*obs
		value string
		msg   string
	}
	byID := map[string]*agg{}
	for _, o := range os {
		for _, p := range o.ph.Problems {
			id := IDRateLimitHeaderMalformed
			if strings.EqualFold(p.Field, "Retry-After") {
				id = IDRetryAfterMalformed
			}
			a := byID[id]
			if a == nil {
				a = &agg{value: p.String()}
				byID[id] = a
			}
			if len(a.ev) == 0 || a.ev[len(a.ev)-1] != o {
				a.ev = append(a.ev, o)
			}
		}
	}
	for _, id := range []string{IDRetryAfterMalformed, IDRateLimitHeaderMalformed} {
		a := byID[id]
		if a == nil {
			continue
		}
		r.add(id, SeverityError, Certain, g, a.ev, Finding{
			Check:    CheckHeaders,
			Message:  fmt.Sprintf("%d responses carry a malformed value, e.g. %s", len(a.ev), a.value),
			Evidence: Evidence{Headers: a.ev[0].res.Headers},
		})
	}
}

func (r *rule) cacheable(g string, rej []*obs) {
	var bad []*obs
	for _, o := range rej {
		if headers.Cacheable(o.res.Headers, o.start.Add(time.Duration(o.recv))) {
			bad = append(bad, o)
		}
	}
	if len(bad) > 0 {
		r.add(IDCacheable429, SeverityError, Certain, g, bad, Finding{
			Check:    CheckHeaders,
			Message:  fmt.Sprintf("%d rejections may be cached (Cache-Control: %s)", len(bad), bad[0].res.Headers.Get("Cache-Control")),
			Evidence: Evidence{Headers: bad[0].res.Headers},
		})
	}
}

// consistency checks advertised remaining values against what the server
// did: buckets stay within the model's band (bucketBand); a rejection
// never advertises two or more remaining; fixed windows are judged by
// fixedWindowRemaining.
func (r *rule) consistency(g string, os, acc []*obs) {
	e := r.e
	var bad []*obs
	var why string
	note := func(o *obs, format string, a ...any) {
		if len(bad) == 0 {
			why = fmt.Sprintf(format, a...)
		}
		bad = append(bad, o)
	}
	for _, o := range os {
		if o.class != classRejected || o.cached {
			continue
		}
		if l, ok := limitFor(&o.ph, e); ok && l.Remaining >= 2 {
			note(o, "a rejection advertised %d remaining", l.Remaining)
		}
	}
	switch {
	case e.IsBucket():
		r.bucketBand(acc, note)
	case e.WindowType == Fixed:
		r.fixedWindowRemaining(os, acc, note)
	}
	if len(bad) > 0 {
		r.add(IDRateLimitHeaderInconsistent, SeverityError, Certain, g, bad, Finding{
			Check:    CheckHeaders,
			Message:  fmt.Sprintf("remaining contradicts what the server did: %s (%d responses)", why, len(bad)),
			Evidence: Evidence{Headers: bad[0].res.Headers},
		})
	}
}

// fixedWindowRemaining judges the remaining values advertised in each
// fixed window whose accepted requests certainly fall inside it (k of
// them, none possibly so) and all carry the rule's limit, sorted from the
// largest, v_1 ≥ … ≥ v_k:
//
//   - always v_j ≤ N − j: after j acceptances the window can hold at most
//     N − j more, so a larger value advertises quota the policy does not
//     grant (a stuck or inflated remaining). Sorting makes this hold
//     whatever the order of arrival, and traffic unseen by the probe only
//     lowers the true remaining, so a violation is certain.
//   - v_j = N − j exactly, when the window shows no carry-over: its
//     largest value is N − 1 (its first acceptance saw the whole quota), or
//     no request of the group may have reached the server in the window's
//     length before it started. A pure fixed window always counts down
//     N − 1…N − k then.
//
// Otherwise a lower value is not a contradiction: a sliding-window counter
// keeps the fixed-window promise yet advertises
// N − ⌊prev·(W−elapsed)/W⌋ − curr, less than N − j while the previous
// window's weighted share lasts, and rising again as it decays. Within a
// window, the values need not decrease in arrival order for the same
// reason.
func (r *rule) fixedWindowRemaining(os, acc []*obs, note func(*obs, string, ...any)) {
	e := r.e
	n := e.Limit
	for _, w := range r.wins {
		var inW []*obs
		clean := true
		for _, o := range acc {
			switch {
			case w.certainly(o.iv):
				inW = append(inW, o)
			case w.possibly(o.iv):
				clean = false
			}
		}
		if !clean || len(inW) == 0 {
			continue
		}
		var rem []int64
		for _, o := range inW {
			l, ok := limitFor(&o.ph, e)
			if o.cached || !ok {
				clean = false
				break
			}
			rem = append(rem, l.Remaining)
		}
		if !clean {
			continue
		}
		slices.SortFunc(rem, func(a, b int64) int { return cmpInt64(b, a) })
		k := int64(len(rem))
		over, off := false, false
		for j, v := range rem {
			over = over || v > n-1-int64(j)
			off = off || v != n-1-int64(j)
		}
		switch {
		case over:
			note(inW[0], "a window with %d accepted advertised remaining %v, more than the %d…%d it can still hold", k, rem, n-1, n-k)
		case off && (rem[0] == n-1 || !r.carryOver(os, w)):
			note(inW[0], "a window with %d accepted and nothing carried over advertised remaining %v, not %d…%d", k, rem, n-1, n-k)
		default:
			continue
		}
		for _, o := range inW[1:] {
			note(o, "")
		}
	}
}

// carryOver reports whether a request of the group (any that may have
// reached the server) may have arrived in the window's length before w
// started: what a sliding-window counter weighs into w.
func (r *rule) carryOver(os []*obs, w Window) bool {
	for _, o := range os {
		if o.class == classNotSent {
			continue
		}
		if o.iv.Lo < w.StartHi && o.iv.Hi >= w.StartLo-w.Length && !w.certainly(o.iv) {
			return true
		}
	}
	return false
}

// bucketBand replays the accepted requests through the declared bucket
// (limiter's token bucket, the model oracle) in order of arrival and checks
// each advertised remaining within [model − in-flight − 1, model + 1],
// where model is what the request would see were it first among the
// requests in flight with it, and the band is widened by the refill over
// the arrival uncertainty.
func (r *rule) bucketBand(acc []*obs, note func(*obs, string, ...any)) {
	e := r.e
	cfg := limiter.Config{Algorithm: limiter.TokenBucket, Rate: e.Rate, Capacity: e.Capacity}
	if cfg.Validate() != nil {
		return
	}
	ps := slices.Clone(acc)
	slices.SortStableFunc(ps, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	var st limiter.State
	for i, o := range ps {
		var d limiter.Decision
		st, d = cfg.Step(st, time.Unix(0, r.origin+o.iv.Lo))
		l, ok := limitFor(&o.ph, e)
		if !d.Allowed || !ok || o.cached {
			continue
		}
		before, after := int64(0), int64(0)
		for j := i - 1; j >= 0 && j >= i-256; j-- {
			if ps[j].iv.Hi >= o.iv.Lo {
				before++
			}
		}
		for j := i + 1; j < len(ps) && ps[j].iv.Lo <= o.iv.Hi; j++ {
			after++
		}
		first := d.Remaining + before
		slack := int64(math.Ceil(e.Rate * float64(o.iv.Hi-o.iv.Lo) / 1e9))
		lo, hi := first-before-after-1-slack, first+1+slack
		if l.Remaining < lo || l.Remaining > hi {
			note(o, "advertised remaining %d where the declared bucket leaves %d (band %d…%d)", l.Remaining, first, lo, hi)
		}
	}
}

// resets checks each response's time until more (draft-8 t) or until full
// (reset of the other dialects), given with remaining 0, against the
// recovery measured afterwards.
func (r *rule) resets(g string, os []*obs) {
	var bad []*obs
	var why string
	for _, o := range os {
		if o.cached || (o.class != classAccepted && o.class != classRejected) {
			continue
		}
		for _, l := range limitsFor(&o.ph, r.e) {
			if !l.HasReset || l.Remaining != 0 {
				continue
			}
			d := int64(l.Reset)
			name := "reset"
			if l.Dialect == headers.Draft8 {
				name = "t"
			}
			if ev := r.earlyRetries(os, o, o.recv+o.u+d); ev != nil {
				if len(bad) == 0 {
					why = fmt.Sprintf("%s=%s, yet both requests at or after it were rejected", name, dur(d))
				}
				bad = append(bad, ev...)
				break
			}
			if l.Dialect == headers.Draft8 {
				if ev := r.lateAccept(os, o, d); ev != nil {
					if len(bad) == 0 {
						why = fmt.Sprintf("t=%s, yet a request was accepted long before", dur(d))
					}
					bad = append(bad, ev...)
					break
				}
			}
		}
	}
	if len(bad) > 0 {
		r.add(IDRateLimitHeaderInconsistent, SeverityError, Certain, g, bad, Finding{
			Check:    CheckHeaders,
			Message:  "the advertised time until quota returns contradicts the recovery measured: " + why,
			Evidence: Evidence{Headers: bad[0].res.Headers},
		})
	}
}

// headerPresence reports responses without the expected rate-limit
// headers: an error for each declared dialect missing, otherwise info when
// no response carries any.
func (r *rule) headerPresence() {
	resp := filter(r.all, func(o *obs) bool {
		return (o.class == classAccepted || o.class == classRejected) && !o.cached
	})
	if len(resp) == 0 {
		return
	}
	declared := r.e.Headers
	if len(declared) == 1 && declared[0] == string(headers.None) {
		return
	}
	if len(declared) == 0 {
		for _, o := range resp {
			if !o.ph.Speaks(headers.None) {
				return
			}
		}
		r.add(IDRateLimitHeaderMissing, SeverityInfo, Certain, "", resp, Finding{
			Check:   CheckHeaders,
			Message: fmt.Sprintf("none of %d responses carries a rate-limit header", len(resp)),
		})
		return
	}
	for _, d := range declared {
		missing := filter(resp, func(o *obs) bool { return !o.ph.Speaks(headers.Dialect(d)) })
		if len(missing) > 0 {
			r.add(IDRateLimitHeaderMissing, SeverityError, Certain, "", missing, Finding{
				Check:    CheckHeaders,
				Message:  fmt.Sprintf("%d of %d responses lack the declared %s headers", len(missing), len(resp), d),
				Evidence: Evidence{Headers: missing[0].res.Headers},
			})
		}
	}
}

// policyMismatch compares advertised quotas and windows with the declared
// rule (buckets advertise q=capacity, w=max(1, ⌈capacity/rate⌉)).
func (r *rule) policyMismatch() {
	e := r.e
	q := e.Quota()
	w := e.Window
	if e.IsBucket() {
		w = time.Duration(max(1, int64(math.Ceil(float64(e.Capacity)/e.Rate-1e-9)))) * time.Second
	}
	var bad []*obs
	var seen string
	for _, o := range r.all {
		if o.cached || (o.class != classAccepted && o.class != classRejected) {
			continue
		}
		if len(o.ph.Policies) == 0 && !slices.ContainsFunc(o.ph.Limits, func(l headers.Limit) bool { return l.HasLimit }) {
			continue
		}
		match := false
		for _, p := range o.ph.Policies {
			if p.Quota == q && (!p.HasWindow || p.Window == w) && (e.Name == "" || p.Name == "" || p.Name == e.Name || len(o.ph.Policies) == 1) {
				match = true
			}
		}
		if len(o.ph.Policies) == 0 {
			match = slices.ContainsFunc(o.ph.Limits, func(l headers.Limit) bool { return l.HasLimit && l.Limit == q })
		}
		// A limit field with another quota contradicts a matching policy
		// unless it belongs to another advertised policy.
		for _, l := range o.ph.Limits {
			if l.HasLimit && l.Limit != q && !slices.ContainsFunc(o.ph.Policies, func(p headers.Policy) bool { return p.Quota == l.Limit }) {
				match = false
			}
		}
		if !match {
			if len(bad) == 0 {
				seen = describeAdvertised(&o.ph)
			}
			bad = append(bad, o)
		}
	}
	if len(bad) > 0 {
		r.add(IDRateLimitPolicyMismatch, SeverityError, Certain, "", bad, Finding{
			Check:    CheckHeaders,
			Message:  fmt.Sprintf("%d responses advertise %s, but the policy is q=%d; w=%d", len(bad), seen, q, int64(w/time.Second)),
			Evidence: Evidence{Headers: bad[0].res.Headers},
		})
	}
}

func describeAdvertised(ph *headers.Parsed) string {
	var parts []string
	for _, p := range ph.Policies {
		s := fmt.Sprintf("q=%d", p.Quota)
		if p.HasWindow {
			s += fmt.Sprintf("; w=%d", int64(p.Window/time.Second))
		}
		parts = append(parts, s)
	}
	for _, l := range ph.Limits {
		if l.HasLimit {
			parts = append(parts, fmt.Sprintf("limit %d", l.Limit))
		}
	}
	return strings.Join(parts, ", ")
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
