package limitconf

import (
	"errors"
	"fmt"
	"io/fs"
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
	// lua: the block is Lua code (an *_by_lua_block), kept whole as the
	// last argument.
	lua bool
	// server is the server block the directive is in (1, 2, … in the
	// order of the configuration; 0 outside any), set by vet.
	server int
}

func (d *directive) src() Source { return Source{File: d.file, Line: d.line} }

// blockKind is how nginx reads a block's contents.
type blockKind int

const (
	directives blockKind = iota // directives, as at the top
	// valueList: a list of values read by the block directive's own
	// handler (types, map, geo, split_clients, charset_map, geoip2): no
	// block may open inside ("unexpected {"), the names are not
	// directives.
	valueList
	// opaque: a block whose contents are another module's (NGINX Plus
	// match): read, not interpreted.
	opaque
)

// kindOf says how the block of the directive name is read.
func kindOf(name string) blockKind {
	switch name {
	case "types", "map", "geo", "split_clients", "charset_map", "geoip2":
		return valueList
	case "match":
		return opaque
	}
	return directives
}

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
	// skipped are constructs not read (includes without a file reader,
	// missing includes), reported by lint.
	skipped []Finding
	// missing are the includes that could not be read, for
	// Options.StrictIncludes.
	missing []string
}

func (r *nginxReader) parseFile(data []byte, file string, depth int, kind blockKind) ([]*directive, error) {
	r.files++
	if r.files > maxFiles {
		return nil, errAt(file, 0, "more than %d files included", maxFiles)
	}
	l := &lexer{data: substitute(data, r.o.Vars), line: 1, file: file}
	ds, _, err := r.parseBlock(l, depth, 0, kind)
	return ds, err
}

// parseBlock reads statements until "}" (closed true) or the end of the
// input, as ngx_conf_parse does: a "}" at the top of a file and the end
// of the input inside a block are errors.
func (r *nginxReader) parseBlock(l *lexer, depth, nesting int, kind blockKind) (ds []*directive, closed bool, err error) {
	if nesting > maxNesting {
		return nil, false, errAt(l.file, l.line, "blocks nested more than %d deep", maxNesting)
	}
	for {
		ws, end, err := l.statement()
		if err != nil {
			return nil, false, err
		}
		switch end {
		case 0:
			if nesting > 0 {
				return nil, false, errAt(l.file, l.line, "unexpected end of file, expecting \"}\"")
			}
			return ds, false, nil
		case '}':
			if nesting == 0 {
				return nil, false, errAt(l.file, l.line, "unexpected \"}\"")
			}
			return ds, true, nil
		}
		d := &directive{name: ws[0].text, file: l.file, line: ws[0].line}
		for _, w := range ws[1:] {
			d.args = append(d.args, w.text)
		}
		if end == '{' {
			if kind == valueList {
				return nil, false, errAt(l.file, l.line, "unexpected \"{\"")
			}
			d.hasBlock = true
			if strings.HasSuffix(d.name, "_by_lua_block") {
				code, err := l.luaBlock(l.line)
				if err != nil {
					return nil, false, err
				}
				d.args, d.lua = append(d.args, code), true
			} else {
				sub := kindOf(d.name)
				if kind == opaque {
					sub = opaque
				}
				if d.block, _, err = r.parseBlock(l, depth, nesting+1, sub); err != nil {
					return nil, false, err
				}
			}
		}
		if d.name == "include" && !d.hasBlock && len(d.args) == 1 && kind != opaque {
			inc, err := r.include(d, depth, kind)
			if err != nil {
				return nil, false, err
			}
			ds = append(ds, inc...)
			continue
		}
		ds = append(ds, d)
	}
}

// include reads the files an include directive names: a relative name
// against the main file's directory, an absolute one under Options.Root.
// A name without wildcards that cannot be read is include-missing (all of
// them are listed; Options.StrictIncludes makes them an error once the
// whole configuration is read); a pattern that matches nothing reads
// nothing, as in nginx.
func (r *nginxReader) include(d *directive, depth int, kind blockKind) ([]*directive, error) {
	if r.o.ReadFile == nil {
		r.skipped = append(r.skipped, finding(IDNotInterpreted, verify.SeverityWarning, verify.Possible, d.src(), "",
			"include "+d.args[0]+" was not read: limits it may declare are not imported", "import the included file too, or the whole configuration from disk"))
		return nil, nil
	}
	if depth >= maxIncludeDepth {
		return nil, errAt(d.file, d.line, "includes nested more than %d deep", maxIncludeDepth)
	}
	pat := d.args[0]
	switch {
	case filepath.IsAbs(pat) && r.o.Root != "":
		pat = filepath.Join(r.o.Root, pat)
	case !filepath.IsAbs(pat):
		pat = filepath.Join(r.root, pat)
	}
	names := []string{pat}
	glob := strings.ContainsAny(pat, "*?[")
	if r.o.Glob != nil && glob {
		var err error
		if names, err = r.o.Glob(pat); err != nil {
			return nil, errAt(d.file, d.line, "include %s: %v", d.args[0], err)
		}
	}
	var out []*directive
	for _, n := range names {
		data, err := r.o.ReadFile(n)
		if err != nil {
			r.missing = append(r.missing, fmt.Sprintf("%s (%s)", d.args[0], d.src()))
			why := "it does not exist"
			if !errors.Is(err, fs.ErrNotExist) {
				why = err.Error()
			}
			hint := "give the directory absolute includes live under with --root DIR, or import on the machine that has the file"
			if !filepath.IsAbs(d.args[0]) {
				hint = "relative includes are read from the main file's directory (" + r.root + "): import the configuration from where nginx reads it"
			}
			r.skipped = append(r.skipped, finding(IDIncludeMissing, verify.SeverityWarning, verify.Certain, d.src(), "",
				fmt.Sprintf("include %s was not read (%s: %s): limits it may declare are not imported", d.args[0], n, why), hint))
			continue
		}
		ds, err := r.parseFile(data, n, depth+1, kind)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// strictIncludes is the error of Options.StrictIncludes: every include
// that could not be read, at once.
func (r *nginxReader) strictIncludes(file string) error {
	if !r.o.StrictIncludes || len(r.missing) == 0 {
		return nil
	}
	return errAt(file, 0, "%d includes cannot be read (--strict-includes): %s", len(r.missing), strings.Join(r.missing, ", "))
}
