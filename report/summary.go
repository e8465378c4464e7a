package report

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// Summary condenses the runs of an Input, for display and as the "run"
// member of the report document (schema rlprobe.run/v1). Counts follow the
// contract's outcome classes; Accepted counts every 2xx answer, Delayed
// those of them that were also delayed (see DelayedThreshold). Latency and
// pacing error are those of `rlprobe run` (record.Result.Latency and
// SendTimes), in microseconds, but exact (nearest rank) where run's come
// from an HDR histogram (three significant digits).
type Summary struct {
	Schema    string   `json:"schema"` // SchemaRun
	Tool      string   `json:"tool"`
	Complete  bool     `json:"complete"`
	Reason    string   `json:"reason"` // completed, or the first other end reason ("interrupted" for a run cut short)
	Targets   []string `json:"targets"`
	Scheduled int      `json:"scheduled"`
	Sent      int      `json:"sent"` // responses + errors
	Responses int      `json:"responses"`
	Errors    int      `json:"errors"`
	NotSent   int      `json:"not_sent"`
	Accepted  int      `json:"accepted"`
	Delayed   int      `json:"delayed"`
	Rejected  int      `json:"rejected"`
	Other     int      `json:"other"`
	// Statuses counts responses by status code ("200": n).
	Statuses map[string]int `json:"statuses"`
	// ErrorClasses counts errors by class; NotSentReasons not-sent
	// results by reason.
	ErrorClasses   map[string]int `json:"error_classes,omitempty"`
	NotSentReasons map[string]int `json:"not_sent_reasons,omitempty"`
	// Clients has one entry per client identity, in order of their labels.
	Clients []ClientSummary `json:"clients"`
	// Latency is the distribution of latency per status code.
	Latency map[string]record.Dist `json:"latency"`
	// Pacing is the distribution of sent − scheduled (negative counts as 0).
	Pacing record.Dist `json:"pacing_error"`
	// DelayedThresholdMS is the latency from which an accepted request is
	// shown as delayed; 0 when there were too few answers to tell.
	DelayedThresholdMS float64 `json:"delayed_threshold_ms"`
	// DurationS is the span from the first send to the last answer.
	DurationS float64 `json:"duration_s"`
	// SentPerS is Sent / DurationS (0 when the span is empty).
	SentPerS   float64 `json:"sent_per_s"`
	RecordFile string  `json:"record_file"`
}

// ClientSummary counts one client's results.
type ClientSummary struct {
	Client   string `json:"client"`
	Sent     int    `json:"sent"`
	Accepted int    `json:"accepted"`
	Delayed  int    `json:"delayed"`
	Rejected int    `json:"rejected"`
	Other    int    `json:"other"`
	Errors   int    `json:"errors"`
	NotSent  int    `json:"not_sent"`
}

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
	rule      *rule   // the limit drawn; nil when none is known
	rules     []rule  // every declared rule
	rejects   []int   // statuses counted as rejected
	covered   []bool  // by route: does rule cover it
	threshold int64   // delayed threshold, ns; 0 none
	first     int64   // earliest send
	last      int64   // latest send or answer
	lastSend  int64   // latest send (the timeline's end)
	edges     *rule   // the fixed windows whose edges are drawn; nil when none
	laneN     []int   // requests per lane
	sum       Summary // the run summary
}

