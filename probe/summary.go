package probe

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rlprobe/rlprobe/record"
)

// Summary condenses a run's results: counts per outcome, status, error
// class and client, latency per status, pacing error and race spread. It
// is the body of `rlprobe run`'s document (record.RunDoc); every number
// carries its unit in its JSON name.
//
// Accepted, Rejected and Other are record.Classify's classes with no
// declared reject status (a run knows no policy): Rejected is 429 or 503,
// Other every other status and every cache hit. Every distribution is in
// microseconds, estimated by an HDR histogram of three significant digits.
type Summary = record.RunSummary

// ClientSummary counts one client's results.
type ClientSummary = record.ClientSummary

// histMaxUS is the largest value a histogram holds: one hour.
const histMaxUS = 3600 * 1_000_000

// hist accumulates nanosecond values as microseconds, in an HDR histogram
// of three significant digits: a percentile or the maximum it gives is the
// highest value of its bucket.
type hist struct{ h *hdrhistogram.Histogram }

func (h *hist) add(ns int64) {
	if h.h == nil {
		h.h = hdrhistogram.New(0, histMaxUS, 3)
	}
	_ = h.h.RecordValue(min(max(ns/1000, 0), histMaxUS))
}

func (h *hist) dist() record.Dist {
	if h.h == nil || h.h.TotalCount() == 0 {
		return record.Dist{}
	}
	return record.Dist{
		Count:  h.h.TotalCount(),
		MeanUS: math.Round(h.h.Mean()*10) / 10,
		P50US:  h.h.ValueAtQuantile(50),
		P90US:  h.h.ValueAtQuantile(90),
		P99US:  h.h.ValueAtQuantile(99),
		P999US: h.h.ValueAtQuantile(99.9),
		MaxUS:  h.h.Max(),
	}
}

// Summarize condenses results (of one or several runs, in any order).
func Summarize(results []record.Result) Summary {
	sm := NewSummarizer(true)
	for _, r := range results {
		sm.Add(r)
	}
	return sm.Summary()
}

// Summarizer condenses results one at a time, in any order, into the
// Summary that Summarize gives of them all, holding only counts and
// histograms (and, when it tracks races, one entry per distinct phase and
// scheduled instant). It is not safe for concurrent use.
type Summarizer struct {
	s           Summary
	clients     map[string]*ClientSummary
	latency     map[string]*hist
	pacing      hist
	races       raceSet // nil: races not tracked
	first, last int64
}

// NewSummarizer returns an empty Summarizer. With races false it does not
// track the requests released together (Summary.Races and the race
// spreads stay zero): for a streamed run, which has no batches and whose
// distinct scheduled instants are as many as its sends.
func NewSummarizer(races bool) *Summarizer {
	sm := &Summarizer{
		s:       Summary{Statuses: make(map[string]int), Latency: make(map[string]record.Dist)},
		clients: make(map[string]*ClientSummary),
		latency: make(map[string]*hist),
		first:   math.MaxInt64,
		last:    math.MinInt64,
	}
	if races {
		sm.races = raceSet{}
	}
	return sm
}

// Add counts r.
func (sm *Summarizer) Add(r record.Result) {
	s := &sm.s
	s.Scheduled++
	c := sm.clients[r.Client]
	if c == nil {
		c = &ClientSummary{Client: r.Client}
		sm.clients[r.Client] = c
	}
	if !countOutcome(s, c, r) {
		return // never sent
	}
	if r.Done != 0 {
		sm.last = max(sm.last, r.Done)
	}
	if r.Sent == 0 {
		return // failed before its first byte
	}
	perr, start := r.SendTimes()
	sm.first = min(sm.first, start)
	sm.pacing.add(perr)
	if perr > int64(LateThreshold) {
		s.Late++
	}
	if lat, ok := r.Latency(); ok {
		code := strconv.Itoa(r.Status)
		if sm.latency[code] == nil {
			sm.latency[code] = &hist{}
		}
		sm.latency[code].add(lat)
	}
	if sm.races != nil {
		sm.races.add(r)
	}
}

