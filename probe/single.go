package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rlprobe/rlprobe/record"
)

// HTTP/2 defaults (RFC 9113 §6.5.2) and this client's settings.
const (
	h2DefaultWindow     = 65535
	h2DefaultFrameSize  = 16384
	h2DefaultTableSize  = 4096
	spDefaultMaxStreams = 100     // when the server sets no limit
	spOwnWindow         = 1 << 20 // our receive window, stream and connection
)

// prepareSinglePacket opens the connections of a single-packet race: one
// per target and source address (more when the server allows fewer
// concurrent streams than there are members), each in a goroutine that
// sends its streams' HEADERS, withholds their final DATA frames until the
// gate opens and then flushes them in one write.
func (r *run) prepareSinglePacket(rc *race, release time.Time, prepared *sync.WaitGroup, gate, off <-chan struct{}) {
	type key struct {
		t   *target
		src netip.Addr
	}
	groups := make(map[key][]int)
	var order []key
	for _, i := range rc.members {
		p := r.bk.pool(i)
		k := key{p.t, p.src}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		r.wg.Add(1)
		go r.spGroup(groups[k], release, prepared, gate, off)
	}
}

// spConn is one HTTP/2 connection driven frame by frame.
type spConn struct {
	c   net.Conn
	src string
	fr  *http2.Framer // reads; its writes are serialised by wmu
	wmu sync.Mutex

	maxStreams   int
	maxFrame     uint32
	streamWindow uint32
	tableSize    uint32
	maxHeader    uint32 // our SETTINGS_MAX_HEADER_LIST_SIZE (Options.MaxHeaderBytes)
}

// spStream is one request of a single-packet race.
type spStream struct {
	i      int
	id     uint32
	res    record.Result
	status int
	header http.Header
	ttfb   time.Time
	done   bool
	doneAt time.Time
	err    error
}

// spGroup opens as many connections as the members of one group need.
func (r *run) spGroup(members []int, release time.Time, prepared *sync.WaitGroup, gate, off <-chan struct{}) {
	defer r.wg.Done()
	p := r.bk.pool(members[0])
	fail := func(ms []int, err error) {
		keep := r.dialFailed(err) || r.dctx.Err() == nil // else the run stopped: not-sent
		for _, i := range ms {
			prepared.Done()
			if keep {
				r.finish(i, r.newResult(i), err)
			}
		}
	}
	bodyLen := len(r.e.opt.Body)
	for len(members) > 0 {
		sc, err := r.spDial(p)
		if err != nil {
			fail(members, err)
			return
		}
		if bodyLen > 1 && uint32(bodyLen-1) > sc.streamWindow {
			_ = sc.c.Close()
			fail(members, fmt.Errorf("body of %d bytes exceeds the server's stream window of %d", bodyLen, sc.streamWindow))
			return
		}
		n := min(len(members), sc.maxStreams)
		if bodyLen > 0 {
			n = min(n, max(1, h2DefaultWindow/bodyLen)) // the connection window holds every body
		}
		r.wg.Add(1)
		go r.spRun(sc, members[:n], release, prepared, gate, off)
		members = members[n:]
	}
}

// spDial dials an HTTP/2 connection, exchanges the connection prefaces and
// reads the server's first SETTINGS.
func (r *run) spDial(p *pool) (*spConn, error) {
	c, _, err := p.dialRaw(r.dctx, dialH2)
	if err != nil {
		return nil, err
	}
	r.connected.Store(true)
	sc := &spConn{
		c:            c,
		src:          localAddr(c),
		maxStreams:   spDefaultMaxStreams,
		maxFrame:     h2DefaultFrameSize,
		streamWindow: h2DefaultWindow,
		tableSize:    h2DefaultTableSize,
	}
	sc.fr = http2.NewFramer(c, c)
	sc.fr.ReadMetaHeaders = hpack.NewDecoder(h2DefaultTableSize, nil)
	sc.maxHeader = uint32(min(r.e.opt.MaxHeaderBytes, math.MaxUint32))
	sc.fr.MaxHeaderListSize = sc.maxHeader
	_ = c.SetDeadline(time.Now().Add(r.e.opt.Timeout))

	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	wf := http2.NewFramer(&buf, nil)
	_ = wf.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: spOwnWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: sc.maxHeader},
	)
	_ = wf.WriteWindowUpdate(0, spOwnWindow-h2DefaultWindow)
	if _, err := c.Write(buf.Bytes()); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("http2 preface: %w", err)
	}
	f, err := sc.fr.ReadFrame()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("http2 preface: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		_ = c.Close()
		return nil, withClass(record.ErrOther, fmt.Errorf("http2 preface: server sent %v before its SETTINGS", f.Header().Type))
	}
	_ = sf.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			sc.maxStreams = int(min(s.Val, 1<<20))
		case http2.SettingMaxFrameSize:
			sc.maxFrame = s.Val
		case http2.SettingInitialWindowSize:
			sc.streamWindow = s.Val
		case http2.SettingHeaderTableSize:
			sc.tableSize = s.Val
		}
		return nil
	})
	if sc.maxStreams == 0 {
		_ = c.Close()
		return nil, withClass(record.ErrOther, errors.New("http2: server allows no concurrent streams"))
	}
	if err := sc.fr.WriteSettingsAck(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("http2 preface: %w", err)
	}
	return sc, nil
}

