package limitconf

import (
	"bytes"
	"strings"
)

// lexer reads nginx's configuration syntax by nginx's own rules: a port of
// ngx_conf_read_token (src/core/ngx_conf_file.c), statement by statement.
//
//   - Words are separated by spaces, tabs, CR and LF; a word ends at a
//     space, ";" or "{" — not at "}", "#", a quote or ")" inside it, so
//     `set $x a}b;` has the word "a}b".
//   - A word opening with a quote runs to the same quote; what follows the
//     closing quote must be a space, ";", "{" or ")": `('1')` reads as
//     "1" and a word ")" (ngx_http_rewrite's if takes it so).
//   - A backslash makes the next character part of the word, whatever it
//     is; in the word's text \" \' \\ \t \r \n are resolved and any other
//     backslash is kept.
//   - "${" does not end a word at its "{".
//   - "#" opens a comment only where a word could start.
//   - A ";" or "{" with no word before it, a "}" after words, and the end
//     of the input inside a statement are errors.
type lexer struct {
	data []byte
	pos  int
	line int
	file string
}

// word is one word of a statement: its text (quotes removed, escapes
// resolved as nginx resolves them) and the line it starts on.
type word struct {
	text string
	line int
}

// maxWord is nginx's NGX_CONF_BUFFER: a word that fills nginx's whole read
// buffer is refused ("too long parameter").
const maxWord = 4096

func (l *lexer) errf(line int, format string, a ...any) error {
	return errAt(l.file, line, format, a...)
}

// statement reads the next statement: its words and what ends it — ';'
// or '{' after the words, '}' alone (ws empty), or 0 at the end of the
// input (ws empty).
func (l *lexer) statement() (ws []word, end byte, err error) {
	lastSpace, needSpace := true, false
	sharp, quoted, sQuoted, dQuoted, variable := false, false, false, false, false
	start, startLine := l.pos, l.line
	for {
		if l.pos >= len(l.data) {
			if len(ws) > 0 || !lastSpace {
				return nil, 0, l.errf(l.line, "unexpected end of file, expecting \";\" or \"}\"")
			}
			return nil, 0, nil
		}
		if (!lastSpace || sharp) && l.pos-start >= maxWord {
			return nil, 0, l.errf(startLine, "too long parameter %q... started", l.data[start:start+10])
		}
		ch := l.data[l.pos]
		l.pos++
		if ch == '\n' {
			l.line++
			sharp = false
		}
		if sharp {
			continue
		}
		if quoted {
			quoted = false
			continue
		}
		if needSpace {
			switch {
			case isSpace(ch):
				lastSpace, needSpace = true, false
				continue
			case ch == ';' || ch == '{':
				return ws, ch, nil
			case ch == ')':
				// nginx takes ")" after a quoted string as the start of
				// the next word.
				lastSpace, needSpace = true, false
			default:
				return nil, 0, l.errf(l.line, "unexpected \"%c\"", ch)
			}
		}
		if lastSpace {
			start, startLine = l.pos-1, l.line
			if isSpace(ch) {
				continue
			}
			switch ch {
			case ';', '{':
				if len(ws) == 0 {
					return nil, 0, l.errf(l.line, "unexpected \"%c\"", ch)
				}
				return ws, ch, nil
			case '}':
				if len(ws) != 0 {
					return nil, 0, l.errf(l.line, "unexpected \"}\"")
				}
				return nil, '}', nil
			case '#':
				sharp = true
				continue
			case '\\':
				quoted = true
			case '"':
				start++
				dQuoted = true
			case '\'':
				start++
				sQuoted = true
			case '$':
				variable = true
			}
			lastSpace = false
			continue
		}
		if ch == '{' && variable {
			continue
		}
		variable = false
		switch {
		case ch == '\\':
			quoted = true
			continue
		case ch == '$':
			variable = true
			continue
		}
		found := false
		switch {
		case dQuoted:
			if ch == '"' {
				dQuoted, needSpace, found = false, true, true
			}
		case sQuoted:
			if ch == '\'' {
				sQuoted, needSpace, found = false, true, true
			}
		case isSpace(ch) || ch == ';' || ch == '{':
			lastSpace, found = true, true
		}
		if found {
			ws = append(ws, word{text: unescape(l.data[start : l.pos-1]), line: startLine})
			if ch == ';' || ch == '{' {
				return ws, ch, nil
			}
		}
	}
}

