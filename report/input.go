package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// Class is how a request counts, for display. The zero value is Accepted.
type Class uint8

// Classes, in the order legends and stacked marks use.
const (
	Accepted Class = iota // a 2xx answer, not delayed
	Delayed               // a 2xx answer whose latency is well above the rest (see DelayedThreshold)
	Rejected              // the declared reject status, 429 or 503
	Other                 // any other status
	Error                 // no HTTP answer
	NotSent               // scheduled, never sent
	numClasses
)

var classNames = [numClasses]string{"accepted", "delayed", "rejected", "other", "error", "not-sent"}

// String returns the class's name: accepted, delayed, rejected, other,
// error or not-sent.
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// outcome codes of request.outcome.
const (
	outResponse uint8 = iota
	outError
	outNotSent
)

// claim kinds of request.claimKind.
const (
	claimNone       uint8 = iota
	claimRetryAfter       // Retry-After
	claimReset            // a rate-limit header's reset
)

// request is one result, compacted for large runs. Times are nanoseconds
// since the Input's start once the Input is finished (relative to the
// agent's own start while reading).
type request struct {
	t     int64 // send time: Sent, else Sched
	recv  int64 // receipt: TTFB, else Done; 0 without an answer
	lat   int64 // hold: TTFB − Wrote, else Done − Sent; -1 without an answer
	total int64 // latency as the run document counts it (record.Result.Latency); -1 without
	pace  int64 // pacing error (record.Result.SendTimes), 0 when never sent
	claim int64 // the wait a non-2xx answer advertised, ns; valid when claimKind != claimNone
	// sched, wrote and arrival are the result's own (relative to its
	// agent's start): what race releases are counted by. arrival is
	// noArrival without an echo.
	sched, wrote, arrival int64
	lane                  uint32
	route                 uint32
	// reason indexes Input.reasons: the error class or not-sent reason.
	reason uint16
	// age indexes Input.ages: the answer's Age header, 0 without one.
	age uint16
	// phase indexes Input.phases: the result's phase, 0 without one.
	phase     uint16
	agent     uint16
	status    int16
	outcome   uint8
	claimKind uint8
	class     Class // set by prepare
}

// route is a distinct method and URL path.
type route struct{ method, path string }

// Agent describes one run of an Input.
type Agent struct {
	// Name is the agent's name in refs, unique within the Input, chosen
	// as record.Merge chooses it.
	Name string
	// File is the name of the record file the run came from ("" for runs
	// given in memory).
	File   string
	Header record.Header
	End    *record.End // nil when the run was cut short
	// clockSource is where the run's clock offset came from (record.Run.Clock).
	clockSource string
	// ShiftNS is what was added to the run's relative times to put them
	// on the Input's timeline (see record.Merge).
	ShiftNS int64
	// Results is how many results the run holds.
	Results int

	policy verify.Policy // the header's policy, decoded once
}

// Source is a named record file to read.
type Source struct {
	Name string    // shown in messages and in the report ("-" for stdin)
	R    io.Reader // the file's content
}

// Input is what a report shows: one or several runs on one timeline, with
// the check, analyze and infer documents found in their files or added,
// decoded into package verify's and package infer's own types.
//
// Build one with ReadFiles, Read or FromMerged; the zero Input is an empty
// report (no runs, no documents). An Input is not safe for concurrent use:
// the first rendering derives classes and summaries from the documents and
// caches them. Add documents with AddDocument, which drops that cache;
// after changing Checks or Inferences directly, derived data may be stale.
type Input struct {
	// Tool is the renderer's identity, "rlprobe vX.Y.Z", written as the
	// report document's tool; "" means "rlprobe (devel)".
	Tool string
	// Files names the record files in the order given.
	Files []string
	// Start is the instant relative time 0 stands for, on the reference
	// clock: the earliest run's start minus its clock offset.
	Start time.Time
	// Agents describes the runs in the order read.
	Agents []Agent
	// Verdicts are the check and analyze documents, latest first (see
	// Verdict.Time). Finding lines that hold a single finding rather than
	// a whole document are gathered, per file, into one analyze document
	// with Synthetic set.
	Verdicts []Verdict
	// Inferences are the infer documents, latest first: the reverse of
	// file order then the order added.
	Inferences []*infer.Inference
	// Warnings are what the record readers tolerated and the lines this
	// package could not use, one sentence each.
	Warnings []string

	reqs     []request
	lanes    []string          // client identities by lane index; "" is shown as "(none)"
	laneIdx  map[string]uint32 // client identity → lane
	routes   []route
	routeIdx map[string]uint32 // method + " " + URL → route
	reasons  []string          // error classes and not-sent reasons; index 0 is ""
	ages     []string          // Age header values; index 0 is "" (none)
	phases   []string          // phases of the results; index 0 is ""
	infRaw   []json.RawMessage // the infer documents as stored, by index of Inferences

	nextOrder int // reading order of the next verdict
	prep      *prepared
}

