package probe

import (
	"cmp"
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
	s := Summary{Statuses: make(map[string]int), Latency: make(map[string]record.Dist)}
	clients := make(map[string]*ClientSummary)
	latency := make(map[string]*hist)
	var pacing, wroteSpread, arrivalSpread hist
	type releaseKey struct {
		phase string
		sched int64
	}
	type release struct {
		n                  int
		wroteLo, wroteHi   int64
		arrivals           int
		arriveLo, arriveHi int64
	}
	releases := make(map[releaseKey]*release)
	first, last := int64(math.MaxInt64), int64(math.MinInt64)

	for _, r := range results {
		s.Scheduled++
		c := clients[r.Client]
		if c == nil {
			c = &ClientSummary{Client: r.Client}
			clients[r.Client] = c
		}
		switch r.Outcome {
		case record.OutcomeNotSent:
			s.NotSent++
			c.NotSent++
			if s.NotSentReasons == nil {
				s.NotSentReasons = make(map[string]int)
			}
			s.NotSentReasons[r.Err]++
			continue
		case record.OutcomeError:
			s.Errors++
			c.Errors++
			if s.ErrorClasses == nil {
				s.ErrorClasses = make(map[string]int)
			}
			s.ErrorClasses[r.Err]++
		case record.OutcomeResponse:
			s.Responses++
			code := strconv.Itoa(r.Status)
			s.Statuses[code]++
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
		if r.Done != 0 {
			last = max(last, r.Done)
		}
		if r.Sent == 0 {
			continue // failed before its first byte
		}
		perr, start := r.SendTimes()
		first = min(first, start)
		pacing.add(perr)
		if perr > int64(LateThreshold) {
			s.Late++
		}
		if lat, ok := r.Latency(); ok {
			code := strconv.Itoa(r.Status)
			h := latency[code]
			if h == nil {
				h = &hist{}
				latency[code] = h
			}
			h.add(lat)
		}
		k := releaseKey{r.Phase, r.Sched}
		rel := releases[k]
		if rel == nil {
			rel = &release{wroteLo: math.MaxInt64, wroteHi: math.MinInt64, arriveLo: math.MaxInt64, arriveHi: math.MinInt64}
			releases[k] = rel
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
	for _, rel := range releases {
		if rel.n < 2 {
			continue
		}
		s.Races++
		if rel.wroteHi >= rel.wroteLo {
			wroteSpread.add(rel.wroteHi - rel.wroteLo)
		}
		if rel.arrivals >= 2 {
			arrivalSpread.add(rel.arriveHi - rel.arriveLo)
		}
	}
	for code, h := range latency {
		s.Latency[code] = h.dist()
	}
	s.Pacing = pacing.dist()
	s.RaceWroteSpread = wroteSpread.dist()
	s.RaceArrivalSpread = arrivalSpread.dist()
	for _, c := range clients {
		s.Clients = append(s.Clients, *c)
	}
	slices.SortFunc(s.Clients, func(a, b ClientSummary) int { return cmp.Compare(a.Client, b.Client) })
	if first != math.MaxInt64 && last > first {
		s.DurationS = float64(last-first) / 1e9
		s.SentPerS = math.Round(float64(s.Sent)/s.DurationS*10) / 10
	}
	return s
}
