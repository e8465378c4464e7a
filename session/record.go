package session

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
)

// clockSamples is how many exchanges a --time-ref measurement makes.
const clockSamples = 12

// startLead is how long after "now" the first send is due when nothing
// anchors it: time to pre-dial connections.
const startLead = 200 * time.Millisecond

// recorder is the record of one operation: the header, one Seq space over
// every engine of the session, the results, the end line with the clock
// estimate, and the file they are written to (none in memory). Each result
// written through it also becomes a clock sample. It is the one layer
// between the engines' sinks and record.Writer; safe for concurrent use.
type recorder struct {
	path string
	file *os.File       // nil in memory
	w    *record.Writer // nil in memory
	hdr  record.Header  // as written

	mu      sync.Mutex
	next    int64           // the next Seq of the record
	results []record.Result // every result, as the engines returned them
	// streamed and streamedSent count the results of streamed runs, which
	// are written to the file and not kept.
	streamed, streamedSent int64
	clockIv                probe.ClockInterval // of the results written so far
	end                    *record.End         // once closed
}

// open builds the record header for an operation starting at zero (plan
// and policy go into it as JSON), measures the clock against TimeRef, and
// creates the record file with the header written (never replacing one
// without Force: Usage).
func (s *Session) open(ctx context.Context, zero time.Time, plan, policy any) error {
	hdr, err := s.header(zero, plan, policy)
	if err != nil {
		return err
	}
	s.measureClock(ctx, &hdr)
	rec := &recorder{path: s.cfg.Out, hdr: hdr}
	if rec.path != "" {
		var file *os.File
		var err error
		if s.cfg.OutDefault && !s.cfg.Force {
			var path string
			if file, path, err = record.CreateFree(rec.path); err == nil {
				rec.path, s.cfg.Out = path, path
			}
		} else {
			file, err = record.Create(rec.path, s.cfg.Force)
		}
		if err != nil {
			return WithClass(Usage, err)
		}
		w, err := record.NewWriter(file, hdr)
		if err != nil {
			file.Close()
			return fmt.Errorf("write %s: %w", rec.path, err)
		}
		rec.file, rec.w = file, w
	}
	s.rec = rec
	return nil
}

// header builds the record header of an operation starting at start.
func (s *Session) header(start time.Time, plan, policy any) (record.Header, error) {
	host, _ := os.Hostname()
	h := record.Header{
		Type:     record.TypeHeader,
		Format:   record.FormatMajor,
		Tool:     s.cfg.Tool,
		Go:       runtime.Version(),
		Start:    start.UTC(),
		Agent:    s.cfg.Probe.Agent,
		Host:     host,
		Targets:  s.Targets(),
		Seed:     s.cfg.Seed,
		Captured: slices.Clone(headers.Captured),
		Proxy:    strings.Join(s.cfg.Proxies(), ", "),
	}
	var err error
	if plan != nil {
		if h.Plan, err = json.Marshal(plan); err != nil {
			return h, fmt.Errorf("session: encode plan: %w", err)
		}
	}
	if policy != nil {
		if h.Policy, err = json.Marshal(policy); err != nil {
			return h, fmt.Errorf("session: encode policy: %w", err)
		}
	}
	return h, nil
}

// measureClock records in h this agent's clock offset and its uncertainty,
// measured against TimeRef; without one it does nothing. It never
// measures against the target beforehand: the dozen requests a
// measurement takes would spend the very quota the session is about to
// probe. Without TimeRef, the offset is estimated after the operation from
// the Date headers of its own answers, at no cost, and written in the end
// line (see recorder.clock). A failed measurement is a warning.
func (s *Session) measureClock(ctx context.Context, h *record.Header) {
	ref := s.cfg.TimeRef
	if ref == "" {
		return
	}
	if !s.cfg.StartAt.IsZero() { // done before the agents fire
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.cfg.StartAt.Add(-startLead))
		defer cancel()
	}
	// The time reference is reached as the targets are: through the proxy
	// the session's Proxy chooses for it, loopback included.
	proxy := func(req *http.Request) (*url.URL, error) {
		via, err := s.cfg.Probe.Proxy.For(req.URL.String())
		if err != nil || via == "" {
			return nil, err
		}
		return url.Parse(via)
	}
	c := &http.Client{Timeout: s.cfg.Probe.Timeout, Transport: &http.Transport{TLSClientConfig: s.cfg.Probe.TLSConfig, Proxy: proxy},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	off, unc, err := probe.MeasureClock(ctx, c, ref, clockSamples)
	if err != nil {
		s.warn("clock offset not measured against %s: %s", s.redact(ref), s.redactText(err.Error()))
		return
	}
	h.ClockOffsetNS, h.ClockUncertaintyNS = int64(off), int64(unc)
}

// reserve returns the first of n consecutive Seqs of the record.
func (r *recorder) reserve(n int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.next
	r.next += int64(n)
	return first
}

