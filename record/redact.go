package record

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// fingerprintPrefix starts every fingerprint.
const fingerprintPrefix = "redacted:sha256:"

// defaultSecretHeaders are the header names whose values are always secret
// (contract.md, "The record file").
var defaultSecretHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
	"X-API-Key", "Api-Key", "X-Auth-Token",
}

// defaultSecretQuery are the query parameter names whose values are secret
// unless a Redactor is told otherwise (contract.md, "The record file"):
// API keys, tokens (access_token is how RFC 6750, section 2.3, passes a
// bearer token in a URL), signatures, passwords and sessions.
var defaultSecretQuery = []string{
	"api_key", "apikey", "api-key", "key", "token", "access_token", "refresh_token", "id_token",
	"auth", "signature", "sig", "password", "passwd", "secret", "client_secret", "session",
}

// DefaultSecretHeaders returns the header names whose values a Redactor
// always replaces: Authorization, Proxy-Authorization, Cookie, Set-Cookie,
// X-API-Key, Api-Key and X-Auth-Token. The slice is a new copy.
func DefaultSecretHeaders() []string { return append([]string(nil), defaultSecretHeaders...) }

// DefaultSecretQuery returns the query parameter names whose values a
// Redactor replaces unless built WithoutDefaultQuery: api_key, apikey,
// api-key, key, token, access_token, refresh_token, id_token, auth,
// signature, sig, password, passwd, secret, client_secret and session. The
// slice is a new copy.
func DefaultSecretQuery() []string { return append([]string(nil), defaultSecretQuery...) }

// Fingerprint returns a stable short fingerprint of secret,
// "redacted:sha256:" followed by the first 8 hex digits of the SHA-256 of
// its bytes, e.g. "redacted:sha256:2bb80d53".
//
// It lets a reader see that two requests carried the same (or a different)
// credential without seeing it. It does not hide a low-entropy secret: 32
// bits of an unsalted hash are quickly matched against guesses, so a short
// password or a small numeric key can be recovered from its fingerprint.
// API keys and tokens, which are long and random, are safe.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return fingerprintPrefix + hex.EncodeToString(sum[:4])
}

// isFingerprint reports whether v is a fingerprint already, so redacting
// twice is redacting once.
func isFingerprint(v string) bool {
	h, ok := strings.CutPrefix(v, fingerprintPrefix)
	if !ok || len(h) != 8 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// A Redactor replaces secret values by their Fingerprint: the values of
// secret headers, of secret query parameters, and URL passwords, in
// records, URLs and error text. Names are matched case-insensitively. It
// always treats DefaultSecretHeaders as secret, DefaultSecretQuery unless
// built WithoutDefaultQuery, and the extra names it was built with.
//
// The zero Redactor and a nil *Redactor redact the defaults only. A
// Redactor is immutable, so it is safe for concurrent use.
type Redactor struct {
	headers map[string]bool // extra secret header names, lower case
	query   map[string]bool // extra secret query names, lower case
	// noDefaultQuery drops DefaultSecretQuery (--no-default-secrets).
	noDefaultQuery bool
}

// NewRedactor returns a Redactor that also treats extraHeaders (the
// --secret-header names) and extraQuery (the --secret-query names) as
// secret.
func NewRedactor(extraHeaders, extraQuery []string) *Redactor {
	r := &Redactor{headers: make(map[string]bool), query: make(map[string]bool)}
	for _, h := range extraHeaders {
		r.headers[strings.ToLower(strings.TrimSpace(h))] = true
	}
	for _, q := range extraQuery {
		r.query[strings.ToLower(strings.TrimSpace(q))] = true
	}
	return r
}

// WithoutDefaultQuery returns a copy of r that treats only its extra query
// names as secret, not DefaultSecretQuery (--no-default-secrets: for a
// target whose "key" or "session" parameter is no secret). Secret headers
// and URL passwords stay redacted.
func (r *Redactor) WithoutDefaultQuery() *Redactor {
	out := &Redactor{noDefaultQuery: true}
	if r != nil {
		out.headers, out.query = r.headers, r.query
	}
	return out
}

// secretHeader reports whether the header name is secret.
func (r *Redactor) secretHeader(name string) bool {
	for _, h := range defaultSecretHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return r != nil && r.headers[strings.ToLower(name)]
}

// secretQuery reports whether the query parameter name is secret.
func (r *Redactor) secretQuery(name string) bool {
	if r == nil || !r.noDefaultQuery {
		for _, q := range defaultSecretQuery {
			if strings.EqualFold(q, name) {
				return true
			}
		}
	}
	return r != nil && r.query[strings.ToLower(name)]
}

// Header returns a copy of h with the value of every secret header
// replaced by its Fingerprint; other values are copied verbatim. It returns
// nil for a nil h.
func (r *Redactor) Header(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		cp := append([]string(nil), vs...)
		if r.secretHeader(k) {
			for i, v := range cp {
				cp[i] = redactValue(v)
			}
		}
		out[k] = cp
	}
	return out
}