// ReadFiles reads the record files at paths (see Read).
func ReadFiles(paths ...string) (*Input, error) {
	srcs := make([]Source, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			for _, s := range srcs {
				s.R.(*os.File).Close()
			}
			return nil, fmt.Errorf("report: %w", err)
		}
		srcs = append(srcs, Source{Name: p, R: f})
	}
	defer func() {
		for _, s := range srcs {
			s.R.(*os.File).Close()
		}
	}()
	return Read(srcs...)
}

// Read reads record files, streaming their results into compact form, and
// puts the runs on one timeline as record.Merge does (each run's times
// rebased by its start and clock offset). It tolerates what record's
// reader tolerates (noted in Warnings) and fails, naming the source, on a
// file record's reader refuses: a missing or garbled header, an unknown
// major format (wrapping *record.FormatError), a corrupt line other than
// the last (wrapping *record.LineError).
func Read(srcs ...Source) (*Input, error) {
	in := newInput()
	var starts []time.Time
	for _, src := range srcs {
		start, err := in.readOne(src)
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", src.Name, err)
		}
		starts = append(starts, start)
	}
	if len(in.Agents) == 1 && in.Agents[0].clockSource != record.ClockSourceTimeRef {
		// As record.Merge: a lone run moves only by a --time-ref measurement.
		starts[0] = in.Agents[0].Header.Start
	}
	in.rebase(starts)
	return in, nil
}

func newInput() *Input {
	return &Input{
		laneIdx:  map[string]uint32{},
		routeIdx: map[string]uint32{},
		reasons:  []string{""},
		ages:     []string{""},
		phases:   []string{""},
	}
}

// readOne streams one file into in and returns its start on the
// reference clock.
func (in *Input) readOne(src Source) (time.Time, error) {
	rd := record.NewReader(src.R)
	agent := len(in.Agents)
	if agent > 0xffff {
		return time.Time{}, errors.New("too many record files (at most 65536)")
	}
	in.Files = append(in.Files, src.Name)
	var loose []verify.Finding
	for {
		l, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return time.Time{}, err
		}
		switch v := l.Value.(type) {
		case record.Header:
			in.Agents = append(in.Agents, Agent{File: src.Name, Header: v,
				policy: in.policyOf(v.Policy, src.Name+": the run's policy")})
		case record.Result:
			in.addResult(&v, agent, in.Agents[agent].Header.Start)
			in.Agents[agent].Results++
		case record.End:
			e := v
			in.Agents[agent].End = &e
		case json.RawMessage:
			f, err := in.addRaw(v, agent, l.Type, src.Name)
			if err != nil {
				in.Warnings = append(in.Warnings, fmt.Sprintf("%s: line %d: %v; skipped", src.Name, l.Number, err))
			}
			if f != nil {
				loose = append(loose, *f)
			}
		}
	}
	for _, w := range rd.Warnings() {
		in.Warnings = append(in.Warnings, src.Name+": "+w)
	}
	a := &in.Agents[agent]
	if loose != nil {
		in.addVerdict(in.synthesize(a, loose, agent))
	}
	off, _, source := (&record.Run{Header: a.Header, End: a.End}).Clock()
	a.clockSource = source
	return a.Header.Start.Add(-time.Duration(off)), nil
}

// rebase names the agents and moves every run onto the earliest start.
func (in *Input) rebase(starts []time.Time) {
	for i, s := range starts {
		if i == 0 || s.Before(in.Start) {
			in.Start = s
		}
	}
	names := agentNames(in.Agents)
	for i := range in.Agents {
		in.Agents[i].Name = names[i]
		in.Agents[i].ShiftNS = int64(starts[i].Sub(in.Start))
	}
	for i := range in.reqs {
		r := &in.reqs[i]
		shift := in.Agents[r.agent].ShiftNS
		r.t += shift
		if r.recv != 0 {
			r.recv += shift
		}
	}
	for i := range in.Verdicts {
		if a := in.Verdicts[i].agent; a >= 0 {
			in.Verdicts[i].shiftNS = in.Agents[a].ShiftNS
		}
	}
	in.sortRequests()
}

