package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
	"golang.org/x/net/http/httpguts"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
)

// PolicyVersion is the only policy file version this package reads.
const PolicyVersion = 1

// WindowType says how a window policy counts (contract names).
type WindowType string

// Window types.
const (
	// Sliding: at most Limit accepted requests in any interval of length
	// Window. The default.
	Sliding WindowType = "sliding"
	// Fixed: at most Limit accepted requests per window; Align says where
	// windows start.
	Fixed WindowType = "fixed"
)

// Keys a policy may declare (besides "header:NAME").
const (
	KeyGlobal = "global" // one quota shared by every client
	KeyIP     = "ip"     // one quota per client IP address
)

// Retry-After expectations.
const (
	RetryAfterRequired = "required" // a rejection without Retry-After is an error
	RetryAfterOptional = "optional" // ... a warning (the default)
)

// dialects are the header dialect names of the contract, in its order
// (headers.Dialects: the served ones and the vendor dialects read).
var dialects = func() []string {
	out := make([]string, len(headers.Dialects))
	for i, d := range headers.Dialects {
		out[i] = string(d)
	}
	return out
}()

// Policy is a declared rate-limit policy: one rule per endpoint (several
// rules may name the same endpoint: each must hold). It is plain data: the
// same struct comes from flags, from the draft syntax of RateLimit-Policy,
// and from YAML or JSON files, and it is what the check and analyze
// documents print. The zero value is not valid; call Validate.
//
// A Policy is not safe for concurrent mutation; reading is.
type Policy struct {
	// Version is the file format version, PolicyVersion.
	Version int `json:"version"`
	// Endpoints are the rules; at least one.
	Endpoints []Endpoint `json:"endpoints"`

	source string         // file name for messages; "" for flags
	lines  map[string]int // "version", "endpoints" → line, for files
}

// Endpoint is one rule: either a window (Limit per Window) or a bucket
// (Rate and Capacity), with what rejections and headers must look like.
// Zero fields mean "not declared". Its JSON form uses the contract's names
// with durations in Go syntax ("60s") and rates as "N/s".
type Endpoint struct {
	// Path selects the requests the rule covers by URL path ("" = all);
	// `check BASE_URL` appends it to the base URL.
	Path string
	// Method selects requests by method ("" = any); upper case.
	Method string
	// Name is the policy name of a RateLimit-Policy item, if any.
	Name string

	// Limit is the number of accepted requests allowed per Window.
	Limit int64
	// Window is the window length.
	Window time.Duration
	// WindowType is Sliding (default) or Fixed.
	WindowType WindowType
	// Align says where fixed windows start: limiter.AlignEpoch or
	// limiter.AlignFirstRequest (default), or limiter.AlignTimer — windows
	// on the limiter's own timer, at Phase — which only an inference
	// gives (a policy file cannot name a timer's phase). Only for Fixed.
	Align limiter.Align
	// Phase places AlignTimer windows: they start at Phase + k·Window
	// since the Unix epoch, give or take PhaseSpread (a measured phase),
	// 0 ≤ Phase < Window. A window whose start is that uncertain counts a
	// request as surely inside only when it is for every start the spread
	// allows.
	Phase, PhaseSpread time.Duration

	// Rate is a bucket's refill rate in requests per second.
	Rate float64
	// Capacity is how many requests a full bucket accepts at once.
	Capacity int64
	// Burst is nginx's burst (Capacity − 1) when declared that way; nil
	// otherwise. Normalize folds it into Capacity.
	Burst *int64

	// Key says who shares a quota: KeyGlobal, KeyIP or "header:NAME".
	// Empty means KeyGlobal.
	Key string
	// Status is the declared reject status; 0 means 429 or 503.
	Status int
	// Headers are the expected header dialects (contract names); empty
	// means none declared.
	Headers []string
	// RetryAfter is RetryAfterRequired or RetryAfterOptional ("" =
	// optional).
	RetryAfter string
	// Penalty is what the limiter does to a key after refusing it, beyond
	// counting (limiter.PenaltyKind): block:D for any rule, extend and
	// restart for windows only. The zero Penalty declares none, and a
	// penalty the target applies anyway is the finding
	// undeclared-penalty.
	Penalty limiter.Penalty

	lines map[string]int // field → line, for files
}

// IsBucket reports whether the rule is a bucket (Rate and Capacity) rather
// than a window (Limit per Window).
func (e *Endpoint) IsBucket() bool { return e.Rate > 0 || e.Capacity > 0 || e.Burst != nil }

// Quota is the fresh quota: Limit for windows, Capacity for buckets.
func (e *Endpoint) Quota() int64 {
	if e.IsBucket() {
		return e.capacity()
	}
	return e.Limit
}

