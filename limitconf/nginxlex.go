package limitconf

import (
	"path/filepath"
	"strings"

	"github.com/rlprobe/rlprobe/verify"
)

// directive is one nginx directive: its name, arguments (quotes removed,
// escapes resolved), where it is, and its block when it has one.
type directive struct {
	name  string
	args  []string
	file  string
	line  int
	block []*directive // nil unless hasBlock
	// hasBlock reports whether the directive opened a block ({...}).
	hasBlock bool
}

func (d *directive) src() Source { return Source{File: d.file, Line: d.line} }

// lexer reads nginx's configuration syntax as nginx's own reader does
// (ngx_conf_read_token): words separated by spaces, ";" ending a
// directive, "{" "}" around a block, "#" starting a comment where a word
// could start, single- or double-quoted words with backslash escapes, and
// "${name}" variables whose braces are part of the word.
type lexer struct {
	data []byte
	pos  int
	line int
	file string
}

type token struct {
	text   string
	line   int
	quoted bool
	// punct is ';', '{' or '}' for those, else 0.
	punct byte
}

// next returns the next token, ok false at the end of the input.
func (l *lexer) next() (token, bool, error) {
	// Skip spaces and comments.
	for l.pos < len(l.data) {
		c := l.data[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '#':
			for l.pos < len(l.data) && l.data[l.pos] != '\n' {
				l.pos++
			}
		default:
			goto word
		}
	}
	return token{}, false, nil
word:
	c := l.data[l.pos]
	line := l.line
	switch c {
	case ';', '{', '}':
		l.pos++
		return token{text: string(c), line: line, punct: c}, true, nil
	case '"', '\'':
		return l.quoted(c, line)
	}
	start := l.pos
	inVar := false
	for l.pos < len(l.data) {
		d := l.data[l.pos]
		switch {
		case isSpace(d) || d == ';':
			return token{text: string(l.data[start:l.pos]), line: line}, true, nil
		case d == '{':
			if l.pos > start && l.data[l.pos-1] == '$' {
				inVar = true
				l.pos++
				continue
			}
			return token{text: string(l.data[start:l.pos]), line: line}, true, nil
		case d == '}':
			if inVar {
				inVar = false
				l.pos++
				continue
			}
			return token{text: string(l.data[start:l.pos]), line: line}, true, nil
		case d == '\\' && l.pos+1 < len(l.data):
			if l.data[l.pos+1] == '\n' {
				l.line++
			}
			l.pos += 2
			continue
		}
		l.pos++
	}
	return token{text: string(l.data[start:]), line: line}, true, nil
}

// quoted reads a quoted string opened by the quote c at line (the opening quote
// not yet consumed), with nginx's escapes.
func (l *lexer) quoted(c byte, line int) (token, bool, error) {
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.data) {
			return token{}, false, errAt(l.file, line, "unexpected end of file: the string opened here has no closing %c", c)
		}
		d := l.data[l.pos]
		l.pos++
		switch {
		case d == c:
			if l.pos < len(l.data) {
				if n := l.data[l.pos]; !isSpace(n) && n != ';' && n != '{' && n != '}' {
					return token{}, false, errAt(l.file, l.line, "unexpected %q after a quoted string", n)
				}
			}
			return token{text: b.String(), line: line, quoted: true}, true, nil
		case d == '\\' && l.pos < len(l.data):
			e := l.data[l.pos]
			l.pos++
			switch e {
			case '"', '\'', '\\':
				b.WriteByte(e)
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			if e == '\n' {
				l.line++
			}
		default:
			if d == '\n' {
				l.line++
			}
			b.WriteByte(d)
		}
	}
}

// luaBlock reads the Lua code of an *_by_lua_block up to its closing
// brace, skipping Lua strings ('…', "…", [[…]]) and comments (-- …), as
// OpenResty's own reader does.
func (l *lexer) luaBlock(line int) (string, error) {
	start, depth := l.pos, 1
	for l.pos < len(l.data) {
		c := l.data[l.pos]
		switch {
		case c == '\n':
			l.line++
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				code := string(l.data[start:l.pos])
				l.pos++
				return code, nil
			}
		case c == '-' && l.pos+1 < len(l.data) && l.data[l.pos+1] == '-':
			for l.pos < len(l.data) && l.data[l.pos] != '\n' {
				l.pos++
			}
			continue
		case c == '"' || c == '\'':
			l.pos++
			for l.pos < len(l.data) && l.data[l.pos] != c {
				if l.data[l.pos] == '\\' {
					l.pos++
				}
				if l.pos < len(l.data) && l.data[l.pos] == '\n' {
					l.line++
				}
				l.pos++
			}
		case c == '[' && l.pos+1 < len(l.data) && l.data[l.pos+1] == '[':
			end := strings.Index(string(l.data[l.pos+2:]), "]]")
			if end < 0 {
				return "", errAt(l.file, line, "unexpected end of file in a Lua long string")
			}
			l.line += strings.Count(string(l.data[l.pos:l.pos+2+end]), "\n")
			l.pos += 2 + end + 1
		}
		l.pos++
	}
	return "", errAt(l.file, line, "unexpected end of file, expecting \"}\" to close the Lua block opened here")
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Limits on what one import reads, so that a hostile config cannot make
// it run away.
const (
	maxIncludeDepth = 16
	maxFiles        = 256
	maxNesting      = 64
)