// unescape resolves a word's escapes as nginx does: \" \' \\ lose their
// backslash, \t \r \n become the control character, any other backslash
// stays.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var s strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case '"', '\'', '\\':
				i++
			case 't':
				s.WriteByte('\t')
				i++
				continue
			case 'r':
				s.WriteByte('\r')
				i++
				continue
			case 'n':
				s.WriteByte('\n')
				i++
				continue
			}
		}
		s.WriteByte(b[i])
	}
	return s.String()
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// luaBlock reads the Lua code of an *_by_lua_block, the opening "{"
// already read at line, up to the "}" that closes it, as
// lua-nginx-module's reader does (ngx_http_lua_conf_read_lua_token and its
// generated lexer): scanning left to right, the first of these to match
// is taken whole — "{" and "}" (counted), a long bracket [[…]] or
// [==[…]==] (to its own closing bracket: an error when there is none),
// a comment --[[…]] (likewise), a comment -- to the end of the line, a
// "…" or '…' string on one line (backslash escapes); any other character,
// a lone quote included, is skipped.
func (l *lexer) luaBlock(line int) (string, error) {
	start, level := l.pos, 1
	for l.pos < len(l.data) {
		rest := l.data[l.pos:]
		switch c := rest[0]; {
		case c == '{':
			level++
		case c == '}':
			level--
			if level == 0 {
				l.pos++
				return string(l.data[start : l.pos-1]), nil
			}
		case c == '-' && len(rest) > 1 && rest[1] == '-':
			if n := longBracket(rest[2:]); n > 0 {
				if err := l.skipLong(2, n); err != nil {
					return "", err
				}
				continue
			}
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				i = len(rest)
			}
			l.pos += i
			continue
		case c == '[':
			if n := longBracket(rest); n > 0 {
				if err := l.skipLong(0, n); err != nil {
					return "", err
				}
				continue
			}
		case c == '"' || c == '\'':
			if n := luaString(rest); n > 0 {
				l.pos += n
				continue
			}
		case c == '\n':
			l.line++
		}
		l.pos++
	}
	return "", l.errf(line, "unexpected end of file, expecting terminating characters for lua code block")
}

// longBracket returns the length of the opening long bracket [=*[ at the
// start of b, or 0.
func longBracket(b []byte) int {
	if len(b) == 0 || b[0] != '[' {
		return 0
	}
	i := 1
	for i < len(b) && b[i] == '=' {
		i++
	}
	if i < len(b) && b[i] == '[' {
		return i + 1
	}
	return 0
}

// skipLong moves past a long string or comment whose opening bracket, n
// bytes, starts skip bytes into the input, and past its closing bracket.
func (l *lexer) skipLong(skip, n int) error {
	open := l.pos + skip
	closing := "]" + strings.Repeat("=", n-2) + "]"
	i := bytes.Index(l.data[open+n:], []byte(closing))
	if i < 0 {
		return l.errf(l.line, "Lua code block missing the closing long bracket %q", closing)
	}
	end := open + n + i + len(closing)
	l.line += bytes.Count(l.data[l.pos:end], []byte("\n"))
	l.pos = end
	return nil
}

// luaString returns the length of the one-line Lua string (with its
// quotes) at the start of b, or 0 when it does not close on its line.
func luaString(b []byte) int {
	q := b[0]
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case q:
			return i + 1
		case '\n':
			return 0
		case '\\':
			if i+1 >= len(b) || b[i+1] == '\n' {
				return 0
			}
			i++
		}
	}
	return 0
}