// write writes res to the file, intersecting its clock bounds with the others'.
func (r *recorder) write(res record.Result) error {
	if s, ok := probe.ResultClockSample(res, r.hdr.Start); ok {
		r.mu.Lock()
		r.clockIv.Add(s)
		r.mu.Unlock()
	}
	if r.w == nil {
		return nil
	}
	return r.w.WriteResult(res)
}

// keep adds results an engine returned to the record.
func (r *recorder) keep(res ...record.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res...)
}

// stream keeps a result of a streamed run when the record is held in
// memory only; with a file, where it was written, it only counts it.
func (r *recorder) stream(res record.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		r.results = append(r.results, res)
		return
	}
	r.streamed++
	if res.Outcome != record.OutcomeNotSent {
		r.streamedSent++
	}
}

// stats returns the record writer's back-pressure so far: zero in memory
// (or before the record is open).
func (r *recorder) stats() record.WriterStats {
	if r == nil || r.w == nil {
		return record.WriterStats{}
	}
	return r.w.Stats()
}

// counts returns how many results the record holds and how many of them
// were sent: the numbers of the end line.
func (r *recorder) counts() (scheduled, sent int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range r.results {
		if res.Outcome != record.OutcomeNotSent {
			sent++
		}
	}
	return int64(len(r.results)) + r.streamed, sent + r.streamedSent
}

// clock returns the end line with its clock estimate: the header's
// TimeRef measurement when it has one (source time-ref), else the
// estimate from the Date headers (and arrival echoes) of the results
// written (source date), else none. Samples that disagree give none and a
// warning: replicas with different clocks, or a cache, answered.
func (r *recorder) clock(e record.End, warn func(string, ...any)) record.End {
	if r.hdr.ClockOffsetNS != 0 || r.hdr.ClockUncertaintyNS != 0 {
		e.ClockOffsetNS, e.ClockUncertaintyNS, e.ClockSource = r.hdr.ClockOffsetNS, r.hdr.ClockUncertaintyNS, record.ClockSourceTimeRef
		return e
	}
	r.mu.Lock()
	off, unc, err := r.clockIv.Estimate()
	r.mu.Unlock()
	switch {
	case err == nil:
		e.ClockOffsetNS, e.ClockUncertaintyNS, e.ClockSource = int64(off), int64(unc), record.ClockSourceDate
	case errors.Is(err, probe.ErrClockDisagree):
		warn("clock offset not estimated from the Date headers: %v", err)
	}
	return e
}

// serverClock returns the clock estimate of the results written so far
// (agent − target, and its half-width) as clock would record it, and
// false when there is none: infer.Options.ServerClock.
func (r *recorder) serverClock() (offset, uncertainty time.Duration, ok bool) {
	if r == nil {
		return 0, 0, false
	}
	e := r.clock(record.End{}, func(string, ...any) {})
	return time.Duration(e.ClockOffsetNS), time.Duration(e.ClockUncertaintyNS), e.ClockSource != ""
}

// close writes the end line, with the clock estimate and the counts of
// the results kept, and closes the file. extra are documents (an
// inference) written before the end line.
func (s *Session) close(reason string, extra ...any) error {
	r := s.rec
	scheduled, sent := r.counts()
	end := r.clock(record.End{Reason: reason, Scheduled: scheduled, Sent: sent}, s.warn)
	end.Type = record.TypeEnd
	r.mu.Lock()
	r.end = &end
	r.mu.Unlock()
	if r.w == nil {
		return nil
	}
	var err error
	for _, doc := range extra {
		if err == nil {
			err = r.w.WriteInference(doc)
		}
	}
	if cerr := r.w.Close(end); err == nil {
		err = cerr
	}
	if cerr := r.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	return nil
}

// appendDoc appends a verdict document after the end line of the record
// file, where a later analyze or report reads it. A failure is a warning:
// the verdict itself stands.
func (s *Session) appendDoc(doc any) {
	if s.rec.path == "" {
		return
	}
	if err := AppendFinding(s.rec.path, doc); err != nil {
		s.warn("%v", err)
	}
}

// AppendFinding appends a check or analyze document to the record file at
// path, after its end line.
func AppendFinding(path string, doc any) error {
	a, err := record.Append(path)
	if err != nil {
		return fmt.Errorf("cannot append the findings to %s: %w", path, err)
	}
	werr := a.WriteFinding(doc)
	if cerr := a.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("cannot append the findings to %s: %w", path, werr)
	}
	return nil
}

// run returns the record as the file holds it: results in Seq order.
func (r *recorder) run() *record.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := slices.Clone(r.results)
	slices.SortStableFunc(res, func(a, b record.Result) int { return cmp.Compare(a.Seq, b.Seq) })
	return &record.Run{Header: r.hdr, Results: res, End: r.end}
}