// nginxReader parses files into directive trees, following includes.
type nginxReader struct {
	o     Options
	files int
	// root is the main file's directory: nginx resolves a relative
	// include against it (its configuration prefix), whichever file holds
	// the include.
	root string
	// skipped are constructs not interpreted (an include without a file
	// reader), reported by lint.
	skipped []Finding
}

func (r *nginxReader) parseFile(data []byte, file string, depth int) ([]*directive, error) {
	r.files++
	if r.files > maxFiles {
		return nil, errAt(file, 0, "more than %d files included", maxFiles)
	}
	l := &lexer{data: data, line: 1, file: file}
	ds, closed, err := r.parseBlock(l, depth, 0)
	if err != nil {
		return nil, err
	}
	if closed {
		return nil, errAt(file, l.line, "unexpected \"}\"")
	}
	return ds, nil
}

// parseBlock reads directives until "}" (closed true) or the end of the
// input.
func (r *nginxReader) parseBlock(l *lexer, depth, nesting int) (ds []*directive, closed bool, err error) {
	if nesting > maxNesting {
		return nil, false, errAt(l.file, l.line, "blocks nested more than %d deep", maxNesting)
	}
	for {
		t, ok, err := l.next()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			if nesting > 0 {
				return nil, false, errAt(l.file, l.line, "unexpected end of file, expecting \"}\"")
			}
			return ds, false, nil
		}
		switch t.punct {
		case '}':
			if nesting == 0 {
				return nil, false, errAt(l.file, t.line, "unexpected \"}\"")
			}
			return ds, true, nil
		case ';', '{':
			return nil, false, errAt(l.file, t.line, "unexpected %q: a directive name is missing", t.text)
		}
		d := &directive{name: t.text, file: l.file, line: t.line}
	args:
		for {
			a, ok, err := l.next()
			if err != nil {
				return nil, false, err
			}
			if !ok {
				return nil, false, errAt(l.file, l.line, "unexpected end of file, expecting \";\" or \"}\" after %q (line %d)", d.name, d.line)
			}
			switch a.punct {
			case ';':
				break args
			case '{':
				d.hasBlock = true
				if strings.HasSuffix(d.name, "_by_lua_block") {
					// Lua code, not nginx syntax: kept whole as the
					// directive's last argument.
					code, err := l.luaBlock(a.line)
					if err != nil {
						return nil, false, err
					}
					d.args = append(d.args, code)
					break args
				}
				block, closed, err := r.parseBlock(l, depth, nesting+1)
				if err != nil {
					return nil, false, err
				}
				if !closed {
					return nil, false, errAt(l.file, l.line, "unexpected end of file, expecting \"}\"")
				}
				d.block = block
				break args
			case '}':
				return nil, false, errAt(l.file, a.line, "unexpected \"}\": %q (line %d) is not ended by \";\"", d.name, d.line)
			}
			d.args = append(d.args, a.text)
		}
		if d.name == "include" && !d.hasBlock && len(d.args) == 1 {
			inc, err := r.include(d, depth)
			if err != nil {
				return nil, false, err
			}
			ds = append(ds, inc...)
			continue
		}
		ds = append(ds, d)
	}
}

// include reads the files an include directive names, relative to the
// including file's directory.
func (r *nginxReader) include(d *directive, depth int) ([]*directive, error) {
	if r.o.ReadFile == nil {
		r.skipped = append(r.skipped, finding(IDNotInterpreted, verify.SeverityWarning, verify.Possible, d.src(), "",
			"include "+d.args[0]+" was not read: limits it may declare are not imported", "import the included file too, or the whole configuration from disk"))
		return nil, nil
	}
	if depth >= maxIncludeDepth {
		return nil, errAt(d.file, d.line, "includes nested more than %d deep", maxIncludeDepth)
	}
	pat := d.args[0]
	if !filepath.IsAbs(pat) {
		pat = filepath.Join(r.root, pat)
	}
	names := []string{pat}
	if r.o.Glob != nil && strings.ContainsAny(pat, "*?[") {
		var err error
		if names, err = r.o.Glob(pat); err != nil {
			return nil, errAt(d.file, d.line, "include %s: %v", d.args[0], err)
		}
	}
	var out []*directive
	for _, n := range names {
		data, err := r.o.ReadFile(n)
		if err != nil {
			return nil, errAt(d.file, d.line, "include %s: %v", d.args[0], err)
		}
		ds, err := r.parseFile(data, n, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}