// spRun drives one connection of a single-packet race.
func (r *run) spRun(sc *spConn, members []int, release time.Time, prepared *sync.WaitGroup, gate, off <-chan struct{}) {
	defer r.wg.Done()
	defer sc.c.Close()
	body := r.e.opt.Body
	streams := make([]*spStream, len(members))
	byID := make(map[uint32]*spStream, len(members))

	// The opening: every stream's HEADERS (and its body but the last byte).
	var buf, hb bytes.Buffer
	wf := http2.NewFramer(&buf, nil)
	enc := hpack.NewEncoder(&hb)
	enc.SetMaxDynamicTableSizeLimit(sc.tableSize)
	var err error
	for k, i := range members {
		s := &spStream{i: i, id: uint32(2*k + 1), res: r.newResult(i)}
		streams[k], byID[s.id] = s, s
		hb.Reset()
		encodeH2Headers(enc, r.e.opt.Method, r.bk.pool(i), body)
		if err == nil {
			err = writeHeaderBlock(wf, s.id, hb.Bytes(), sc.maxFrame)
		}
		for rest := body[:max(len(body)-1, 0)]; err == nil && len(rest) > 0; {
			n := min(len(rest), int(sc.maxFrame))
			err = wf.WriteData(s.id, false, rest[:n])
			rest = rest[n:]
		}
	}
	if err == nil {
		err = sc.c.SetDeadline(release.Add(r.e.opt.Timeout))
	}
	if err == nil {
		now := r.stamp(time.Now())
		for _, s := range streams {
			s.res.Src, s.res.Sent = sc.src, now
		}
		_, err = sc.c.Write(buf.Bytes())
	}
	if err != nil {
		for _, s := range streams {
			prepared.Done()
			r.finish(s.i, s.res, err)
		}
		return
	}

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc.readResponses(byID)
	}()
	for range streams {
		prepared.Done()
	}
	select {
	case <-gate:
	case <-off:
		_ = sc.c.Close()
		<-readerDone
		for _, s := range streams {
			if s.status != 0 { // answered before its final frame: it did arrive
				r.spFinish(s, nil)
			}
		}
		return // the rest are not-sent
	}

	// The release: every final frame in one write.
	buf.Reset()
	var last []byte
	if len(body) > 0 {
		last = body[len(body)-1:]
	}
	for _, s := range streams {
		_ = wf.WriteData(s.id, true, last)
	}
	sc.wmu.Lock()
	now := time.Now()
	_, werr := sc.c.Write(buf.Bytes())
	sc.wmu.Unlock()
	if werr == nil {
		for _, s := range streams {
			s.res.Wrote = r.stamp(now)
		}
		_ = sc.c.SetReadDeadline(now.Add(r.e.opt.Timeout))
	} else {
		_ = sc.c.Close()
	}
	stop := make(chan struct{})
	go func() { // abandon at the end of the grace period
		select {
		case <-r.rctx.Done():
			_ = sc.c.SetReadDeadline(aLongTimeAgo)
		case <-stop:
		}
	}()
	<-readerDone
	close(stop)
	for _, s := range streams {
		if werr != nil && s.status == 0 {
			s.err = werr
		}
		r.spFinish(s, s.err)
	}
}

