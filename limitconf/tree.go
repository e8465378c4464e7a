package limitconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"
	"go.yaml.in/yaml/v3"
)

// node is a YAML or TOML value with the line it is on: one tree for the
// formats built on either.
type node struct {
	kind  nodeKind
	keys  []string // mapping keys, in order
	vals  []*node  // mapping values, or list items
	value string   // scalar text
	str   bool     // the scalar was a string (quoted or plain text)
	line  int
}

type nodeKind int

const (
	scalarNode nodeKind = iota
	mapNode
	listNode
)

// get returns a mapping's value for key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != mapNode {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// path follows keys through nested mappings.
func (n *node) path(keys ...string) *node {
	for _, k := range keys {
		n = n.get(k)
	}
	return n
}

func (n *node) set(key string, v *node) {
	for i, k := range n.keys {
		if k == key {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
}

func (n *node) scalar() (string, bool) {
	if n == nil || n.kind != scalarNode {
		return "", false
	}
	return n.value, true
}

// int64 reads a whole number, reporting a bad value with its line.
func (n *node) int64(file, what string) (int64, error) {
	s, ok := n.scalar()
	if !ok {
		return 0, errAt(file, n.line, "%s must be a whole number", what)
	}
	if _, ph := placeholderIn(s); ph {
		return 0, &placeholderError{placeholderFinding(Source{File: file, Line: n.line}, what, s)}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, errAt(file, n.line, "%s must be a whole number, not %q", what, s)
	}
	return v, nil
}

// skipPlaceholder reports whether err is a placeholder left unset, and
// then adds its placeholder-unset finding to im: the rule is skipped, the
// rest read.
func skipPlaceholder(err error, im *Import) bool {
	var ph *placeholderError
	if !errors.As(err, &ph) {
		return false
	}
	im.add(ph.f)
	return true
}

// snakeKeys renames camelCase mapping keys to snake_case, everywhere under
// n: protobuf's JSON names (maxTokens, typedPerFilterConfig), which
// generated configs use, read as the snake_case names Envoy's YAML
// documentation uses. Keys that are not plain camelCase words (filter
// names, "@type") are left alone.
func snakeKeys(n *node, depth int) {
	if n == nil || depth > 4*maxNesting {
		return
	}
	for i, k := range n.keys {
		n.keys[i] = snake(k)
	}
	for _, v := range n.vals {
		snakeKeys(v, depth+1)
	}
}

func snake(k string) string {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return k
	}
	upper := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			return k
		}
	}
	if !upper {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			b.WriteByte(c + 'a' - 'A')
			continue
		}
		b.WriteByte(k[i])
	}
	return b.String()
}

// walkNodes calls f on every node with the mapping keys leading to it.
func walkNodes(n *node, trail []string, f func(n *node, trail []string)) {
	if n == nil {
		return
	}
	f(n, trail)
	switch n.kind {
	case mapNode:
		for i, k := range n.keys {
			walkNodes(n.vals[i], append(trail, k), f)
		}
	case listNode:
		for _, v := range n.vals {
			walkNodes(v, trail, f)
		}
	}
}

const maxDocs = 1000

// yamlDocs reads every document of a YAML stream (Kubernetes files hold
// several).
func yamlDocs(data []byte, file string) ([]*node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*node
	for i := 0; i < maxDocs; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, yamlErr(file, err)
		}
		n, err := fromYAML(&doc, file, 0)
		if err != nil {
			return nil, err
		}
		if n != nil {
			out = append(out, n)
		}
	}
	return nil, errAt(file, 0, "more than %d YAML documents", maxDocs)
}

// yamlErr turns a YAML error ("yaml: line 3: ...") into errAt's error.
func yamlErr(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ":"); ok {
			if l, err := strconv.Atoi(n); err == nil {
				line, msg = l, strings.TrimSpace(after)
			}
		}
	}
	return errAt(file, line, "not YAML: %s", msg)
}

func fromYAML(y *yaml.Node, file string, depth int) (*node, error) {
	if depth > maxNesting {
		return nil, errAt(file, y.Line, "nested more than %d deep", maxNesting)
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return nil, nil
		}
		return fromYAML(y.Content[0], file, depth+1)
	case yaml.AliasNode:
		return nil, errAt(file, y.Line, "YAML aliases are not supported here")
	case yaml.ScalarNode:
		return &node{kind: scalarNode, value: y.Value, str: y.Tag == "!!str", line: y.Line}, nil
	case yaml.SequenceNode:
		n := &node{kind: listNode, line: y.Line}
		for _, c := range y.Content {
			v, err := fromYAML(c, file, depth+1)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		return n, nil
	case yaml.MappingNode:
		n := &node{kind: mapNode, line: y.Line}
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, errAt(file, k.Line, "mapping keys must be plain names")
			}
			if k.Value == "<<" {
				return nil, errAt(file, k.Line, "YAML merge keys are not supported here")
			}
			val, err := fromYAML(v, file, depth+1)
			if err != nil {
				return nil, err
			}
			if val == nil {
				val = &node{line: v.Line}
			}
			if val.line == 0 || v.Kind != yaml.ScalarNode {
				val.line = k.Line
			}
			n.keys = append(n.keys, k.Value)
			n.vals = append(n.vals, val)
		}
		return n, nil
	}
	return nil, errAt(file, y.Line, "unexpected YAML node")
}

