package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/net/http/httpguts"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// h1Head is what the engine keeps of a response head read by leanHead.
type h1Head struct {
	status   int
	length   int64       // Content-Length
	close    bool        // Connection: close
	header   http.Header // the captured fields only, named as the server spelled them; nil when none
	arrival  []byte      // the first arrival echo's value, or nil; valid until br is read again
	decision []byte      // the first decision number's value, or nil; likewise
}

// errNeedFallback says that leanHead declined a response: nothing was
// consumed, and net/http's reader must parse it.
var errNeedFallback = errors.New("probe: response needs the full parser")

// leanHead parses the head of the common response, which the engine reads
// thousands of times a second, without net/http's allocations: HTTP/1.1, a
// final status from 200 to 599 other than 204 and 304, one Content-Length
// of at most maxBody, no Transfer-Encoding, well-formed field lines,
// and a head of at most maxHead bytes that fits in br's buffer. It consumes the head and returns it;
// for any other response it consumes nothing and returns errNeedFallback.
// An error reading the first bytes is returned as http.ReadResponse would
// (io.EOF becomes io.ErrUnexpectedEOF).
func leanHead(br *bufio.Reader, captured []string, method string, maxHead int, maxBody int64) (h h1Head, err error) {
	if method == http.MethodHead {
		return h, errNeedFallback
	}
	// Have the whole head in the buffer.
	var buf []byte
	end := -1
	scanned := 0 // lines before this offset are complete
	for {
		buf, _ = br.Peek(br.Buffered()) // no I/O
		for end < 0 {
			nl := bytes.IndexByte(buf[scanned:], '\n')
			if nl < 0 {
				break
			}
			line := buf[scanned : scanned+nl+1]
			scanned += nl + 1
			if len(line) < 2 || line[len(line)-2] != '\r' {
				return h, errNeedFallback // a bare LF
			}
			if len(line) == 2 {
				end = scanned
			}
		}
		if end >= 0 {
			break
		}
		if br.Buffered() >= br.Size() {
			return h, errNeedFallback // a head larger than the buffer
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			if br.Buffered() > 0 {
				return h, errNeedFallback // a partial head: the full parser reports it
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return h, err
		}
	}
	if end > maxHead {
		return h, errNeedFallback // the full path reports it
	}
	head := buf[:end]

	// The status line: "HTTP/1.1 200 OK".
	nl := bytes.IndexByte(head, '\n')
	line := head[:nl-1]
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return h, errNeedFallback
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return h, errNeedFallback
		}
		h.status = h.status*10 + int(c-'0')
	}
	if h.status < 200 || h.status > 599 || h.status == http.StatusNoContent || h.status == http.StatusNotModified {
		return h, errNeedFallback
	}

	// The field lines.
	haveLength := false
	for rest := head[nl+1 : len(head)-2]; len(rest) > 0; {
		nl := bytes.IndexByte(rest, '\n')
		line := rest[:nl-1]
		rest = rest[nl+1:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return h, errNeedFallback
		}
		name := line[:colon]
		for _, c := range name {
			if !httpguts.IsTokenRune(rune(c)) {
				return h, errNeedFallback
			}
		}
		value := trimOWS(line[colon+1:])
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return h, errNeedFallback
			}
		}
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if haveLength || len(value) == 0 || len(value) > 18 {
				return h, errNeedFallback // repeated, empty or too long for an int64
			}
			for _, c := range value {
				if c < '0' || c > '9' {
					return h, errNeedFallback
				}
				h.length = h.length*10 + int64(c-'0')
			}
			haveLength = true
		case asciiEqualFold(name, "Transfer-Encoding"):
			return h, errNeedFallback
		case asciiEqualFold(name, "Connection"):
			h.close = h.close || hasCloseToken(value)
		case asciiEqualFold(name, headers.ArrivalHeader):
			if h.arrival == nil {
				h.arrival = value
			}
		case asciiEqualFold(name, headers.DecisionHeader):
			if h.decision == nil {
				h.decision = value
			}
		}
		for _, k := range captured {
			if asciiEqualFold(name, k) {
				if h.header == nil {
					h.header = make(http.Header, 4)
				}
				key := spelledKey(h.header, name, k) // the server's first spelling
				h.header[key] = append(h.header[key], string(value))
				break
			}
		}
	}
	if !haveLength || h.length > maxBody {
		return h, errNeedFallback
	}
	if _, err := br.Discard(end); err != nil {
		return h, err // cannot happen: the head is buffered
	}
	return h, nil
}

// headTooLarge is the error of a response head over the cap.
func headTooLarge(limit int) error {
	return withClass(record.ErrHeaderTooLarge, fmt.Errorf("response head larger than %d bytes", limit))
}

// readHead reads a response head (up to and including its empty line) from
// br, for net/http's reader, holding at most limit bytes of it (plus one
// buffer): a longer head is an error of class record.ErrHeaderTooLarge,
// whatever the server sends, so that no answer can make the engine hold
// more. An error reading it is returned as http.ReadResponse would (io.EOF
// becomes io.ErrUnexpectedEOF).
func readHead(br *bufio.Reader, limit int) ([]byte, error) {
	var head []byte
	line := 0 // where the current line starts in head
	for {
		frag, err := br.ReadSlice('\n')
		if len(head)+len(frag) > limit {
			return nil, headTooLarge(limit)
		}
		head = append(head, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue // a line longer than the buffer
		case err != nil:
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if l := head[line:]; len(l) == 1 || (len(l) == 2 && l[0] == '\r') {
			return head, nil
		}
		line = len(head)
	}
}

// interimHead reports whether head is that of an interim (1xx) response
// other than 101 Switching Protocols: one without a body, followed by
// another response.
func interimHead(head []byte) bool {
	return len(head) >= 12 && bytes.HasPrefix(head, []byte("HTTP/1.")) && head[8] == ' ' &&
		head[9] == '1' && head[10] >= '0' && head[10] <= '9' && head[11] >= '0' && head[11] <= '9' &&
		(len(head) == 12 || head[12] == ' ' || head[12] == '\r' || head[12] == '\n') &&
		string(head[9:12]) != "101"
}

// trimOWS trims optional white space (SP, HTAB) on both ends.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// asciiEqualFold reports whether b and s are equal ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if x != y && (x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z') {
			return false
		}
	}
	return true
}

// hasCloseToken reports whether a Connection value lists "close".
func hasCloseToken(v []byte) bool {
	for len(v) > 0 {
		tok := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if asciiEqualFold(trimOWS(tok), "close") {
			return true
		}
	}
	return false
}

// spelledName returns the name of the first field of the HTTP/1.1 head
// named name (in any case) as the head spells it, or name when none is.
func spelledName(head []byte, name string) string {
	for rest := head[bytes.IndexByte(head, '\n')+1:]; len(rest) > 0; {
		line := rest
		if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
			line, rest = rest[:nl], rest[nl+1:]
		} else {
			rest = nil
		}
		if colon := bytes.IndexByte(line, ':'); colon == len(name) && asciiEqualFold(line[:colon], name) {
			return string(line[:colon])
		}
	}
	return name
}

// spelledKey returns the key of h that spells name in any case, or name
// as a new key (canonical, when name spells it, without allocating).
func spelledKey(h http.Header, name []byte, canonical string) string {
	for k := range h {
		if asciiEqualFold(name, k) {
			return k
		}
	}
	if string(name) == canonical {
		return canonical
	}
	return string(name)
}