// Summary returns the summary of the results added so far.
func (sm *Summarizer) Summary() Summary {
	s := sm.s
	s.Statuses = maps.Clone(sm.s.Statuses)
	s.NotSentReasons, s.ErrorClasses = maps.Clone(sm.s.NotSentReasons), maps.Clone(sm.s.ErrorClasses)
	s.Latency = make(map[string]record.Dist, len(sm.latency))
	s.Clients = nil
	if sm.races != nil {
		s.Races, s.RaceWroteSpread, s.RaceArrivalSpread = sm.races.spreads()
	}
	for code, h := range sm.latency {
		s.Latency[code] = h.dist()
	}
	s.Pacing = sm.pacing.dist()
	for _, c := range sm.clients {
		s.Clients = append(s.Clients, *c)
	}
	slices.SortFunc(s.Clients, func(a, b ClientSummary) int { return cmp.Compare(a.Client, b.Client) })
	if sm.first != math.MaxInt64 && sm.last > sm.first {
		s.DurationS = float64(sm.last-sm.first) / 1e9
		s.SentPerS = math.Round(float64(s.Sent)/s.DurationS*10) / 10
	}
	return s
}

// countOutcome counts r in the run's and its client's tallies, by
// record.Classify's classes with no declared reject status; it reports
// whether r was sent.
func countOutcome(s *Summary, c *ClientSummary, r record.Result) (sent bool) {
	switch r.Outcome {
	case record.OutcomeNotSent:
		s.NotSent++
		c.NotSent++
		if s.NotSentReasons == nil {
			s.NotSentReasons = make(map[string]int)
		}
		s.NotSentReasons[r.Err]++
		return false
	case record.OutcomeError:
		s.Errors++
		c.Errors++
		if s.ErrorClasses == nil {
			s.ErrorClasses = make(map[string]int)
		}
		s.ErrorClasses[r.Err]++
	case record.OutcomeResponse:
		s.Responses++
		s.Statuses[strconv.Itoa(r.Status)]++
		switch cls, _ := record.Classify(r, 0); cls {
		case record.ClassAccepted:
			s.Accepted++
			c.Accepted++
		case record.ClassRejected:
			s.Rejected++
			c.Rejected++
		default:
			s.Other++
			c.Other++
		}
	}
	s.Sent++
	c.Sent++
	return true
}

// raceSet gathers the requests released together: same phase, same
// scheduled instant.
type raceSet map[raceKey]*release

type raceKey struct {
	phase string
	sched int64
}

// release is one batch: how many, and the spread of their last bytes
// written and of their echoed arrivals.
type release struct {
	n                  int
	wroteLo, wroteHi   int64
	arrivals           int
	arriveLo, arriveHi int64
}

func (rs raceSet) add(r record.Result) {
	k := raceKey{r.Phase, r.Sched}
	rel := rs[k]
	if rel == nil {
		rel = &release{wroteLo: math.MaxInt64, wroteHi: math.MinInt64, arriveLo: math.MaxInt64, arriveHi: math.MinInt64}
		rs[k] = rel
	}
	rel.n++
	if r.Wrote != 0 {
		rel.wroteLo, rel.wroteHi = min(rel.wroteLo, r.Wrote), max(rel.wroteHi, r.Wrote)
	}
	if r.Arrival != nil {
		rel.arrivals++
		rel.arriveLo, rel.arriveHi = min(rel.arriveLo, *r.Arrival), max(rel.arriveHi, *r.Arrival)
	}
}

// spreads counts the batches of two or more and the distributions of their
// write and arrival spreads.
func (rs raceSet) spreads() (races int, wrote, arrival record.Dist) {
	var w, a hist
	for _, rel := range rs {
		if rel.n < 2 {
			continue
		}
		races++
		if rel.wroteHi >= rel.wroteLo {
			w.add(rel.wroteHi - rel.wroteLo)
		}
		if rel.arrivals >= 2 {
			a.add(rel.arriveHi - rel.arriveLo)
		}
	}
	return races, w.dist(), a.dist()
}