// tomlDoc reads a TOML document into a tree, each value on the line of its
// key.
func tomlDoc(data []byte, file string) (root *node, err error) {
	p := unstable.Parser{}
	p.Reset(data)
	root = &node{kind: mapNode, line: 1}
	cur := root
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			keys, line := tomlKeys(&p, e.Key())
			if len(keys) == 0 {
				return nil, errAt(file, line, "a table needs a name")
			}
			parent, err := tomlDescend(root, keys[:len(keys)-1], file, line)
			if err != nil {
				return nil, err
			}
			last := keys[len(keys)-1]
			if e.Kind == unstable.Table {
				t := parent.get(last)
				if t == nil {
					t = &node{kind: mapNode, line: line}
					parent.set(last, t)
				}
				if t.kind != mapNode {
					return nil, errAt(file, line, "%s is not a table", strings.Join(keys, "."))
				}
				cur = t
			} else {
				a := parent.get(last)
				if a == nil {
					a = &node{kind: listNode, line: line}
					parent.set(last, a)
				}
				if a.kind != listNode {
					return nil, errAt(file, line, "%s is not an array of tables", strings.Join(keys, "."))
				}
				cur = &node{kind: mapNode, line: line}
				a.vals = append(a.vals, cur)
			}
		case unstable.KeyValue:
			if err := tomlKeyValue(&p, e, cur, file); err != nil {
				return nil, err
			}
		}
	}
	if err := p.Error(); err != nil {
		var pe *unstable.ParserError
		line := 0
		if errors.As(err, &pe) && pe.Highlight != nil {
			line = p.Shape(p.Range(pe.Highlight)).Start.Line
		}
		return nil, errAt(file, line, "not TOML: %v", err)
	}
	return root, nil
}

func tomlKeys(p *unstable.Parser, it unstable.Iterator) ([]string, int) {
	var keys []string
	line := 0
	for it.Next() {
		k := it.Node()
		keys = append(keys, string(k.Data))
		if line == 0 {
			line = p.Shape(k.Raw).Start.Line
		}
	}
	return keys, line
}

// tomlDescend walks (creating) tables; an array of tables descends into
// its last element.
func tomlDescend(n *node, keys []string, file string, line int) (*node, error) {
	for _, k := range keys {
		c := n.get(k)
		if c == nil {
			c = &node{kind: mapNode, line: line}
			n.set(k, c)
		}
		if c.kind == listNode && len(c.vals) > 0 {
			c = c.vals[len(c.vals)-1]
		}
		if c.kind != mapNode {
			return nil, errAt(file, line, "%s is not a table", k)
		}
		n = c
	}
	return n, nil
}

func tomlKeyValue(p *unstable.Parser, e *unstable.Node, table *node, file string) error {
	keys, line := tomlKeys(p, e.Key())
	if len(keys) == 0 {
		return errAt(file, line, "a key is missing")
	}
	parent, err := tomlDescend(table, keys[:len(keys)-1], file, line)
	if err != nil {
		return err
	}
	v, err := tomlValue(p, e.Value(), file, line, 0)
	if err != nil {
		return err
	}
	parent.set(keys[len(keys)-1], v)
	return nil
}

func tomlValue(p *unstable.Parser, v *unstable.Node, file string, line, depth int) (*node, error) {
	if depth > maxNesting {
		return nil, errAt(file, line, "nested more than %d deep", maxNesting)
	}
	switch v.Kind {
	case unstable.String:
		return &node{kind: scalarNode, value: string(v.Data), str: true, line: line}, nil
	case unstable.Integer, unstable.Float, unstable.Bool:
		return &node{kind: scalarNode, value: strings.ReplaceAll(string(v.Data), "_", ""), line: line}, nil
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return &node{kind: scalarNode, value: string(v.Data), line: line}, nil
	case unstable.Array:
		n := &node{kind: listNode, line: line}
		it := v.Children()
		for it.Next() {
			c, err := tomlValue(p, it.Node(), file, line, depth+1)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, c)
		}
		return n, nil
	case unstable.InlineTable:
		n := &node{kind: mapNode, line: line}
		it := v.Children()
		for it.Next() {
			if err := tomlKeyValue(p, it.Node(), n, file); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	return nil, errAt(file, line, "unexpected TOML value")
}

// duration reads a duration written as Go syntax ("1m", "500ms") or, where
// a product allows it, a whole number of seconds.
func (n *node) duration(file, what string, bareSeconds bool) (time.Duration, error) {
	s, ok := n.scalar()
	if !ok {
		return 0, errAt(file, n.line, "%s must be a duration such as 1s", what)
	}
	s = strings.TrimSpace(s)
	if _, ph := placeholderIn(s); ph {
		return 0, &placeholderError{placeholderFinding(Source{File: file, Line: n.line}, what, s)}
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && bareSeconds && !n.str {
		if v < 0 || v > int64(24*365*time.Hour/time.Second) {
			return 0, errAt(file, n.line, "%s %d s is out of range", what, v)
		}
		return time.Duration(v) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errAt(file, n.line, "%s %q is not a duration such as 1s or 1m", what, s)
	}
	return d, nil
}

func describeKind(n *node) string {
	switch n.kind {
	case mapNode:
		return "a mapping"
	case listNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.value)
}
