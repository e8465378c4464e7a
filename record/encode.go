package record

import (
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The result encoder writes a Result line without reflection: the same
// bytes, to the byte, that a json.Encoder with SetEscapeHTML(false) writes
// for it (TestResultEncoderMatchesJSON and FuzzResultEncoder hold it to
// that), so readers, goldens and files written before it see no change.
// What that means, member by member:
//
//   - members in the order of Result's fields, compact, the line ended by
//     '\n'; omitempty members left out when zero (strings empty, integers
//     0, Headers of length 0 whether nil or empty, pointers nil);
//   - integers in decimal; Outcome as the string it is (it has no
//     MarshalJSON or MarshalText);
//   - Headers as encoding/json writes a map[string][]string: keys in
//     byte order, a nil value slice as null, an empty one as [];
//   - strings as encoding/json escapes them with HTML escaping off: '"'
//     and '\\' escaped; \b \f \n \r \t by name; the other bytes below 0x20
//     as \u00XX (lower-case hex); every byte of invalid UTF-8 as \ufffd;
//     U+2028 and U+2029 as \u2028 and \u2029; everything else, '<', '>',
//     '&' and 0x7f included, as is.

// appendResult appends r to dst as one JSON line, ending in '\n', and
// returns the extended slice. It writes r.Type as it is (Writer.WriteResult
// sets it). It allocates only when dst must grow, or when r has more than
// maxStackHeaders header names (to sort them).
func appendResult(dst []byte, r *Result) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, r.Type)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, r.Seq, 10)
	dst = appendOptString(dst, `,"agent":`, r.Agent)
	dst = appendOptString(dst, `,"client":`, r.Client)
	dst = appendOptString(dst, `,"src":`, r.Src)
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, r.Method)
	dst = append(dst, `,"url":`...)
	dst = appendString(dst, r.URL)
	dst = appendOptString(dst, `,"phase":`, r.Phase)
	dst = append(dst, `,"sched":`...)
	dst = strconv.AppendInt(dst, r.Sched, 10)
	dst = appendOptInt(dst, `,"sent":`, r.Sent)
	dst = appendOptInt(dst, `,"wrote":`, r.Wrote)
	dst = appendOptInt(dst, `,"ttfb":`, r.TTFB)
	dst = appendOptInt(dst, `,"done":`, r.Done)
	dst = append(dst, `,"outcome":`...)
	dst = appendString(dst, string(r.Outcome))
	dst = appendOptInt(dst, `,"status":`, int64(r.Status))
	dst = appendOptString(dst, `,"err":`, r.Err)
	dst = appendOptString(dst, `,"err_msg":`, r.ErrMsg)
	if len(r.Headers) > 0 {
		dst = append(dst, `,"headers":`...)
		dst = appendHeader(dst, r.Headers)
	}
	if r.Arrival != nil {
		dst = append(dst, `,"arrival":`...)
		dst = strconv.AppendInt(dst, *r.Arrival, 10)
	}
	if r.Decision != nil {
		dst = append(dst, `,"decision":`...)
		dst = strconv.AppendInt(dst, *r.Decision, 10)
	}
	return append(dst, '}', '\n')
}

// appendOptString appends key (the comma, quoted name and colon) and s,
// unless s is empty.
func appendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendString(append(dst, key...), s)
}

// appendOptInt appends key and n, unless n is 0.
func appendOptInt(dst []byte, key string, n int64) []byte {
	if n == 0 {
		return dst
	}
	return strconv.AppendInt(append(dst, key...), n, 10)
}

// maxStackHeaders is how many header names appendHeader sorts without
// allocating.
const maxStackHeaders = 32

// appendHeader appends h as a JSON object of arrays of strings, its keys
// in byte order (sort.Strings order), a nil value as null.
func appendHeader(dst []byte, h http.Header) []byte {
	var stack [maxStackHeaders]string
	keys := stack[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		vs := h[k]
		if vs == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '[')
		for j, v := range vs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// plainASCII[b] says that the ASCII byte b stands for itself inside a
// JSON string: printable (0x7f counts), not '"' and not '\\'.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const lowerHex = "0123456789abcdef"

// appendString appends s as a quoted JSON string, escaped as encoding/json
// escapes it with HTML escaping off (see the comment at the top of this
// file).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	done := 0 // s[:done] is in dst
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if plainASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[done:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[b>>4], lowerHex[b&0xf])
			}
			i++
			done = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[done:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[done:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	dst = append(dst, s[done:]...)
	return append(dst, '"')
}