func (e *Endpoint) capacity() int64 {
	if e.Capacity == 0 && e.Burst != nil {
		return *e.Burst + 1
	}
	return e.Capacity
}

// Period is the time a fresh quota takes to come back: Window for windows,
// Capacity/Rate for buckets, at least one refill interval.
func (e *Endpoint) Period() time.Duration {
	if !e.IsBucket() {
		return e.Window
	}
	if e.Rate <= 0 {
		return 0
	}
	c := max(e.capacity(), 1)
	return time.Duration(math.Ceil(float64(c) / e.Rate * 1e9))
}

// Fresh is the time after a key's last refusal before its quota is surely
// whole again when the key is left alone: the period, or a declared block
// if longer (extend and restart end a period after the last request or
// refusal, as the period does).
func (e *Endpoint) Fresh() time.Duration {
	if e.Penalty.Kind == limiter.PenaltyBlock {
		return max(e.Period(), e.Penalty.Duration)
	}
	return e.Period()
}

// PerClient reports whether each client has its own quota.
func (e *Endpoint) PerClient() bool { return e.Key != "" && e.Key != KeyGlobal }

// cmp returns s, or def when s is empty.
func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FormatRate formats requests per second in the contract's rate grammar,
// exactly: units.FormatRate, kept for callers of verify.
func FormatRate(r float64) string { return units.FormatRate(r) }

// problems accumulates the problems of a policy, each a problem.Problem
// whose Field is the offending field as a path ("endpoints[0].window"; for
// flags, the flag's name) and whose Line is the line in the policy file (0
// when unknown).
type problems struct {
	list []problem.Problem
}

func (ps *problems) add(field string, line int, format string, a ...any) {
	ps.list = append(ps.list, problem.Problem{Field: field, Line: line, Message: fmt.Sprintf(format, a...)})
}

// addErr adds the problems err reports (problem.Under) at field and line.
func (ps *problems) addErr(field string, line int, err error) {
	for _, p := range problem.Under(field, err) {
		p.Line = line
		ps.list = append(ps.list, p)
	}
}

// err is the *problem.Error "verify: invalid policy" of the problems, in
// source (a file name, or "" for flags and --policy); nil for none.
func (ps *problems) err(source string) error {
	if len(ps.list) == 0 {
		return nil
	}
	return &problem.Error{What: "verify: invalid policy", Source: source, Problems: ps.list}
}

// Validate reports every problem of the policy at once as a
// *problem.Error "verify: invalid policy" (its Source the policy file's
// name, "" for flags and --policy), each problem with its field (and line,
// for files). It never panics.
func (p *Policy) Validate() error {
	var ps problems
	p.validate(&ps)
	return ps.err(p.source)
}

func (p *Policy) validate(ps *problems) {
	if p.Version != PolicyVersion {
		ps.add("version", p.lines["version"], "must be %d, not %d", PolicyVersion, p.Version)
	}
	if len(p.Endpoints) == 0 {
		ps.add("endpoints", p.lines["endpoints"], "declare a policy: a limit and a window, or a rate and a capacity")
	}
	for i := range p.Endpoints {
		p.Endpoints[i].validate(fmt.Sprintf("endpoints[%d].", i), ps)
	}
	if len(p.Endpoints) == 1 && p.lines == nil {
		// Flags and --policy: name fields like the flags.
		for i := range ps.list {
			ps.list[i].Field = strings.TrimPrefix(ps.list[i].Field, "endpoints[0].")
		}
	}
}

func (e *Endpoint) line(field string) int { return e.lines[field] }

