package watch

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// Observation is what one cycle saw of the limiter, the part drift is
// judged on. The zero value saw nothing.
type Observation struct {
	// Responses counts the answers of the cycle (accepted, rejected and
	// other); without any, nothing can have drifted or stayed the same.
	Responses int
	// Accepted and Rejected count the cycle's answers by record.Classify.
	Accepted, Rejected int
	// Advertised is the first rule the answers advertise (quota and
	// window from RateLimit-Policy or a fresh X-RateLimit-*), nil when
	// none does.
	Advertised *verify.Endpoint
	// Dialects are the rate-limit header dialects seen, sorted, without
	// "none".
	Dialects []string
	// RetryAfter says whether rejections carried Retry-After: nil when the
	// cycle saw no rejection.
	RetryAfter *bool
	// Exhausted is, for an exhausting cycle, how many requests of its
	// burst watch's own identity had accepted: the quota, once a rejection
	// shows the burst went beyond it (the burst is sent at once, so the
	// server decides its requests in an order the records do not fix: the
	// count, not the position of the first rejection, is the evidence).
	// Nil when the cycle did not exhaust or saw no rejection within its cap.
	Exhausted *int64
}

// Observe condenses a cycle's results. declared is the reject status of
// the policy (0: 429 or 503). start is the record's start, for reading
// relative times of headers; exhaustPhase names the phase of the
// exhausting burst ("" when the cycle had none).
func Observe(results []record.Result, declared int, start time.Time, exhaustPhase string) Observation {
	var o Observation
	var samples []headers.Sample
	var exhausted int64
	exhaustLimited := false
	for _, r := range results {
		c, _ := record.Classify(r, declared)
		if r.Outcome == record.OutcomeResponse {
			o.Responses++
		}
		switch c {
		case record.ClassAccepted:
			o.Accepted++
		case record.ClassRejected:
			o.Rejected++
			has := len(headers.Values(r.Headers, "Retry-After")) > 0
			if o.RetryAfter == nil || has {
				o.RetryAfter = &has
			}
		}
		if r.Phase == exhaustPhase && exhaustPhase != "" {
			switch c {
			case record.ClassAccepted:
				exhausted++
			case record.ClassRejected:
				exhaustLimited = true
			}
		}
		if c != record.ClassAccepted && c != record.ClassRejected {
			continue
		}
		received := start.Add(time.Duration(max(r.TTFB, r.Done)))
		samples = append(samples, headers.Sample{Sent: start.Add(time.Duration(r.Sent)), Received: received,
			Admitted: c == record.ClassAccepted, Parsed: headers.Parse(r.Headers, received)})
		if o.Advertised == nil {
			if adv := verify.Advertised(r.Headers, received); len(adv) > 0 {
				o.Advertised = &adv[0]
			}
		}
	}
	if exhaustLimited {
		o.Exhausted = &exhausted
	}
	for _, d := range headers.Detect(samples, nil) {
		if d != headers.None {
			o.Dialects = append(o.Dialects, string(d))
		}
	}
	slices.Sort(o.Dialects)
	return o
}

// Drift is one change of the limiter beyond its bounds.
type Drift struct {
	// Field is what changed: limit, window, family, rate, capacity,
	// headers or retry-after.
	Field string `json:"field"`
	// Before and After are the values, as people read them.
	Before string `json:"before"`
	After  string `json:"after"`
	// Source is the evidence: headers, exhaust or infer.
	Source string `json:"source"`
}

// Baseline is what a watch compares each cycle with: the last observation
// that set it, and the first cycle's inference when one ran.
type Baseline struct {
	Observation Observation
	Inference   *infer.Inference
}

// Compare judges the cycle's observation now against the baseline and
// returns every drift, in a fixed order. A cycle without responses has no
// drift (the target's absence is a cycle error, not a drift).
func Compare(b Baseline, now Observation) []Drift {
	if now.Responses == 0 {
		return nil
	}
	var out []Drift
	prev := b.Observation
	pa, na := prev.Advertised, now.Advertised
	switch {
	case pa != nil && na != nil:
		if pa.Limit != na.Limit {
			out = append(out, Drift{Field: "limit", Before: itoa(pa.Limit), After: itoa(na.Limit), Source: "headers"})
		}
		if pa.Window != na.Window {
			out = append(out, Drift{Field: "window", Before: pa.Window.String(), After: na.Window.String(), Source: "headers"})
		}
	case prev.Responses > 0 && (pa == nil) != (na == nil):
		out = append(out, Drift{Field: "headers", Before: advertised(pa), After: advertised(na), Source: "headers"})
	}
	if prev.Responses > 0 && !slices.Equal(syntaxes(prev.Dialects), syntaxes(now.Dialects)) && (pa == nil) == (na == nil) {
		out = append(out, Drift{Field: "headers", Before: list(prev.Dialects), After: list(now.Dialects), Source: "headers"})
	}
	if prev.RetryAfter != nil && now.RetryAfter != nil && *prev.RetryAfter != *now.RetryAfter {
		out = append(out, Drift{Field: "retry-after", Before: sent(*prev.RetryAfter), After: sent(*now.RetryAfter), Source: "headers"})
	}
	if d, ok := exhaustDrift(b, now); ok {
		out = append(out, d)
	}
	return out
}

// exhaustDrift compares an exhausting cycle's count with the baseline's:
// the previous count (±max(1, 10 %)), else the inference's bounds (±1).
func exhaustDrift(b Baseline, now Observation) (Drift, bool) {
	if now.Exhausted == nil {
		return Drift{}, false
	}
	n := *now.Exhausted
	field := "limit"
	if b.Inference != nil && b.Inference.Params.Capacity != nil {
		field = "capacity"
	}
	if p := b.Observation.Exhausted; p != nil {
		tol := max(1, *p/10)
		if n < *p-tol || n > *p+tol {
			return Drift{Field: field, Before: itoa(*p), After: itoa(n), Source: "exhaust"}, true
		}
		return Drift{}, false
	}
	if b.Inference == nil {
		return Drift{}, false
	}
	p := b.Inference.Params.Limit
	if field == "capacity" {
		p = b.Inference.Params.Capacity
	}
	if p != nil && (float64(n) < p.Low-1 || float64(n) > p.High+1) {
		return Drift{Field: field, Before: strconv.FormatFloat(p.Value, 'f', -1, 64), After: itoa(n), Source: "exhaust"}, true
	}
	return Drift{}, false
}

// Update returns the baseline after a cycle: the new observation replaces
// each part it saw, so one change is reported once.
func (b Baseline) Update(now Observation) Baseline {
	if now.Responses == 0 {
		return b
	}
	next := b
	o := &next.Observation
	o.Responses = now.Responses
	o.Advertised, o.Dialects = now.Advertised, now.Dialects
	if now.RetryAfter != nil {
		o.RetryAfter = now.RetryAfter
	}
	if now.Exhausted != nil {
		o.Exhausted = now.Exhausted
	}
	return next
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// syntaxes maps draft-11 to draft-8, the syntax both are written in: which
// of the two a cycle reads depends on values a short cycle may not show
// (t > 0 while r > 0), so draft-8 ↔ draft-11 is never a headers drift.
func syntaxes(ds []string) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		if d == string(headers.Draft11) {
			d = string(headers.Draft8)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func advertised(e *verify.Endpoint) string {
	if e == nil {
		return "none"
	}
	return itoa(e.Limit) + " per " + e.Window.String()
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

func sent(b bool) string {
	if b {
		return "sent"
	}
	return "not sent"
}
