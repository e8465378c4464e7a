package testserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// RouteSpec is one route as a user writes it: the serve flags, or one entry
// of a config file's routes, with the same names. Unset fields are zero
// (Burst is a pointer because burst 0 is meaningful). Route turns it into a
// validated Route.
type RouteSpec struct {
	Path             string     `yaml:"path"`
	Algorithm        string     `yaml:"algorithm"`
	Limit            int64      `yaml:"limit"`
	Window           Duration   `yaml:"window"`
	Rate             Rate       `yaml:"rate"`
	Capacity         int64      `yaml:"capacity"`
	Burst            *int64     `yaml:"burst"`
	NoDelay          bool       `yaml:"nodelay"`
	Delay            *int64     `yaml:"delay"`
	Align            string     `yaml:"align"`
	CountRejected    bool       `yaml:"count_rejected"`
	Penalty          string     `yaml:"penalty"`
	ForgetIdle       Duration   `yaml:"forget_idle"`
	Refill           string     `yaml:"refill"`
	Key              string     `yaml:"key"`
	Status           int        `yaml:"status"`
	Headers          StringList `yaml:"headers"`
	RetryAfter       string     `yaml:"retry_after"`
	RetryAfterFormat string     `yaml:"retry_after_format"`
	Fault            StringList `yaml:"fault"`
	KeyFault         string     `yaml:"key_fault"`
}

// Duration is a duration in Go syntax ("1.5s", "2m"), bare numbers
// refused, read by units.
type Duration = units.Duration

// Rate is a rate in requests per second in the contract's grammar (N/s,
// N/m, N/h, Nr/s, Nr/m), read by units.
type Rate = units.Rate

// StringList is a list written either as a comma-separated string (as the
// flags take it) or as a sequence.
type StringList []string

// UnmarshalYAML accepts "a,b" or [a, b].
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = SplitList(n.Value)
		return nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a list member must be a string", c.Line)
			}
			out = append(out, strings.TrimSpace(c.Value))
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: expected a string or a list of strings", n.Line)
}

// SplitList splits a comma-separated list, trimming spaces and dropping
// empty members.
func SplitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Parameter groups, for telling which options an algorithm takes.
var (
	windowAlgorithms = []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog, limiter.SlidingWindowCounter}
	bucketAlgorithms = []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA, limiter.LeakyBucket}
)

// Route validates s and returns its Route (with a nil Backend). It reports
// every problem at once, including options that mean nothing for the
// algorithm (--capacity with fixed-window, --nodelay with token-bucket…).
// Defaults: fixed windows align to the first request; buckets without
// capacity or burst have capacity 1 (nginx's burst=0). Refill interval's
// timer starts with the server (Policy.TimerAtStart).
func (s RouteSpec) Route() (Route, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	alg := limiter.Algorithm(s.Algorithm)
	cfg := limiter.Config{Algorithm: alg, Limit: s.Limit, Window: time.Duration(s.Window), Rate: float64(s.Rate),
		Capacity: s.Capacity, NoDelay: s.NoDelay, Align: limiter.Align(s.Align), CountRejected: s.CountRejected}
	isWindow, isBucket := slices.Contains(windowAlgorithms, alg), slices.Contains(bucketAlgorithms, alg)
	switch {
	case s.Algorithm == "":
		bad("algorithm missing (one of %s)", algorithmList())
	case !isWindow && !isBucket:
		bad("unknown algorithm %q (one of %s)", s.Algorithm, algorithmList())
	}
	if isWindow {
		if s.Limit <= 0 {
			bad("%s needs limit (requests per window, at least 1)", alg)
		}
		if s.Window <= 0 {
			bad("%s needs window (a duration such as 60s)", alg)
		}
		for name, set := range map[string]bool{"rate": s.Rate != 0, "capacity": s.Capacity != 0, "burst": s.Burst != nil,
			"nodelay": s.NoDelay, "delay": s.Delay != nil} {
			if set {
				bad("%s means nothing for %s (a window algorithm: use limit and window)", name, alg)
			}
		}
		if alg == limiter.SlidingLog && s.Align != "" {
			bad("align means nothing for sliding-log (its window slides)")
		}
		if alg == limiter.FixedWindow && s.Align == "" {
			cfg.Align = limiter.AlignFirstRequest
		}
	}
	if isBucket {
		if s.Rate <= 0 {
			bad("%s needs rate (such as 10/s or 1r/s)", alg)
		}
		for name, set := range map[string]bool{"limit": s.Limit != 0, "window": s.Window != 0, "align": s.Align != "",
			"count_rejected": s.CountRejected} {
			if set {
				bad("%s means nothing for %s (a bucket algorithm: use rate and capacity or burst)", name, alg)
			}
		}
		switch {
		case s.Capacity != 0 && s.Burst != nil:
			bad("capacity and burst are the same thing (capacity = burst + 1): give one")
		case s.Burst != nil:
			if *s.Burst < 0 {
				bad("burst %d is negative", *s.Burst)
			}
			cfg.Capacity = *s.Burst + 1
		case s.Capacity == 0:
			cfg.Capacity = 1
		case s.Capacity < 0:
			bad("capacity %d is not positive", s.Capacity)
		}
		if alg != limiter.LeakyBucket {
			if s.NoDelay {
				bad("nodelay means nothing for %s, which never delays (leaky-bucket only)", alg)
			}
			if s.Delay != nil {
				bad("delay means nothing for %s, which never delays (leaky-bucket only)", alg)
			}
		} else if s.Delay != nil {
			if s.NoDelay {
				bad("delay and nodelay exclude each other (nodelay never delays)")
			}
			if *s.Delay < 0 {
				bad("delay %d is negative", *s.Delay)
			}
			cfg.Delay = *s.Delay
		}
	}
	if s.Align != "" && alg != limiter.SlidingLog && s.Align != string(limiter.AlignEpoch) && s.Align != string(limiter.AlignFirstRequest) {
		bad("align %q (valid: epoch, first-request)", s.Align)
	}
	if s.Penalty != "" {
		p, err := limiter.ParsePenalty(s.Penalty)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Penalty = p
	}
	if s.ForgetIdle < 0 {
		bad("forget_idle %v is negative", time.Duration(s.ForgetIdle))
	}
	cfg.ForgetIdle = time.Duration(s.ForgetIdle)
	cfg.Refill = limiter.Refill(s.Refill)
	pol := Policy{Limiter: cfg, Key: s.Key, Status: s.Status, RetryAfter: RetryAfterMode(s.RetryAfter),
		TimerAtStart:     cfg.Refill == limiter.RefillInterval,
		RetryAfterFormat: headers.RetryAfterFormat(s.RetryAfterFormat)}
	if len(s.Headers) > 0 {
		ds, err := headers.ParseDialects(strings.Join(s.Headers, ","))
		if err != nil {
			errs = append(errs, err)
		}
		pol.Dialects = ds
	}
	pol.KeyFault = KeyFault(s.KeyFault)
	for _, f := range s.Fault {
		pol.Faults = append(pol.Faults, Fault(f))
	}
	if len(errs) == 0 {
		if err := pol.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Route{}, err
	}
	return Route{Path: s.Path, Policy: pol}, nil
}