// spFinish records one stream's outcome.
func (r *run) spFinish(s *spStream, err error) {
	res := s.res
	if !s.ttfb.IsZero() {
		res.TTFB = r.stamp(s.ttfb)
	}
	if !s.doneAt.IsZero() {
		res.Done = r.stamp(s.doneAt)
	}
	if s.status != 0 {
		res.Status = s.status
		r.captureHeaders(&res, s.header, nil)
		if err != nil {
			res.ErrMsg = r.e.opt.Redactor.Text("reading body: " + err.Error())
		}
		err = nil
	}
	r.finish(s.i, res, err)
}

// writeHeaderBlock writes a header block as HEADERS and, when it exceeds
// the frame size, CONTINUATION frames.
func writeHeaderBlock(wf *http2.Framer, id uint32, block []byte, maxFrame uint32) error {
	first := block[:min(len(block), int(maxFrame))]
	rest := block[len(first):]
	if err := wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		n := min(len(rest), int(maxFrame))
		if err := wf.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// connectionHeaders are HTTP/1.1 connection-specific fields that HTTP/2
// forbids (RFC 9113 §8.2.2), and Host, which becomes :authority.
var connectionHeaders = []string{"connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade", "host", "te"}

// encodeH2Headers encodes the request header block of p's request.
func encodeH2Headers(enc *hpack.Encoder, method string, p *pool, body []byte) {
	w := func(k, v string) { _ = enc.WriteField(hpack.HeaderField{Name: k, Value: v}) }
	scheme := "http"
	if p.t.tls {
		scheme = "https"
	}
	w(":method", method)
	w(":scheme", scheme)
	w(":authority", p.t.host)
	w(":path", p.t.requestURI)
	keys := make([]string, 0, len(p.header))
	for k := range p.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if slices.Contains(connectionHeaders, lk) {
			continue
		}
		for _, v := range p.header[k] {
			w(lk, v)
		}
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		w("content-length", strconv.Itoa(len(body)))
	}
}

// readResponses reads frames until every stream is done or the connection
// fails, answering SETTINGS and PING and returning flow-control credit.
func (sc *spConn) readResponses(streams map[uint32]*spStream) {
	pending := len(streams)
	end := func(s *spStream, now time.Time, err error) {
		if !s.done {
			s.done, s.doneAt, s.err = true, now, err
			pending--
		}
	}
	write := func(fn func() error) {
		sc.wmu.Lock()
		_ = fn() // a failed write shows up as a read error
		sc.wmu.Unlock()
	}
	for pending > 0 {
		f, err := sc.fr.ReadFrame()
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			for _, s := range streams {
				end(s, now, err)
			}
			return
		}
		s := streams[f.Header().StreamID]
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if s == nil || s.done {
				continue
			}
			if s.ttfb.IsZero() {
				s.ttfb = now
			}
			if f.Truncated {
				end(s, now, headTooLarge(int(sc.maxHeader)))
				write(func() error { return sc.fr.WriteRSTStream(f.StreamID, http2.ErrCodeCancel) })
				continue
			}
			if s.status == 0 {
				code, _ := strconv.Atoi(f.PseudoValue("status"))
				if code >= 100 && code < 200 && !f.StreamEnded() {
					continue // interim response
				}
				s.status = code
				s.header = make(http.Header, len(f.Fields))
				for _, hf := range f.RegularFields() {
					s.header.Add(http.CanonicalHeaderKey(hf.Name), hf.Value)
				}
			}
			if f.StreamEnded() {
				end(s, now, nil)
			}
		case *http2.DataFrame:
			if n := f.Header().Length; n > 0 {
				write(func() error {
					if err := sc.fr.WriteWindowUpdate(0, n); err != nil || f.StreamEnded() {
						return err
					}
					return sc.fr.WriteWindowUpdate(f.StreamID, n)
				})
			}
			if s == nil || s.done {
				continue
			}
			if s.ttfb.IsZero() {
				s.ttfb = now
			}
			if f.StreamEnded() {
				end(s, now, nil)
			}
		case *http2.RSTStreamFrame:
			if s != nil {
				end(s, now, http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				write(sc.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				write(func() error { return sc.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			for id, s := range streams {
				if id > f.LastStreamID {
					end(s, now, http2.GoAwayError{LastStreamID: f.LastStreamID, ErrCode: f.ErrCode})
				}
			}
		}
	}
}