func (e *Endpoint) validate(prefix string, ps *problems) {
	add := func(field, format string, a ...any) { ps.add(prefix+field, e.line(field), format, a...) }
	if e.Path != "" && !strings.HasPrefix(e.Path, "/") {
		add("path", "must start with /, not %q", e.Path)
	}
	if e.Method != "" && !httpguts.ValidHeaderFieldName(e.Method) {
		add("method", "%q is not an HTTP method", e.Method)
	}
	_, limitGiven := e.lines["limit"]
	_, windowGiven := e.lines["window"]
	_, rateGiven := e.lines["rate"]
	_, capGiven := e.lines["capacity"]
	window := e.Limit != 0 || e.Window != 0 || e.WindowType != "" || e.Align != "" || limitGiven || windowGiven
	bucket := e.IsBucket() || rateGiven || capGiven
	switch {
	case window && bucket:
		add("rate", "a rule is either a window (limit, window) or a bucket (rate, capacity/burst), not both")
	case !window && !bucket:
		add("limit", "declare a policy: limit and window, or rate and capacity (or burst)")
	}
	if window {
		if e.Limit < 1 {
			add("limit", "must be at least 1, not %d", e.Limit)
		}
		if e.Window <= 0 {
			add("window", "must be a positive duration such as 60s, not %s", e.Window)
		}
		switch e.WindowType {
		case "", Sliding, Fixed:
		default:
			add("window_type", "must be sliding or fixed, not %q", e.WindowType)
		}
		switch e.Align {
		case "":
		case limiter.AlignEpoch, limiter.AlignFirstRequest, limiter.AlignTimer:
			if e.WindowType != Fixed {
				add("align", "applies to fixed windows only: add window_type fixed")
			}
		default:
			add("align", "must be epoch or first-request, not %q", e.Align)
		}
		switch {
		case e.Align != limiter.AlignTimer && (e.Phase != 0 || e.PhaseSpread != 0):
			add("phase", "applies to timer-aligned windows only")
		case e.Phase < 0 || (e.Window > 0 && e.Phase >= e.Window):
			add("phase", "must lie in [0, window), not %v", e.Phase)
		case e.PhaseSpread < 0:
			add("phase", "spread must not be negative, not %v", e.PhaseSpread)
		}
	}
	if bucket {
		if !(e.Rate > 0) || math.IsInf(e.Rate, 0) {
			add("rate", "must be a positive rate such as 10/s, not %v", e.Rate)
		}
		switch {
		case e.Capacity != 0 && e.Burst != nil:
			add("burst", "give capacity or burst, not both (capacity = burst + 1)")
		case e.Burst != nil:
			if *e.Burst < 0 || *e.Burst == math.MaxInt64 {
				add("burst", "must be 0 or more, not %d", *e.Burst)
			}
		case e.Capacity < 1:
			add("capacity", "must be at least 1 (or give burst = capacity − 1), not %d", e.Capacity)
		}
	}
	switch k := e.Key; {
	case k == "", k == KeyGlobal, k == KeyIP:
	case strings.HasPrefix(k, "header:"):
		if name := strings.TrimPrefix(k, "header:"); !httpguts.ValidHeaderFieldName(name) {
			add("key", "header:NAME needs a header name, not %q", name)
		}
	default:
		add("key", "must be global, ip or header:NAME, not %q", k)
	}
	if e.Status != 0 && (e.Status < 400 || e.Status > 599) {
		add("status", "a reject status is 400 to 599, not %d", e.Status)
	}
	for _, d := range e.Headers {
		if !slices.Contains(dialects, d) {
			add("headers", "unknown dialect %q (want %s)", d, strings.Join(dialects, ", "))
		}
	}
	if slices.Contains(e.Headers, "none") && len(e.Headers) > 1 {
		add("headers", "none excludes other dialects")
	}
	switch e.RetryAfter {
	case "", RetryAfterRequired, RetryAfterOptional:
	default:
		add("retry_after", "must be required or optional, not %q", e.RetryAfter)
	}
	switch pen := e.Penalty; pen.Kind {
	case limiter.PenaltyNone:
	case limiter.PenaltyBlock:
		if pen.Duration <= 0 {
			add("penalty", "a block lasts more than 0, e.g. block:30s")
		}
	case limiter.PenaltyExtend, limiter.PenaltyRestart:
		if bucket && !window {
			add("penalty", "%s moves a window's end: it needs a window policy (limit, window); a bucket takes block:DURATION", pen.Kind)
		}
	default:
		add("penalty", "must be block:DURATION (e.g. block:30s), extend or restart, not %q", pen.Kind)
	}
}

// Normalize returns the policy with defaults made explicit: capacity
// instead of burst, window type sliding, fixed windows first-request
// aligned, key global, methods upper case, header dialects sorted. Call it
// on a valid policy. Line numbers kept for messages are dropped.
func (p Policy) Normalize() Policy {
	p.Endpoints = slices.Clone(p.Endpoints)
	for i := range p.Endpoints {
		e := &p.Endpoints[i]
		e.Method = strings.ToUpper(e.Method)
		if e.IsBucket() {
			e.Capacity = e.capacity()
			e.Burst = nil
		} else {
			if e.WindowType == "" {
				e.WindowType = Sliding
			}
			if e.WindowType == Fixed && e.Align == "" {
				e.Align = limiter.AlignFirstRequest
			}
		}
		if e.Key == "" {
			e.Key = KeyGlobal
		}
		if e.RetryAfter == "" {
			e.RetryAfter = RetryAfterOptional
		}
		e.Headers = slices.Clone(e.Headers)
		slices.SortFunc(e.Headers, func(a, b string) int { return slices.Index(dialects, a) - slices.Index(dialects, b) })
		e.Headers = slices.Compact(e.Headers)
		if len(e.Headers) == 0 {
			e.Headers = nil
		}
		e.lines = nil
	}
	p.source, p.lines = "", nil
	return p
}

