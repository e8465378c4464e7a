package verify

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/units"
)

// Policy files: YAML or JSON (read as YAML), decoded node by node so that
// unknown keys, wrong types and bad values are reported with their line.

// UnmarshalJSON reads a policy document (JSON is read as YAML, so unknown
// keys are errors with line numbers). It does not validate.
func (p *Policy) UnmarshalJSON(data []byte) error {
	q, ps := decodePolicy(data, "")
	if err := ps.err(""); err != nil {
		return err
	}
	*p = *q
	return nil
}

// ParsePolicyFile reads a policy file (YAML or JSON: `version: 1`,
// `endpoints: [...]`), validates it and returns it normalized. Unknown keys,
// bad values and invalid rules are reported together, with line numbers,
// as a *problem.Error (see Policy.Validate); name is the file name used in
// messages.
func ParsePolicyFile(data []byte, name string) (Policy, error) {
	p, ps := decodePolicy(data, name)
	if p == nil {
		return Policy{}, ps.err(name)
	}
	// Validate what decoded; a field that did not decode is reported once.
	var vs problems
	p.validate(&vs)
	bad := map[string]bool{}
	for _, q := range ps.list {
		bad[q.Field] = true
	}
	for _, q := range vs.list {
		if !bad[q.Field] {
			ps.list = append(ps.list, q)
		}
	}
	slices.SortStableFunc(ps.list, func(a, b problem.Problem) int { return lineOrder(a.Line) - lineOrder(b.Line) })
	if err := ps.err(name); err != nil {
		return Policy{}, err
	}
	return p.Normalize(), nil
}

// lineOrder sorts problems by line, those without one last.
func lineOrder(l int) int {
	if l == 0 {
		return math.MaxInt32
	}
	return l
}

// decodePolicy builds a Policy from YAML/JSON, collecting every decoding
// problem (unknown keys, wrong types, bad durations and rates).
func decodePolicy(data []byte, name string) (*Policy, *problems) {
	var doc yaml.Node
	var ps problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		ps.add("file", 0, "not YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, &ps
	}
	p := &Policy{source: name, lines: map[string]int{}}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		ps.add("file", root.Line, "must be a mapping with version and endpoints")
		return nil, &ps
	}
	p.lines["endpoints"] = root.Line
	seenVersion := false
	forEachKey(root, "", &ps, func(key string, v *yaml.Node) {
		switch key {
		case "version":
			seenVersion = true
			p.lines["version"] = v.Line
			p.Version = int(scalarInt(v, "version", &ps))
		case "endpoints":
			p.lines["endpoints"] = v.Line
			if v.Kind != yaml.SequenceNode {
				ps.add("endpoints", v.Line, "must be a list of rules")
				return
			}
			for i, item := range v.Content {
				p.Endpoints = append(p.Endpoints, decodeEndpoint(item, fmt.Sprintf("endpoints[%d].", i), &ps))
			}
		default:
			ps.add(key, v.Line, "unknown key (want version, endpoints)")
		}
	})
	if !seenVersion {
		ps.add("version", root.Line, "missing: add version: %d", PolicyVersion)
		p.Version = PolicyVersion
	}
	return p, &ps
}

// forEachKey calls f for each key of a mapping, reporting duplicates and
// non-scalar keys.
func forEachKey(m *yaml.Node, prefix string, ps *problems, f func(key string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			ps.add(prefix+"?", k.Line, "keys must be plain names")
			continue
		}
		if seen[k.Value] {
			ps.add(prefix+k.Value, k.Line, "given twice")
			continue
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode {
			ps.add(prefix+k.Value, v.Line, "aliases are not supported in policy files")
			continue
		}
		f(k.Value, v)
	}
}

func scalar(v *yaml.Node, field string, ps *problems) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		ps.add(field, v.Line, "must be a single value")
		return "", false
	}
	return v.Value, true
}

func scalarInt(v *yaml.Node, field string, ps *problems) int64 {
	s, ok := scalar(v, field, ps)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v.Tag != "!!int" {
		ps.add(field, v.Line, "must be a whole number, not %q", s)
		return 0
	}
	return n
}

func scalarString(v *yaml.Node, field string, ps *problems) string {
	s, ok := scalar(v, field, ps)
	if !ok {
		return ""
	}
	if v.Tag != "!!str" {
		ps.add(field, v.Line, "must be text, not %q", s)
		return ""
	}
	return s
}

func decodeEndpoint(n *yaml.Node, prefix string, ps *problems) Endpoint {
	e := Endpoint{lines: map[string]int{}}
	if n.Kind != yaml.MappingNode {
		ps.add(strings.TrimSuffix(prefix, "."), n.Line, "must be a mapping of rule fields")
		return e
	}
	e.lines[""] = n.Line
	forEachKey(n, prefix, ps, func(key string, v *yaml.Node) {
		field := prefix + key
		e.lines[key] = v.Line
		switch key {
		case "path":
			e.Path = scalarString(v, field, ps)
		case "method":
			e.Method = scalarString(v, field, ps)
		case "name":
			e.Name = scalarString(v, field, ps)
		case "limit":
			e.Limit = scalarInt(v, field, ps)
		case "window":
			if s, ok := scalar(v, field, ps); ok {
				d, err := units.ParseDuration(s)
				if err != nil {
					ps.add(field, v.Line, "%v", err)
				}
				e.Window = d
			}
		case "window_type":
			e.WindowType = WindowType(scalarString(v, field, ps))
		case "align":
			e.Align = limiter.Align(scalarString(v, field, ps))
			if e.Align == limiter.AlignTimer {
				ps.add(field, v.Line, "timer-aligned windows need the timer's phase, which only infer measures: use epoch or first-request")
			}
		case "rate":
			if s, ok := scalar(v, field, ps); ok {
				r, err := units.ParseRate(s)
				if err != nil {
					ps.add(field, v.Line, "%v", err)
				}
				e.Rate = r
			}
		case "capacity":
			e.Capacity = scalarInt(v, field, ps)
		case "burst":
			b := scalarInt(v, field, ps)
			e.Burst = &b
		case "key":
			e.Key = scalarString(v, field, ps)
		case "status":
			e.Status = int(scalarInt(v, field, ps))
		case "headers":
			switch v.Kind {
			case yaml.SequenceNode:
				for i, d := range v.Content {
					if s := scalarString(d, fmt.Sprintf("%s[%d]", field, i), ps); s != "" {
						e.Headers = append(e.Headers, s)
					}
				}
			default:
				if s := scalarString(v, field, ps); s != "" {
					e.Headers = SplitList(s)
				}
			}
		case "retry_after":
			e.RetryAfter = scalarString(v, field, ps)
		case "penalty":
			if s := scalarString(v, field, ps); s != "" {
				pen, err := limiter.ParsePenalty(s)
				if err != nil {
					ps.addErr(field, v.Line, err)
				}
				e.Penalty = pen
			}
		default:
			ps.add(field, v.Line, "unknown key (want path, method, name, limit, window, window_type, align, rate, capacity, burst, key, status, headers, retry_after, penalty)")
		}
	})
	return e
}

// SplitList splits a comma-separated list, trimming spaces and dropping
// empty members.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
