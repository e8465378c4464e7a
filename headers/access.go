package headers

import (
	"net/http"
	"slices"
	"strings"
)

// Values returns the field lines of the field name in h whatever the
// spelling of its key: records keep header names as the server spelled them
// ("RateLimit-Policy", or "ratelimit-policy" over HTTP/2), which
// http.Header.Get and Values, canonicalising the key to "Ratelimit-Policy",
// would miss. When several spellings are present, their lines are joined in
// the byte order of the keys. The result may share h's storage: callers
// must not modify it. Values is safe for concurrent use with other readers
// of h.
func Values(h http.Header, name string) []string {
	var out []string
	n := 0
	for k, v := range h {
		if len(k) == len(name) && strings.EqualFold(k, name) {
			n++
			out = v
		}
	}
	if n <= 1 {
		return out
	}
	keys := make([]string, 0, n)
	for k := range h {
		if len(k) == len(name) && strings.EqualFold(k, name) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out = nil
	for _, k := range keys {
		out = append(out, h[k]...)
	}
	return out
}

// Get returns the first field line of the field name in h whatever the
// spelling of its key (see [Values]), or "" when there is none.
func Get(h http.Header, name string) string {
	if v := Values(h, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// setField replaces the field name in h, under any spelling, by one field
// line under exactly the key name: the reference server writes the drafts'
// spellings (RateLimit-Policy, not Go's canonical Ratelimit-Policy), which
// net/http's server sends verbatim over HTTP/1.1.
func setField(h http.Header, name, value string) {
	deleteField(h, name)
	h[name] = []string{value}
}