func algorithmList() string {
	s := make([]string, len(limiter.Algorithms))
	for i, a := range limiter.Algorithms {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// FileConfig is the document of `serve --config FILE`:
//
//	version: 1            # optional
//	routes:
//	  - path: /fixed
//	    algorithm: fixed-window
//	    limit: 5
//	    window: 2s
//	  - path: /nginx
//	    algorithm: leaky-bucket
//	    rate: 1r/s
//	    burst: 3
//	    nodelay: true
//	    headers: [draft-8, x-ratelimit]
//	    fault: policy-lie
//	  - path: /login
//	    algorithm: fixed-window
//	    limit: 3
//	    window: 60s
//	    penalty: block:5m     # or extend, restart
//	  - path: /bucket
//	    algorithm: token-bucket
//	    rate: 2/s
//	    capacity: 10
//	    forget_idle: 30s
//	    refill: whole         # or interval
//
// Keys are named like the serve flags (count_rejected, retry_after,
// retry_after_format, forget_idle); unknown keys are errors.
type FileConfig struct {
	Version int         `yaml:"version"`
	Routes  []RouteSpec `yaml:"routes"`
}

// LoadConfig reads a YAML or JSON config document (JSON is read as YAML,
// of which it is a subset) and returns its validated routes. Errors name
// the file and the line, and every invalid route is reported.
func LoadConfig(name string, r io.Reader) ([]Route, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("testserver: read %s: %w", name, err)
	}
	// YAML forbids tabs as indentation; JSON allows them as whitespace.
	data = bytes.ReplaceAll(data, []byte("\t"), []byte("  "))
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("testserver: %s: %w", name, cleanYAMLError(err))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("testserver: %s: empty document: it needs routes", name)
	}
	root := doc.Content[0]
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var fc FileConfig
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("testserver: %s: %w", name, cleanYAMLError(err))
	}
	if fc.Version != 0 && fc.Version != 1 {
		return nil, fmt.Errorf("testserver: %s: version %d is not supported (1)", name, fc.Version)
	}
	if len(fc.Routes) == 0 {
		return nil, fmt.Errorf("testserver: %s: no routes", name)
	}
	lines := routeLines(root)
	var errs []error
	var routes []Route
	seen := map[string]int{}
	for i, spec := range fc.Routes {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		where := fmt.Sprintf("%s:%d: route %q", name, line, spec.Path)
		if spec.Path == "" || spec.Path[0] != '/' {
			errs = append(errs, fmt.Errorf("%s: path must start with /", where))
		}
		if prev, ok := seen[spec.Path]; ok {
			errs = append(errs, fmt.Errorf("%s: path already used on line %d", where, prev))
		}
		seen[spec.Path] = line
		rt, err := spec.Route()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		routes = append(routes, rt)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("testserver: invalid config:\n%w", err)
	}
	return routes, nil
}

// routeLines returns the line of each member of the top-level routes list.
func routeLines(root *yaml.Node) []int {
	if root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "routes" && root.Content[i+1].Kind == yaml.SequenceNode {
			var lines []int
			for _, c := range root.Content[i+1].Content {
				lines = append(lines, c.Line)
			}
			return lines
		}
	}
	return nil
}

// cleanYAMLError drops the "yaml: " prefixes of the decoder's messages.
func cleanYAMLError(err error) error {
	msg := strings.ReplaceAll(err.Error(), "yaml: ", "")
	return errors.New(strings.TrimSpace(msg))
}
