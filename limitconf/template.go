package limitconf

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rlprobe/rlprobe/verify"
)

// Templates: configurations written for envsubst (the nginx image's
// /etc/nginx/templates, Helm and Compose files) hold $NAME or ${NAME}
// where a value goes. Options.Vars substitutes the names it holds, and
// only those, as `envsubst '$A $B'` does; every other "$" is left as it
// is — nginx variables ($remote_addr, ${host}) above all.

// substitute replaces $NAME and ${NAME} for the names in vars.
func substitute(data []byte, vars map[string]string) []byte {
	if len(vars) == 0 || bytes.IndexByte(data, '$') < 0 {
		return data
	}
	var b bytes.Buffer
	for i := 0; i < len(data); i++ {
		if data[i] != '$' {
			b.WriteByte(data[i])
			continue
		}
		name, n := varAt(data[i:])
		if v, ok := vars[name]; ok && n > 0 {
			b.WriteString(v)
			i += n - 1
			continue
		}
		b.WriteByte('$')
	}
	return b.Bytes()
}

// varAt reads $NAME or ${NAME} at the start of b: the name and the length
// of the reference (0 when there is none).
func varAt(b []byte) (string, int) {
	if len(b) < 2 {
		return "", 0
	}
	if b[1] == '{' {
		end := bytes.IndexByte(b, '}')
		if end < 0 || !isName(string(b[2:end])) {
			return "", 0
		}
		return string(b[2:end]), end + 1
	}
	n := 1
	for n < len(b) && isNameByte(b[n], n == 1) {
		n++
	}
	if n == 1 {
		return "", 0
	}
	return string(b[1:n]), n
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return true
}

// placeholderIn returns the first $NAME or ${NAME} in s, as written.
func placeholderIn(s string) (string, bool) {
	for i := strings.IndexByte(s, '$'); i >= 0 && i < len(s); {
		if _, n := varAt([]byte(s[i:])); n > 0 {
			return s[i : i+n], true
		}
		j := strings.IndexByte(s[i+1:], '$')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if strings.Contains(s, "$") {
		return s, true
	}
	return "", false
}

// placeholderName is the NAME of $NAME or ${NAME}.
func placeholderName(p string) string {
	if name, n := varAt([]byte(p)); n > 0 {
		return name
	}
	return "NAME"
}

// placeholderFinding is placeholder-unset: a "$" left where the product
// takes no variable, so the limit cannot be read.
func placeholderFinding(at Source, what, value string) Finding {
	p, _ := placeholderIn(value)
	return finding(IDPlaceholderUnset, verify.SeverityError, verify.Certain, at, "",
		fmt.Sprintf("%s is %q: %s is a placeholder left unset, and a number goes here: this limit was not read", what, value, p),
		fmt.Sprintf("give its value with --set %s=VALUE or in an --env FILE", placeholderName(p)))
}

// placeholderError is a number or duration of a YAML or TOML config
// that holds a placeholder: the rule is skipped with placeholder-unset.
type placeholderError struct{ f Finding }

func (e *placeholderError) Error() string { return "limitconf: " + e.f.Message }

// ParseVars reads --env files (NAME=VALUE lines; blank lines, # comments
// and a leading "export " are allowed, and quotes around a value are
// removed) and then --set NAME=VALUE values (a later value wins) into
// the names a template substitutes (Options.Vars). readFile reads an
// --env file. A value may not span lines.
func ParseVars(set, envFiles []string, readFile func(string) ([]byte, error)) (map[string]string, error) {
	vars := map[string]string{}
	put := func(where, kv string) error {
		name, v, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "export "))
		if !ok || !isName(name) {
			return fmt.Errorf("limitconf: %s: want NAME=VALUE with NAME letters, digits and _, not %q", where, kv)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if strings.ContainsAny(v, "\r\n") {
			return fmt.Errorf("limitconf: %s: the value of %s spans lines", where, name)
		}
		vars[name] = v
		return nil
	}
	for _, f := range envFiles {
		data, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("limitconf: --env: %w", err)
		}
		for i, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if err := put(fmt.Sprintf("--env %s:%d", f, i+1), l); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range set {
		if err := put("--set", s); err != nil {
			return nil, err
		}
	}
	return vars, nil
}