// prepare computes (once) the classes and the summary.
func (in *Input) prepare() *prepared {
	if in.prep != nil {
		return in.prep
	}
	p := &prepared{rejects: []int{429, 503}}
	for i := range in.Checks {
		p.rules = append(p.rules, parsePolicy(in.Checks[i].Policy)...)
	}
	for i := range in.Agents {
		p.rules = append(p.rules, parsePolicy(in.Agents[i].Header.Policy)...)
	}
	for i := range p.rules {
		if r := &p.rules[i]; p.rule == nil && (r.isWindow() || r.isBucket()) {
			p.rule = r
		}
		if s := p.rules[i].status; s != 0 && !slices.Contains(p.rejects, s) {
			p.rejects = append(p.rejects, s)
		}
	}
	for i := range in.Inferences {
		inf := &in.Inferences[i]
		if inf.RejectStatus != nil && *inf.RejectStatus != 0 && !slices.Contains(p.rejects, *inf.RejectStatus) {
			p.rejects = append(p.rejects, *inf.RejectStatus)
		}
		if p.rule == nil {
			p.rule = inferredRule(inf)
		}
	}
	p.covered = make([]bool, len(in.routes))
	for i, rt := range in.routes {
		p.covered[i] = p.rule == nil || ((p.rule.method == "" || strings.EqualFold(p.rule.method, rt.method)) &&
			(p.rule.path == "" || p.rule.path == rt.path))
	}

	// Classes, then the delayed threshold from the answers' latencies.
	var lats []int64
	p.first, p.last = math.MaxInt64, math.MinInt64
	p.laneN = make([]int, len(in.lanes))
	for i := range in.reqs {
		q := &in.reqs[i]
		switch {
		case q.outcome == outNotSent:
			q.class = NotSent
		case q.outcome == outError:
			q.class = Error
		case q.status >= 200 && q.status <= 299:
			q.class = Accepted
		case slices.Contains(p.rejects, int(q.status)):
			q.class = Rejected
		default:
			q.class = Other
		}
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
	p.edges = in.edgeRule(p.rule)
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
	p.sum = in.summarize(p)
	in.prep = p
	return p
}

// summarize counts the classified requests.
func (in *Input) summarize(p *prepared) Summary {
	s := Summary{
		Schema: SchemaRun, Tool: in.tool(), Complete: in.Complete(), Reason: record.ReasonCompleted,
		Targets: in.Targets(), Statuses: map[string]int{}, Latency: map[string]record.Dist{},
		RecordFile: strings.Join(in.Files, ", "),
	}
	for _, a := range in.Agents {
		if a.End == nil {
			s.Reason = record.ReasonInterrupted
			break
		}
		if a.End.Reason != record.ReasonCompleted {
			s.Reason = a.End.Reason
			break
		}
	}
	if len(in.Agents) == 0 {
		s.Reason = ""
	}
	clients := make([]ClientSummary, len(in.lanes))
	for i, c := range in.lanes {
		clients[i].Client = c
	}
	byStatus := map[int16][]int64{}
	var pacing []int64
	for i := range in.reqs {
		q := &in.reqs[i]
		c := &clients[q.lane]
		s.Scheduled++
		switch q.outcome {
		case outNotSent:
			s.NotSent++
			c.NotSent++
			if s.NotSentReasons == nil {
				s.NotSentReasons = map[string]int{}
			}
			s.NotSentReasons[cmpOr(in.reasons[q.reason], "unknown")]++
			continue
		case outError:
			s.Errors++
			c.Errors++
			if s.ErrorClasses == nil {
				s.ErrorClasses = map[string]int{}
			}
			s.ErrorClasses[cmpOr(in.reasons[q.reason], "other")]++
		default:
			s.Responses++
			s.Statuses[strconv.Itoa(int(q.status))]++
			if q.total >= 0 {
				byStatus[q.status] = append(byStatus[q.status], q.total)
			}
			switch q.class {
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
		}
		s.Sent++
		c.Sent++
		pacing = append(pacing, max(q.pace, 0))
	}
	for st, l := range byStatus {
		s.Latency[strconv.Itoa(int(st))] = distOf(l)
	}
	s.Pacing = distOf(pacing)
	// In order of their labels, as run lists them.
	slices.SortStableFunc(clients, func(a, b ClientSummary) int { return strings.Compare(a.Client, b.Client) })
	s.Clients = clients
	if s.Clients == nil {
		s.Clients = []ClientSummary{}
	}
	s.DelayedThresholdMS = math.Round(float64(p.threshold)/1e3) / 1e3
	if span := p.last - p.first; span > 0 {
		s.DurationS = math.Round(float64(span)/1e6) / 1e3
		s.SentPerS = math.Round(float64(s.Sent)/(float64(span)/1e9)*1e3) / 1e3
	}
	return s
}

// Summary returns the run summary (computed on first use).
func (in *Input) Summary() Summary { return in.prepare().sum }
