package report

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// distOf returns the distribution of ns values (sorted in place).
func distOf(ns []int64) record.Dist {
	if len(ns) == 0 {
		return record.Dist{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	q := func(p float64) int64 {
		i := int(math.Ceil(p*float64(len(ns)))) - 1
		return ns[min(max(i, 0), len(ns)-1)] / 1000
	}
	return record.Dist{
		Count:  int64(len(ns)),
		MeanUS: math.Round(sum/float64(len(ns))/100) / 10,
		P50US:  q(0.50), P90US: q(0.90), P99US: q(0.99), P999US: q(0.999),
		MaxUS: ns[len(ns)-1] / 1000,
	}
}

// DelayedThreshold returns the latency from which an accepted request is
// shown as delayed, given the 10th percentile of all answers' latencies:
// max(4 × p10, p10 + 100 ms). A leaky bucket that queues holds requests
// for multiples of 1/rate, far above an immediate answer.
func DelayedThreshold(p10 time.Duration) time.Duration {
	return max(4*p10, p10+100*time.Millisecond)
}

// prepared is what the renderers share, computed once per Input.
type prepared struct {
	rule      *rule         // the limit drawn; nil when none is known
	declared  []int         // the declared reject statuses (of every policy and inference)
	covered   []bool        // by route: does rule cover it
	threshold int64         // delayed threshold, ns; 0 none
	first     int64         // earliest send
	last      int64         // latest send or answer
	lastSend  int64         // latest send (the timeline's end)
	edges     *rule         // the fixed windows whose edges are drawn; nil when none
	laneN     []int         // requests per lane
	sum       record.RunDoc // the run summary
}

// prepare computes (once) the classes and the summary.
func (in *Input) prepare() *prepared {
	if in.prep != nil {
		return in.prep
	}
	p := &prepared{}
	in.pickRule(p)
	p.covered = make([]bool, len(in.routes))
	for i, rt := range in.routes {
		p.covered[i] = p.rule == nil || ((p.rule.Method == "" || strings.EqualFold(p.rule.Method, rt.method)) &&
			(p.rule.Path == "" || p.rule.Path == rt.path))
	}
	in.classify(p)
	p.edges = in.edgeRule(p.rule)
	p.sum = in.summarize(p)
	in.prep = p
	return p
}

// pickRule chooses the limit drawn — the first rule with a limit of the
// latest verdict's policy, else of the runs' policies, else of an
// inference — and gathers the declared reject statuses.
func (in *Input) pickRule(p *prepared) {
	var rules []rule
	for i := range in.Verdicts {
		for _, e := range in.Verdicts[i].Report.Policy.Endpoints {
			rules = append(rules, rule{Endpoint: e})
		}
	}
	for i := range in.Agents {
		for _, e := range in.Agents[i].policy.Endpoints {
			rules = append(rules, rule{Endpoint: e})
		}
	}
	for i := range rules {
		if r := &rules[i]; p.rule == nil && (r.isWindow() || r.isBucket()) {
			p.rule = r
		}
		if s := rules[i].Status; s != 0 && !slices.Contains(p.declared, s) {
			p.declared = append(p.declared, s)
		}
	}
	for _, inf := range in.Inferences {
		if inf.RejectStatus != nil && *inf.RejectStatus != 0 && !slices.Contains(p.declared, *inf.RejectStatus) {
			p.declared = append(p.declared, *inf.RejectStatus)
		}
		if p.rule == nil {
			p.rule = inferredRule(inf)
		}
	}
}

// classOf classifies a request by record.Classify: rejected when any
// declared reject status (or 429, 503) makes it so.
func (in *Input) classOf(q *request, declared []int) Class {
	switch q.outcome {
	case outNotSent:
		return NotSent
	case outError:
		return Error
	}
	r := record.Result{Outcome: record.OutcomeResponse, Status: int(q.status)}
	if q.age != 0 {
		r.Headers = http.Header{"Age": {in.ages[q.age]}}
	}
	c := classFrom(record.Classify(r, 0))
	for _, d := range declared {
		if c == Other && classFrom(record.Classify(r, d)) == Rejected {
			c = Rejected
		}
	}
	return c
}

// classFrom maps record's outcome class to the display class.
func classFrom(c record.Class, _ bool) Class {
	switch c {
	case record.ClassAccepted:
		return Accepted
	case record.ClassRejected:
		return Rejected
	case record.ClassError:
		return Error
	case record.ClassNotSent:
		return NotSent
	}
	return Other
}

// classify sets every request's class, then the delayed threshold from
// the answers' latencies (accepted answers at or above it are Delayed).
func (in *Input) classify(p *prepared) {
	var lats []int64
	p.first, p.last = math.MaxInt64, math.MinInt64
	p.laneN = make([]int, len(in.lanes))
	for i := range in.reqs {
		q := &in.reqs[i]
		q.class = in.classOf(q, p.declared)
		if q.lat >= 0 && q.outcome == outResponse {
			lats = append(lats, q.lat)
		}
		p.first = min(p.first, q.t)
		p.last = max(p.last, q.t, q.recv)
		p.lastSend = max(p.lastSend, q.t)
		p.laneN[q.lane]++
	}
	if len(in.reqs) == 0 {
		p.first, p.last, p.lastSend = 0, 0, 0
	}
	if len(lats) >= 2 {
		slices.Sort(lats)
		p10 := lats[int(math.Ceil(0.1*float64(len(lats))))-1]
		p.threshold = int64(DelayedThreshold(time.Duration(p10)))
		for i := range in.reqs {
			if q := &in.reqs[i]; q.class == Accepted && q.lat >= p.threshold {
				q.class = Delayed
			}
		}
	}
}

// summarize counts the classified requests into the run document.
func (in *Input) summarize(p *prepared) record.RunDoc {
	d := record.RunDoc{
		Schema: record.SchemaRun, Tool: in.tool(), Complete: in.Complete(), Reason: in.endReason(),
		Targets: in.Targets(), RecordFile: strings.Join(in.Files, ", "),
	}
	if len(in.Agents) == 1 {
		seed := in.Agents[0].Header.Seed
		d.Seed = &seed
		d.Plan = in.Agents[0].Header.Plan
	}
	s := &d.RunSummary
	s.Statuses, s.Latency = map[string]int{}, map[string]record.Dist{}
	clients := make([]record.ClientSummary, len(in.lanes))
	for i, c := range in.lanes {
		clients[i].Client = c
	}
	byStatus := map[int16][]int64{}
	var pacing []int64
	for i := range in.reqs {
		q := &in.reqs[i]
		if in.count(s, &clients[q.lane], q) {
			if q.total >= 0 {
				byStatus[q.status] = append(byStatus[q.status], q.total)
			}
			pacing = append(pacing, max(q.pace, 0))
			if q.pace > int64(record.LateThreshold) {
				s.Late++
			}
		}
	}
	for st, l := range byStatus {
		s.Latency[strconv.Itoa(int(st))] = distOf(l)
	}
	s.Pacing = distOf(pacing)
	in.races(s)
	// In order of their labels, as run lists them.
	slices.SortStableFunc(clients, func(a, b record.ClientSummary) int { return strings.Compare(a.Client, b.Client) })
	s.Clients = clients
	if s.Clients == nil {
		s.Clients = []record.ClientSummary{}
	}
	s.DelayedThresholdMS = math.Round(float64(p.threshold)/1e3) / 1e3
	if span := p.last - p.first; span > 0 {
		s.DurationS = math.Round(float64(span)/1e6) / 1e3
		s.SentPerS = math.Round(float64(s.Sent)/(float64(span)/1e9)*1e3) / 1e3
	}
	return d
}

// count adds a classified request to the summary and its client's counts;
// it reports whether the request was sent.
func (in *Input) count(s *record.RunSummary, c *record.ClientSummary, q *request) bool {
	s.Scheduled++
	switch q.class {
	case NotSent:
		s.NotSent++
		c.NotSent++
		if s.NotSentReasons == nil {
			s.NotSentReasons = map[string]int{}
		}
		s.NotSentReasons[cmpOr(in.reasons[q.reason], "unknown")]++
		return false
	case Error:
		s.Errors++
		c.Errors++
		if s.ErrorClasses == nil {
			s.ErrorClasses = map[string]int{}
		}
		s.ErrorClasses[cmpOr(in.reasons[q.reason], "other")]++
	case Accepted, Delayed:
		s.Accepted++
		c.Accepted++
		if q.class == Delayed {
			s.Delayed++
			c.Delayed++
		}
	case Rejected:
		s.Rejected++
		c.Rejected++
	default:
		s.Other++
		c.Other++
	}
	if q.class != Error {
		s.Responses++
		s.Statuses[strconv.Itoa(int(q.status))]++
	}
	s.Sent++
	c.Sent++
	return true
}

// races counts the race releases — two or more sent results of one
// agent and phase with the same sched — and their spreads of wrote and of
// the echoed arrival.
func (in *Input) races(s *record.RunSummary) {
	var idx []int32
	for i := range in.reqs {
		if q := &in.reqs[i]; q.outcome != outNotSent && q.t != 0 {
			idx = append(idx, int32(i))
		}
	}
	key := func(i int32) (uint16, uint16, int64) {
		q := &in.reqs[i]
		return q.agent, q.phase, q.sched
	}
	slices.SortFunc(idx, func(a, b int32) int {
		aa, ap, as := key(a)
		ba, bp, bs := key(b)
		return cmp.Or(cmp.Compare(aa, ba), cmp.Compare(ap, bp), cmp.Compare(as, bs))
	})
	var wrote, arrival []int64
	for lo := 0; lo < len(idx); {
		hi := lo + 1
		for hi < len(idx) && sameRelease(&in.reqs[idx[lo]], &in.reqs[idx[hi]]) {
			hi++
		}
		if hi-lo >= 2 {
			s.Races++
			w, a := spread(in.reqs, idx[lo:hi])
			if w >= 0 {
				wrote = append(wrote, w)
			}
			if a >= 0 {
				arrival = append(arrival, a)
			}
		}
		lo = hi
	}
	s.RaceWroteSpread = distOf(wrote)
	s.RaceArrivalSpread = distOf(arrival)
}

func sameRelease(a, b *request) bool {
	return a.agent == b.agent && a.phase == b.phase && a.sched == b.sched
}

// spread returns a release's max − min of wrote (-1 without any) and of
// the echoed arrival (-1 with fewer than two echoes).
func spread(reqs []request, members []int32) (wrote, arrival int64) {
	wLo, wHi, aLo, aHi := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64)
	echoes := 0
	for _, i := range members {
		q := &reqs[i]
		if q.wrote != 0 {
			wLo, wHi = min(wLo, q.wrote), max(wHi, q.wrote)
		}
		if q.arrival != noArrival {
			echoes++
			aLo, aHi = min(aLo, q.arrival), max(aHi, q.arrival)
		}
	}
	wrote, arrival = -1, -1
	if wHi >= wLo {
		wrote = wHi - wLo
	}
	if echoes >= 2 {
		arrival = aHi - aLo
	}
	return wrote, arrival
}

// endReason is completed, or the first other end reason of the runs
// ("interrupted" for a run cut short); "" without runs.
func (in *Input) endReason() string {
	if len(in.Agents) == 0 {
		return ""
	}
	for _, a := range in.Agents {
		if a.End == nil {
			return record.ReasonInterrupted
		}
		if a.End.Reason != record.ReasonCompleted {
			return a.End.Reason
		}
	}
	return record.ReasonCompleted
}

// Summary returns the run document of the Input's runs (computed on first
// use). Latency and pacing percentiles are exact (nearest rank), where
// `rlprobe run`'s come from an HDR histogram (three significant digits).
func (in *Input) Summary() record.RunDoc { return in.prepare().sum }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