// endpointJSON is the wire form of an Endpoint.
type endpointJSON struct {
	Path       string   `json:"path,omitempty"`
	Method     string   `json:"method,omitempty"`
	Name       string   `json:"name,omitempty"`
	Limit      int64    `json:"limit,omitempty"`
	Window     string   `json:"window,omitempty"`
	WindowType string   `json:"window_type,omitempty"`
	Align      string   `json:"align,omitempty"`
	Phase      string   `json:"phase,omitempty"`
	PhaseSprd  string   `json:"phase_spread,omitempty"`
	Rate       string   `json:"rate,omitempty"`
	Capacity   int64    `json:"capacity,omitempty"`
	Burst      *int64   `json:"burst,omitempty"`
	Key        string   `json:"key,omitempty"`
	Status     int      `json:"status,omitempty"`
	Headers    []string `json:"headers,omitempty"`
	RetryAfter string   `json:"retry_after,omitempty"`
	Penalty    string   `json:"penalty,omitempty"`
}

// MarshalJSON writes the rule with the contract's names, durations in Go
// syntax and rates as "N/s".
func (e Endpoint) MarshalJSON() ([]byte, error) {
	w := endpointJSON{
		Path: e.Path, Method: e.Method, Name: e.Name, Limit: e.Limit,
		WindowType: string(e.WindowType), Align: string(e.Align),
		Capacity: e.Capacity, Burst: e.Burst, Key: e.Key, Status: e.Status,
		Headers: e.Headers, RetryAfter: e.RetryAfter, Penalty: e.Penalty.String(),
	}
	if e.Window != 0 {
		w.Window = e.Window.String()
	}
	if e.Align == limiter.AlignTimer {
		w.Phase, w.PhaseSprd = e.Phase.String(), e.PhaseSpread.String()
	}
	if e.Rate != 0 {
		w.Rate = units.FormatRate(e.Rate)
	}
	return json.Marshal(w)
}

// ParseDraftPolicy parses a policy in the syntax of the RateLimit-Policy
// field: the -08…-10 form `"name";q=100;w=60` (several items separated by
// commas) or the -06/-07 form `100;w=60`. Each item becomes one rule (q is
// the limit, w the window in seconds); `qu` must be "requests" and `pk` is
// ignored. The rules are not validated.
func ParseDraftPolicy(s string) ([]Endpoint, error) {
	list, err := httpsfv.UnmarshalList([]string{s})
	if err != nil {
		return nil, problem.New("verify", "", "--policy %q is not a RateLimit-Policy value (want \"name\";q=100;w=60): %v", s, err)
	}
	var ps problems
	var out []Endpoint
	for i, m := range list {
		item, ok := m.(httpsfv.Item)
		field := fmt.Sprintf("policy[%d]", i)
		if !ok {
			ps.add(field, 0, "inner lists are not policies")
			continue
		}
		var e Endpoint
		var q, w int64
		var hasQ, hasW bool
		switch v := item.Value.(type) {
		case string:
			e.Name = v
		case httpsfv.Token:
			e.Name = string(v)
		case int64:
			q, hasQ = v, true // -06/-07: the item is the quota
		default:
			ps.add(field, 0, "an item is a policy name (\"name\") or a quota (100), not %v", v)
		}
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			switch k {
			case "q":
				n, ok := v.(int64)
				if !ok || n < 0 {
					ps.add(field+".q", 0, "must be a non-negative integer")
				}
				q, hasQ = n, true
			case "w":
				n, ok := v.(int64)
				if !ok || n <= 0 {
					ps.add(field+".w", 0, "must be a positive integer (seconds)")
				}
				w, hasW = n, true
			case "qu":
				if u, _ := v.(string); u != "requests" {
					ps.add(field+".qu", 0, "only the quota unit \"requests\" can be checked")
				}
			case "pk":
			default:
				ps.add(field+"."+k, 0, "unknown parameter (want q, w, qu, pk)")
			}
		}
		if !hasQ {
			ps.add(field+".q", 0, "missing: the quota, e.g. q=100")
		}
		if !hasW {
			ps.add(field+".w", 0, "missing: the window in seconds, e.g. w=60")
		}
		if w > math.MaxInt64/int64(time.Second) {
			ps.add(field+".w", 0, "too large")
			w = 0
		}
		e.Limit, e.Window = q, time.Duration(w)*time.Second
		out = append(out, e)
	}
	if err := ps.err(""); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrNoPolicy is returned when no policy was declared and the target
// advertises none either.
var ErrNoPolicy = errors.New("verify: no policy declared and the target advertises none: declare a policy (--limit N --window D, --rate R --capacity C, --policy or --policy-file)")