// Value returns v, or its Fingerprint when name is a secret header or query
// parameter name. It redacts a header given on the command line
// ("-H Name: value") or a plan's parameter before it is recorded.
func (r *Redactor) Value(name, v string) string {
	if r.secretHeader(name) || r.secretQuery(name) {
		return redactValue(v)
	}
	return v
}

// redactValue returns the fingerprint of v, or v when it is one already.
func redactValue(v string) string {
	if isFingerprint(v) {
		return v
	}
	return Fingerprint(v)
}

// URL returns s with secrets replaced by their fingerprints: the values of
// secret query parameters (and of such key=value pairs in the fragment), and
// the password of the userinfo — or the user name when the password is
// absent or empty, since API keys are often passed that way ("key@host",
// "key:@host"). Everything else is
// kept byte for byte, parameter order included, and s need not parse as a
// URL. Fingerprints are taken of the percent-decoded values, so a secret
// sent in a header and in a query gets the same one.
func (r *Redactor) URL(s string) string {
	rest, frag, hasFrag := strings.Cut(s, "#")
	base, query, hasQuery := strings.Cut(rest, "?")

	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(redactUserinfo(base))
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(r.redactQuery(query))
	}
	if hasFrag {
		b.WriteByte('#')
		b.WriteString(r.redactQuery(frag))
	}
	return b.String()
}

// redactUserinfo replaces the password (or the lone user name) in the
// authority of base, the part of a URL before its query.
func redactUserinfo(base string) string {
	i := strings.Index(base, "//")
	if i < 0 {
		return base
	}
	auth := base[i+2:]
	if end := strings.IndexByte(auth, '/'); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return base
	}
	userinfo := auth[:at]
	user, pass, hasPass := strings.Cut(userinfo, ":")
	switch {
	case userinfo == "" || isFingerprint(strings.TrimSuffix(userinfo, ":")):
	case pass != "":
		userinfo = user + ":" + redactValue(pathUnescape(pass))
	case hasPass: // "key:", as curl -u key: writes it
		userinfo = redactValue(pathUnescape(user)) + ":"
	default:
		userinfo = redactValue(pathUnescape(user))
	}
	return base[:i+2] + userinfo + base[i+2+at:]
}

// redactQuery replaces the values of secret parameters in a query string,
// keeping everything else verbatim. Pairs are separated by '&'; since some
// servers also split on ';', a secret name found after a ';' counts too, and
// its value then runs to the next '&', so no part of it is left behind.
func (r *Redactor) redactQuery(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	changed := false
	for i, p := range parts {
		for off := 0; ; {
			pair, _, more := strings.Cut(p[off:], ";")
			if name, _, ok := strings.Cut(pair, "="); ok && r.secretQuery(unescape(name)) {
				val := p[off+len(name)+1:]
				parts[i] = p[:off] + name + "=" + redactValue(unescape(val))
				changed = true
				break
			}
			if !more {
				break
			}
			off += len(pair) + 1
		}
	}
	if !changed {
		return q
	}
	return strings.Join(parts, "&")
}

// unescape percent-decodes a query component, or returns it as is when it
// is not valid escaping.
func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// pathUnescape percent-decodes a userinfo component, or returns it as is
// when it is not valid escaping.
func pathUnescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// Text returns s, an error message or any other text, with every URL in it
// redacted as URL does: Go's *url.Error, for one, quotes the whole request
// URL ("Get \"http://h/?api_key=…\": dial tcp …"). A URL runs from
// "http://" or "https://" (any case) to the first space, quote, angle
// bracket or control character.
func (r *Redactor) Text(s string) string {
	lower := strings.ToLower(s)
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		j := strings.Index(lower[i:], "http")
		if j < 0 {
			break
		}
		start := i + j
		rest := lower[start:]
		if !strings.HasPrefix(rest, "http://") && !strings.HasPrefix(rest, "https://") {
			i = start + 4
			continue
		}
		end := start
		for end < len(s) && !strings.ContainsRune(" \t\"'<>`", rune(s[end])) && s[end] >= 0x20 && s[end] != 0x7f {
			end++
		}
		if b.Len() == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[last:start])
		b.WriteString(r.URL(s[start:end]))
		last, i = end, end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
