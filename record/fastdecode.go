package record

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// The fast result decoder reads result lines in the shape this package
// writes several times faster than encoding/json's reflection. It accepts a
// strict subset of JSON — known lower-case keys each at most once, strings
// without \u escapes in valid UTF-8, integers without fraction or exponent —
// and gives up (ok false) on anything else, so the caller falls back to
// encoding/json. On what it accepts it decodes exactly as json.Unmarshal
// does (FuzzDecodeResult checks this).

// Result members, as bits of a seen-set.
const (
	fType = 1 << iota
	fSeq
	fAgent
	fClient
	fSrc
	fMethod
	fURL
	fPhase
	fSched
	fSent
	fWrote
	fTTFB
	fDone
	fOutcome
	fStatus
	fErr
	fErrMsg
	fHeaders
	fArrival
	fDecision
)

// interner shares the bytes of repeated short strings (methods, URLs,
// phases, header names and values) across results. It holds at most
// internMax strings of at most internLen bytes; it is not safe for
// concurrent use.
type interner map[string]string

const (
	internMax = 8192
	internLen = 256
)

func (in interner) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(b) <= internLen && len(in) < internMax {
		in[s] = s
	}
	return s
}

// fastDecoder decodes one line.
type fastDecoder struct {
	b      []byte
	i      int
	tmp    []byte // unescaped string bytes
	intern interner
}

// decodeResult decodes line into r, which must be the zero Result, and
// reports whether it could; when it could not, r is in an undefined state.
func (d *fastDecoder) decodeResult(line []byte, r *Result) bool {
	d.b, d.i = line, 0
	d.ws()
	if !d.eat('{') {
		return false
	}
	seen := 0
	d.ws()
	if d.eat('}') {
		return d.end()
	}
	for {
		d.ws()
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		var bit int
		switch string(key) {
		case "type":
			bit, ok = fType, d.strField(&r.Type)
		case "seq":
			bit, ok = fSeq, d.intField(&r.Seq)
		case "agent":
			bit, ok = fAgent, d.strField(&r.Agent)
		case "client":
			bit, ok = fClient, d.strField(&r.Client)
		case "src":
			bit, ok = fSrc, d.strField(&r.Src)
		case "method":
			bit, ok = fMethod, d.strField(&r.Method)
		case "url":
			bit, ok = fURL, d.strField(&r.URL)
		case "phase":
			bit, ok = fPhase, d.strField(&r.Phase)
		case "sched":
			bit, ok = fSched, d.intField(&r.Sched)
		case "sent":
			bit, ok = fSent, d.intField(&r.Sent)
		case "wrote":
			bit, ok = fWrote, d.intField(&r.Wrote)
		case "ttfb":
			bit, ok = fTTFB, d.intField(&r.TTFB)
		case "done":
			bit, ok = fDone, d.intField(&r.Done)
		case "outcome":
			var s string
			bit, ok = fOutcome, d.strField(&s)
			if s != "" {
				r.Outcome = Outcome(s)
			}
		case "status":
			var v int64
			bit, ok = fStatus, d.intField(&v)
			if v != int64(int(v)) {
				return false
			}
			if v != 0 {
				r.Status = int(v)
			}
		case "err":
			bit, ok = fErr, d.strField(&r.Err)
		case "err_msg":
			bit, ok = fErrMsg, d.strField(&r.ErrMsg)
		case "headers":
			bit, ok = fHeaders, d.headers(&r.Headers)
		case "arrival":
			bit, ok = fArrival, d.optInt(&r.Arrival)
		case "decision":
			bit, ok = fDecision, d.optInt(&r.Decision)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.ws()
		if d.eat('}') {
			return d.end()
		}
		if !d.eat(',') {
			return false
		}
	}
}

// end reports whether only whitespace is left.
func (d *fastDecoder) end() bool {
	d.ws()
	return d.i == len(d.b)
}

func (d *fastDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// null consumes a null literal if there is one.
func (d *fastDecoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// str reads a string and returns its unescaped bytes, valid until the next
// call.
func (d *fastDecoder) str() ([]byte, bool) {
	if !d.eat('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, utf8.Valid(s)
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// escaped finishes a string with escapes, started at start.
func (d *fastDecoder) escaped(start int) ([]byte, bool) {
	d.tmp = append(d.tmp[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.tmp, utf8.Valid(d.tmp)
		case c < 0x20:
			return nil, false
		case c != '\\':
			d.tmp = append(d.tmp, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, false
		}
		switch d.b[d.i+1] {
		case '"', '\\', '/':
			d.tmp = append(d.tmp, d.b[d.i+1])
		case 'b':
			d.tmp = append(d.tmp, '\b')
		case 'f':
			d.tmp = append(d.tmp, '\f')
		case 'n':
			d.tmp = append(d.tmp, '\n')
		case 'r':
			d.tmp = append(d.tmp, '\r')
		case 't':
			d.tmp = append(d.tmp, '\t')
		default: // \u and invalid escapes: leave them to encoding/json
			return nil, false
		}
		d.i += 2
	}
	return nil, false
}

// strField reads a string or null into *s (null leaves it unchanged, as
// encoding/json does).
func (d *fastDecoder) strField(s *string) bool {
	if d.null() {
		return true
	}
	b, ok := d.str()
	if !ok {
		return false
	}
	*s = d.intern.get(b)
	return true
}

// intField reads an integer or null into *v.
func (d *fastDecoder) intField(v *int64) bool {
	if d.null() {
		return true
	}
	start := d.i
	d.eat('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || n > 1 && d.b[digits] == '0' {
		return false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	x, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return false
	}
	*v = x
	return true
}

// optInt reads an integer into a new *int64, or null as nil (arrival, decision).
func (d *fastDecoder) optInt(p **int64) bool {
	if d.null() {
		*p = nil
		return true
	}
	v := new(int64)
	if !d.intField(v) {
		return false
	}
	*p = v
	return true
}

// headers reads an object of string arrays, or null as nil.
func (d *fastDecoder) headers(h *http.Header) bool {
	if d.null() {
		*h = nil
		return true
	}
	if !d.eat('{') {
		return false
	}
	m := make(http.Header)
	*h = m
	d.ws()
	if d.eat('}') {
		return true
	}
	for {
		d.ws()
		kb, ok := d.str()
		if !ok {
			return false
		}
		key := d.intern.get(kb)
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		vals, ok := d.strings()
		if !ok {
			return false
		}
		m[key] = vals
		d.ws()
		if d.eat('}') {
			return true
		}
		if !d.eat(',') {
			return false
		}
	}
}

// strings reads an array of strings (no null elements), or null as nil.
func (d *fastDecoder) strings() ([]string, bool) {
	if d.null() {
		return nil, true
	}
	if !d.eat('[') {
		return nil, false
	}
	vals := make([]string, 0, 1)
	d.ws()
	if d.eat(']') {
		return vals, true
	}
	for {
		d.ws()
		b, ok := d.str()
		if !ok {
			return nil, false
		}
		vals = append(vals, d.intern.get(b))
		d.ws()
		if d.eat(']') {
			return vals, true
		}
		if !d.eat(',') {
			return nil, false
		}
	}
}