func (in *Input) sortRequests() {
	slices.SortStableFunc(in.reqs, func(a, b request) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.agent, b.agent))
	})
}

// FromMerged builds an Input from runs already merged in memory (by
// record.Merge), with their finding and inference lines; files names the
// record files in the report (may be nil). The Merged is not modified or
// retained.
func FromMerged(m *record.Merged, files []string) *Input {
	in := newInput()
	in.Files = append([]string(nil), files...)
	in.Start = m.Start
	byName := map[string]int{}
	for i, a := range m.Agents {
		in.Agents = append(in.Agents, Agent{Name: a.Name, Header: a.Header, End: a.End, ShiftNS: a.ShiftNS, Results: a.Results,
			policy: in.policyOf(a.Header.Policy, "run "+a.Name+": the run's policy")})
		if i < len(files) {
			in.Agents[i].File = files[i]
		}
		byName[a.Name] = i
	}
	for i := range m.Results {
		r := &m.Results[i]
		in.addResult(r, byName[r.Agent], m.Start)
	}
	var loose []verify.Finding
	for _, raw := range m.Findings {
		if f, err := in.addRaw(raw, -1, record.TypeFinding, ""); err != nil {
			in.Warnings = append(in.Warnings, fmt.Sprintf("a finding line: %v; skipped", err))
		} else if f != nil {
			loose = append(loose, *f)
		}
	}
	for _, raw := range m.Inferences {
		if _, err := in.addRaw(raw, -1, record.TypeInference, ""); err != nil {
			in.Warnings = append(in.Warnings, fmt.Sprintf("an inference line: %v; skipped", err))
		}
	}
	if loose != nil && len(in.Agents) > 0 {
		v := in.synthesize(&in.Agents[0], loose, -1)
		v.Report.RecordFile = strings.Join(in.Files, ", ")
		in.addVerdict(v)
	}
	in.Warnings = append(in.Warnings, m.Warnings...)
	in.sortRequests()
	return in
}

// AddDocument adds a check, analyze or infer document (or a single
// finding) that is not in the record files: any value that marshals to one
// of the contract's JSON documents — a verify.Report, *infer.Inference or
// verify.Finding, json.RawMessage or []byte. Its times are taken to be on
// the Input's timeline. Single findings added one after another are
// gathered into one verdict.
func (in *Input) AddDocument(doc any) error {
	var raw []byte
	switch v := doc.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("report: add document: %w", err)
		}
		raw = b
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return fmt.Errorf("report: add document: %w", err)
	}
	f, err := in.addRaw(c.Bytes(), -1, "", "")
	if err != nil {
		return fmt.Errorf("report: add document: %w", err)
	}
	if f != nil {
		in.addFinding(*f)
	}
	in.prep = nil
	return nil
}

// addFinding adds a single finding to the latest verdict added as single
// findings, or to a new one.
func (in *Input) addFinding(f verify.Finding) {
	for i := range in.Verdicts {
		if v := &in.Verdicts[i]; v.Synthetic && v.agent < 0 && v.order == in.nextOrder-1 {
			v.Report.Findings = append(v.Report.Findings, f)
			judge(&v.Report)
			return
		}
	}
	v := Verdict{Report: verify.Report{Schema: verify.SchemaAnalyze, Tool: in.tool(), Complete: true,
		Findings: []verify.Finding{f}, Targets: []string{}}, Synthetic: true, agent: -1}
	judge(&v.Report)
	in.addVerdict(v)
}

// addResult compacts r (of the agent with index agent, whose relative
// times count from origin) into in.reqs.
func (in *Input) addResult(r *record.Result, agent int, origin time.Time) {
	q := request{agent: uint16(agent), lat: -1, total: -1}
	q.t = r.Sent
	if q.t == 0 {
		q.t = r.Sched
	}
	switch r.Outcome {
	case record.OutcomeResponse:
		q.outcome = outResponse
	case record.OutcomeError:
		q.outcome = outError
	default:
		q.outcome = outNotSent
	}
	if q.outcome != outNotSent && r.Sent != 0 {
		q.pace, _ = r.SendTimes()
	}
	q.sched, q.wrote, q.arrival = r.Sched, r.Wrote, noArrival
	if r.Arrival != nil {
		q.arrival = *r.Arrival
	}
	if lat, ok := r.Latency(); ok {
		q.total = max(lat, 0)
	}
	q.recv = r.TTFB
	if q.recv == 0 {
		q.recv = r.Done
	}
	if q.outcome == outResponse {
		switch {
		case r.TTFB != 0 && r.Wrote != 0:
			q.lat = r.TTFB - r.Wrote
		case r.Done != 0 && r.Sent != 0:
			q.lat = r.Done - r.Sent
		}
		q.lat = max(q.lat, 0)
		q.status = int16(max(min(r.Status, 32767), 0))
		if c, _ := record.Classify(*r, 0); c != record.ClassAccepted && len(r.Headers) > 0 {
			q.claim, q.claimKind = claimOf(r.Headers, origin.Add(time.Duration(q.recv)))
		}
	}
	if r.Err != "" {
		q.reason = intern(&in.reasons, r.Err)
	}
	if r.Phase != "" {
		q.phase = intern(&in.phases, r.Phase)
	}
	if age := headerValue(r.Headers, "Age"); age != "" {
		q.age = intern(&in.ages, age)
	}
	q.lane = in.lane(r.Client)
	q.route = in.route(r.Method, r.URL)
	in.reqs = append(in.reqs, q)
}

