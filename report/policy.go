package report

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rule is the limit drawn against the trailing-window counts: a declared
// policy endpoint, or an inferred model. Either a window (limit per
// window) or a bucket (rate and capacity).
type rule struct {
	method, path string
	limit        int64
	window       time.Duration
	fixed        bool   // a fixed window (per window, not any interval)
	align        string // fixed windows: epoch or first-request
	rate         float64
	capacity     int64
	key          string // global, ip, header:NAME
	status       int    // declared reject status, 0 none
	inferred     bool
}

func (r *rule) isWindow() bool { return r.limit > 0 && r.window > 0 }
func (r *rule) isBucket() bool { return r.rate > 0 && r.capacity > 0 }

// perClient reports whether the quota is per client (counted per lane).
func (r *rule) perClient() bool { return r.key != "" && r.key != "global" && r.key != "unknown" }

// describe says the rule in words: "100 per 60s (sliding)", "capacity 4,
// 1/s".
func (r *rule) describe() string {
	var s string
	switch {
	case r.isWindow():
		kind := "sliding"
		if r.fixed {
			kind = "fixed"
			if r.align != "" {
				kind += ", " + r.align
			}
		}
		s = fmt.Sprintf("%d per %s (%s)", r.limit, fmtDuration(r.window), kind)
	case r.isBucket():
		s = fmt.Sprintf("capacity %d, %s", r.capacity, fmtRate(r.rate))
	default:
		return "none"
	}
	if r.perClient() {
		s += ", key " + r.key
	}
	if r.inferred {
		s += " — inferred"
	}
	return s
}

// endpointView is a policy endpoint as verify writes it (contract names,
// durations in Go syntax, rates "N/s"); numbers are accepted too.
type endpointView struct {
	Path       string          `json:"path"`
	Method     string          `json:"method"`
	Limit      int64           `json:"limit"`
	Window     json.RawMessage `json:"window"`
	WindowType string          `json:"window_type"`
	Align      string          `json:"align"`
	Rate       json.RawMessage `json:"rate"`
	Capacity   int64           `json:"capacity"`
	Burst      *int64          `json:"burst"`
	Key        string          `json:"key"`
	Status     int             `json:"status"`
}

// parsePolicy reads the rules of a policy document: {"endpoints": [...]},
// a single endpoint object, or an array of endpoints. Rules it cannot read
// are left out; nil when there are none.
func parsePolicy(raw json.RawMessage) []rule {
	if len(raw) == 0 {
		return nil
	}
	var eps []endpointView
	var doc struct {
		Endpoints []endpointView `json:"endpoints"`
	}
	if json.Unmarshal(raw, &doc) == nil && doc.Endpoints != nil {
		eps = doc.Endpoints
	} else if err := json.Unmarshal(raw, &eps); err != nil {
		var one endpointView
		if json.Unmarshal(raw, &one) != nil {
			return nil
		}
		eps = []endpointView{one}
	}
	var out []rule
	for _, e := range eps {
		r := rule{method: strings.ToUpper(e.Method), path: e.Path, limit: e.Limit, key: e.Key, status: e.Status,
			fixed: e.WindowType == "fixed", align: e.Align, capacity: e.Capacity}
		if r.fixed && r.align == "" {
			r.align = "first-request"
		}
		r.window, _ = parseWindow(e.Window)
		r.rate, _ = parseRate(e.Rate)
		if r.capacity == 0 && e.Burst != nil {
			r.capacity = *e.Burst + 1
		}
		if r.isWindow() || r.isBucket() || r.status != 0 {
			out = append(out, r)
		}
	}
	return out
}

// parseWindow reads a window: a Go duration string or a number of seconds.
func parseWindow(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return time.ParseDuration(s)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}

// parseRate reads a rate in requests per second: "5/s", "300/m", "2r/s",
// "1/h", or a number (per second).
func parseRate(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, err
	}
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("report: rate %q: want N/s, N/m or N/h", s)
	}
	num = strings.TrimSuffix(num, "r")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("report: rate %q: %w", s, err)
	}
	switch unit {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, fmt.Errorf("report: rate %q: unknown unit %q", s, unit)
}

// inferredRule turns an inference into a rule, nil when it has no usable
// parameters.
func inferredRule(inf *Inference) *rule {
	r := rule{inferred: true}
	if inf.Key != nil {
		r.key = *inf.Key
	}
	if inf.RejectStatus != nil {
		r.status = *inf.RejectStatus
	}
	p := inf.Params
	switch inf.Algorithm {
	case "fixed-window", "sliding-log", "sliding-window-counter":
		if p.Limit == nil || p.WindowS == nil {
			return nil
		}
		r.limit = int64(math.Round(p.Limit.Value))
		r.window = time.Duration(p.WindowS.Value * float64(time.Second))
		if inf.Algorithm == "fixed-window" {
			r.fixed = true
			r.align = "first-request"
			if inf.Alignment != nil && *inf.Alignment != "unknown" {
				r.align = *inf.Alignment
			}
		}
	case "token-bucket", "leaky-bucket-queue":
		if p.Capacity == nil || p.RatePerS == nil {
			return nil
		}
		r.capacity = int64(math.Round(p.Capacity.Value))
		r.rate = p.RatePerS.Value
	default:
		return nil
	}
	if !r.isWindow() && !r.isBucket() {
		return nil
	}
	return &r
}

// fmtDuration formats a duration for people: 60s, 1.5s, 250ms, 2m0s.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtRate formats a rate per second: "5/s", "0.5/s", "12/m" when below one
// per second and whole per minute.
func fmtRate(r float64) string {
	if r < 1 {
		if m := r * 60; math.Abs(m-math.Round(m)) < 1e-9 {
			return strconv.FormatFloat(math.Round(m), 'f', -1, 64) + "/m"
		}
	}
	return strconv.FormatFloat(round4(r), 'f', -1, 64) + "/s"
}

// round4 rounds to 4 significant digits.
func round4(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	e := math.Floor(math.Log10(math.Abs(v)))
	p := math.Pow(10, 3-e)
	return math.Round(v*p) / p
}