// claimOf returns the wait a response's headers advertise: Retry-After,
// else the first rate-limit reset; an HTTP-date or an epoch reset read
// against the response's Date when it has one (headers.ServerNow).
func claimOf(h map[string][]string, received time.Time) (int64, uint8) {
	received, _ = headers.ServerNow(h, received)
	if v := h["Retry-After"]; len(v) > 0 {
		if d, err := headers.ParseRetryAfter(v[0], received); err == nil {
			return int64(d), claimRetryAfter
		}
	}
	p := headers.Parse(h, received)
	for _, l := range p.Limits {
		if l.HasReset {
			return int64(l.Reset), claimReset
		}
	}
	return 0, claimNone
}

func (in *Input) lane(client string) uint32 {
	if i, ok := in.laneIdx[client]; ok {
		return i
	}
	i := uint32(len(in.lanes))
	in.lanes = append(in.lanes, client)
	in.laneIdx[client] = i
	return i
}

// maxRoutes bounds the distinct routes kept; later ones share the last.
const maxRoutes = 4096

func (in *Input) route(method, rawURL string) uint32 {
	key := method + " " + rawURL
	if i, ok := in.routeIdx[key]; ok {
		return i
	}
	p := "/"
	if u, err := url.Parse(rawURL); err == nil && u.Path != "" {
		p = u.Path
	} else if err != nil {
		p = ""
	}
	rt := route{method: method, path: p}
	var i uint32
	if j := slices.Index(in.routes, rt); j >= 0 {
		i = uint32(j)
	} else if len(in.routes) >= maxRoutes {
		i = uint32(len(in.routes) - 1)
	} else {
		i = uint32(len(in.routes))
		in.routes = append(in.routes, rt)
	}
	if len(in.routeIdx) < 4*maxRoutes {
		in.routeIdx[key] = i
	}
	return i
}

// intern returns s's index in *table, adding it; beyond 1000 distinct
// values, further ones share "other".
func intern(table *[]string, s string) uint16 {
	if i := slices.Index(*table, s); i >= 0 {
		return uint16(i)
	}
	if len(*table) >= 1000 {
		s = "other"
		if i := slices.Index(*table, s); i >= 0 {
			return uint16(i)
		}
	}
	*table = append(*table, s)
	return uint16(len(*table) - 1)
}

// headerValue returns the first value of the header name, whatever the
// spelling of its key (records keep the server's spelling).
func headerValue(h map[string][]string, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return v[0]
		}
	}
	return ""
}

// noArrival marks a request without an arrival echo.
const noArrival = math.MinInt64

// tool returns the report's tool string.
func (in *Input) tool() string {
	if in.Tool == "" {
		return "rlprobe (devel)"
	}
	return in.Tool
}

// agentNames names each run's agent uniquely, as record.Merge does: the
// header's agent when non-empty and unique, else "aN" (N the 1-based
// position), with "-2", "-3", … on collision.
func agentNames(agents []Agent) []string {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Header.Agent
	}
	return record.AgentNames(names)
}

// Requests returns how many results the Input holds.
func (in *Input) Requests() int { return len(in.reqs) }

// Complete reports whether every run ended with reason completed (false
// without runs).
func (in *Input) Complete() bool {
	if len(in.Agents) == 0 {
		return false
	}
	for _, a := range in.Agents {
		if a.End == nil || a.End.Reason != record.ReasonCompleted {
			return false
		}
	}
	return true
}

// Targets returns the runs' targets, first seen first, without repeats.
func (in *Input) Targets() []string {
	out := []string{}
	for _, a := range in.Agents {
		for _, t := range a.Header.Targets {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}
