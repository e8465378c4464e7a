package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
)

// SelftestClientHeader is the header that carries the client identity in
// the selftest (and the key of its per-header cases).
const SelftestClientHeader = "X-Rlprobe-Client"

// selftestMaxWindow bounds the windows infer looks for in the selftest: the
// grid's longest is 2 s, so a case that goes wrong gives up early.
const selftestMaxWindow = 10 * time.Second

// SelftestWant is what infer must conclude about a case. A zero field is
// not checked.
type SelftestWant struct {
	Family infer.Family
	// Alignment is checked for fixed windows: epoch or first-request.
	Alignment string
	// CountsRejected is checked for sliding logs and sliding-window
	// counters.
	CountsRejected *bool
	// Key is global, ip or header:NAME.
	Key string
	// Params are the contract's parameter names (limit, window_s,
	// rate_per_s, capacity, undelayed, queue) with their true values:
	// integers must be exact, real values within 10 %.
	Params map[string]float64
	// NeverRejects, OverAdmission and RetryAfterGrade are checked when
	// set (see selftest_wild.go).
	NeverRejects    bool
	OverAdmission   bool
	RetryAfterGrade string
	// OutsideModels marks a case that runs outside every model (other
	// clients' traffic spending the same quota): a misfit whose closest
	// family is Family is right too, since no model explains the outcomes
	// whole.
	OutsideModels bool
	// LeaveOut, when set, infers with these behaviours left out of the
	// candidates (the leave-one-out rows): the row is right when the fit
	// is approximate or misfit, never exact, whatever the family.
	LeaveOut []infer.Behaviour
}

// SelftestCase is one row of the selftest's truth table: a reference
// server policy and what infer must conclude from outside.
type SelftestCase struct {
	Name string
	// Policy is the reference server's policy; nil serves without any
	// limiter.
	Policy *testserver.Policy
	Want   SelftestWant
	// Quick marks the cases `selftest --quick` runs over real sockets.
	Quick bool
	// Wild holds what the cases of the wild (issue 13) add: a non-atomic
	// backend, long windows started at a chosen phase, other clients'
	// traffic (see selftest_wild.go).
	Wild
}

// Describe says what the case serves, for people.
func (c SelftestCase) Describe() string {
	if c.Policy == nil {
		return "no limiter"
	}
	p := c.Policy
	lc := p.Limiter
	var b strings.Builder
	b.WriteString(string(lc.Algorithm))
	switch lc.Algorithm {
	case limiter.FixedWindow, limiter.SlidingLog, limiter.SlidingWindowCounter:
		fmt.Fprintf(&b, " %d/%v", lc.Limit, lc.Window)
		if lc.Align != "" {
			b.WriteString(" " + string(lc.Align))
		}
	default:
		fmt.Fprintf(&b, " %g/s cap %d", lc.Rate, lc.Capacity)
	}
	if lc.NoDelay {
		b.WriteString(" nodelay")
	}
	if lc.Delay > 0 {
		fmt.Fprintf(&b, " delay %d", lc.Delay)
	}
	if lc.CountRejected {
		b.WriteString(" count-rejected")
	}
	key := p.Key
	if key == "" {
		key = testserver.KeyGlobal
	}
	ds := make([]string, len(p.Dialects))
	for i, d := range p.Dialects {
		ds[i] = string(d)
	}
	fmt.Fprintf(&b, ", key %s, %d, headers %s", key, p.Status, strings.Join(ds, ","))
	return b.String()
}

func boolPtr(v bool) *bool { return &v }

// SelftestCases returns the selftest's truth table: every serve algorithm
// (fixed window aligned to the epoch and to the first request; sliding log
// and sliding-window counter with and without counting rejections; token
// bucket with capacity 1 and more; GCRA; leaky bucket nodelay, queueing,
// and queueing with delay=) and a server without a limiter, with header
// dialects none and draft-8, statuses 429 and 503 and keys global, ip and
// per header spread over them. Windows are 1–2 s, so that the full grid
// also runs in real time in about a minute.
func SelftestCases() []SelftestCase {
	hdr := testserver.KeyHeaderPrefix + SelftestClientHeader
	pol := func(lc limiter.Config, key string, status int, d headers.Dialect) *testserver.Policy {
		return &testserver.Policy{Name: "selftest", Limiter: lc, Key: key, Status: status, Dialects: []headers.Dialect{d}}
	}
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	fw := func(n int64, w float64, align limiter.Align) limiter.Config {
		return limiter.Config{Algorithm: limiter.FixedWindow, Limit: n, Window: sec(w), Align: align}
	}
	sl := func(n int64, w float64, cr bool) limiter.Config {
		return limiter.Config{Algorithm: limiter.SlidingLog, Limit: n, Window: sec(w), CountRejected: cr}
	}
	swc := func(n int64, w float64, cr bool) limiter.Config {
		return limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: n, Window: sec(w), CountRejected: cr}
	}
	bucket := func(a limiter.Algorithm, rate float64, c int64) limiter.Config {
		return limiter.Config{Algorithm: a, Rate: rate, Capacity: c}
	}
	windows := func(n int64, w float64) map[string]float64 {
		return map[string]float64{"limit": float64(n), "window_s": w}
	}
	buckets := func(rate float64, c int64) map[string]float64 {
		return map[string]float64{"rate_per_s": rate, "capacity": float64(c)}
	}
	lbDelay := bucket(limiter.LeakyBucket, 5, 7)
	lbDelay.Delay = 2
	lbNoDelay := bucket(limiter.LeakyBucket, 2, 4)
	lbNoDelay.NoDelay = true
	return append([]SelftestCase{
		{Name: "fixed-window-epoch", Policy: pol(fw(5, 2, limiter.AlignEpoch), testserver.KeyGlobal, 429, headers.Draft8),
			Want: SelftestWant{Family: infer.FixedWindow, Alignment: infer.AlignEpoch, Key: infer.KeyGlobal, Params: windows(5, 2)}},
		{Name: "fixed-window-first", Policy: pol(fw(4, 1, limiter.AlignFirstRequest), hdr, 503, headers.None), Quick: true,
			Want: SelftestWant{Family: infer.FixedWindow, Alignment: infer.AlignFirstRequest, Key: hdr, Params: windows(4, 1)}},
		{Name: "sliding-log", Policy: pol(sl(5, 2, false), testserver.KeyIP, 429, headers.Draft8),
			Want: SelftestWant{Family: infer.SlidingLog, CountsRejected: boolPtr(false), Key: testserver.KeyIP, Params: windows(5, 2)}},
		{Name: "sliding-log-count-rejected", Policy: pol(sl(4, 1, true), testserver.KeyGlobal, 503, headers.None), Quick: true,
			Want: SelftestWant{Family: infer.SlidingLog, CountsRejected: boolPtr(true), Key: infer.KeyGlobal, Params: windows(4, 1)}},
		{Name: "sliding-window-counter", Policy: pol(swc(5, 2, false), testserver.KeyGlobal, 503, headers.Draft8),
			Want: SelftestWant{Family: infer.SlidingWindowCounter, CountsRejected: boolPtr(false), Key: infer.KeyGlobal, Params: windows(5, 2)}},
		{Name: "sliding-window-counter-count-rejected", Policy: pol(swc(4, 1, true), hdr, 429, headers.None),
			Want: SelftestWant{Family: infer.SlidingWindowCounter, CountsRejected: boolPtr(true), Key: hdr, Params: windows(4, 1)}},
		{Name: "token-bucket-capacity-1", Policy: pol(bucket(limiter.TokenBucket, 2, 1), testserver.KeyGlobal, 429, headers.Draft8),
			Want: SelftestWant{Family: infer.TokenBucket, Key: infer.KeyGlobal, Params: buckets(2, 1)}},
		{Name: "token-bucket", Policy: pol(bucket(limiter.TokenBucket, 4, 5), hdr, 503, headers.None), Quick: true,
			Want: SelftestWant{Family: infer.TokenBucket, Key: hdr, Params: buckets(4, 5)}},
		{Name: "gcra", Policy: pol(bucket(limiter.GCRA, 3, 4), testserver.KeyGlobal, 429, headers.None),
			Want: SelftestWant{Family: infer.TokenBucket, Key: infer.KeyGlobal, Params: buckets(3, 4)}},
		{Name: "leaky-bucket-nodelay", Policy: pol(lbNoDelay, testserver.KeyGlobal, 503, headers.Draft8),
			Want: SelftestWant{Family: infer.TokenBucket, Key: infer.KeyGlobal, Params: buckets(2, 4)}},
		{Name: "leaky-bucket", Policy: pol(bucket(limiter.LeakyBucket, 5, 6), testserver.KeyGlobal, 429, headers.Draft8),
			Want: SelftestWant{Family: infer.LeakyBucketQueue, Key: infer.KeyGlobal,
				Params: map[string]float64{"rate_per_s": 5, "capacity": 6, "undelayed": 1, "queue": 5}}},
		{Name: "leaky-bucket-delay", Policy: pol(lbDelay, hdr, 503, headers.None), Quick: true,
			Want: SelftestWant{Family: infer.LeakyBucketQueue, Key: hdr,
				Params: map[string]float64{"rate_per_s": 5, "capacity": 7, "undelayed": 3, "queue": 4}}},
		{Name: "none", Quick: true, Want: SelftestWant{Family: infer.None}},
	}, append(wildCases(), leaveOneOutCases()...)...)
}

// SelftestOptions configure Selftest. The zero value runs the full grid
// over in-memory connections, in real time, three cases at a time.
type SelftestOptions struct {
	// Quick runs only the cases marked Quick.
	Quick bool
	// Sockets serves each case on a loopback socket instead of an
	// in-memory listener.
	Sockets bool
	// Parallel is how many cases run at once; 0 means
	// DefaultSelftestParallel, or DefaultSelftestSocketsParallel with
	// Sockets.
	Parallel int
	// Cases, when set, replaces SelftestCases (Quick still filters).
	Cases []SelftestCase
	// ProbeOptions, when set, adjusts each case's probe engine options
	// (tests pace the engine on runtime timers under synctest).
	ProbeOptions func(*probe.Options)
	// OnCase, when set, is called as each case ends (from the goroutine
	// that ran it, one call at a time).
	OnCase func(SelftestRow)
	// Tool is the tool name written in the inference documents.
	Tool string
	// Long includes the cases that take minutes of real time (60 s
	// windows): for a synctest bubble, where time is fake.
	Long bool
}

// DefaultSelftestParallel is how many cases Selftest runs at once over
// in-memory connections when SelftestOptions.Parallel is 0.
const DefaultSelftestParallel = 3

// DefaultSelftestSocketsParallel is how many cases Selftest runs at once
// over loopback sockets when SelftestOptions.Parallel is 0. A case spends
// almost all of its time waiting out windows (the --quick cases take
// about 7 % of one core in all), so two share the cores without making the
// timing infer reads wait behind the other's fitting.
const DefaultSelftestSocketsParallel = 2

// parallel is how many cases run at once: Parallel, or its default.
func (o SelftestOptions) parallel() int {
	switch {
	case o.Parallel > 0:
		return o.Parallel
	case o.Sockets:
		return DefaultSelftestSocketsParallel
	}
	return DefaultSelftestParallel
}

// Describe says in one line what Selftest does with these options, for a
// progress line: "reference server × every family → infer (in-memory
// connections, real time)", or "(loopback sockets, …)" with Sockets.
func (o SelftestOptions) Describe() string {
	where := "in-memory connections"
	if o.Sockets {
		where = "loopback sockets"
	}
	return "reference server × every family → infer (" + where + ", real time)"
}

// SelftestRow is one case's outcome.
type SelftestRow struct {
	Case SelftestCase
	// Got is infer's conclusion (nil when the case failed to run).
	Got *infer.Inference
	// Problems lists what Got gets wrong; empty when it is right.
	Problems []string
	// ParamErrors are the relative errors of the real-valued parameters
	// and the absolute errors of the integer ones, by name.
	ParamErrors map[string]float64
	// Err is why the case could not run.
	Err error
	// Duration is how long the case took.
	Duration time.Duration
}

// OK reports whether the case ran and infer got it right.
func (r SelftestRow) OK() bool { return r.Err == nil && r.Got != nil && len(r.Problems) == 0 }

// String is the row as a progress line: "NAME: right (DURATION)", or
// "NAME: MISS (DURATION)" when it is not OK; the duration is rounded for
// people (session.RoundDuration).
func (r SelftestRow) String() string {
	verdict := "right"
	if !r.OK() {
		verdict = "MISS"
	}
	if r.Got != nil && r.Got.Fit != "" {
		verdict += ", " + string(r.Got.Fit)
	}
	return fmt.Sprintf("%s: %s (%s)", r.Case.Name, verdict, session.RoundDuration(r.Duration))
}

// SelftestReport is the outcome of a selftest.
type SelftestReport struct {
	Rows []SelftestRow
	// Sockets says whether the cases ran over loopback sockets.
	Sockets bool
}

// Pass reports whether every case is right.
func (r *SelftestReport) Pass() bool {
	for _, row := range r.Rows {
		if !row.OK() {
			return false
		}
	}
	return len(r.Rows) > 0
}

// Matrix returns the confusion matrix: counts[i][j] is how many cases of
// served family infer.Families[i] were inferred as infer.Families[j] (a
// case that failed to run counts in no column).
func (r *SelftestReport) Matrix() [][]int {
	idx := func(f infer.Family) int { return slices.Index(infer.Families, f) }
	m := make([][]int, len(infer.Families))
	for i := range m {
		m[i] = make([]int, len(infer.Families))
	}
	for _, row := range r.Rows {
		if row.Got == nil {
			continue
		}
		i, j := idx(row.Case.Want.Family), idx(row.Got.Algorithm)
		if i >= 0 && j >= 0 {
			m[i][j]++
		}
	}
	return m
}

// Selftest serves each case with the reference server, lets infer identify
// it through the probe engine, and judges the conclusion against the case.
// It returns an error only when ctx ends; a case that cannot run is a row
// with Err set.
func Selftest(ctx context.Context, opt SelftestOptions) (*SelftestReport, error) {
	cases := opt.Cases
	if cases == nil {
		cases = SelftestCases()
	}
	if opt.Quick {
		cases = slices.DeleteFunc(slices.Clone(cases), func(c SelftestCase) bool { return !c.Quick })
	}
	if !opt.Long {
		cases = slices.DeleteFunc(slices.Clone(cases), func(c SelftestCase) bool { return c.Long })
	}
	par := opt.parallel()
	rep := &SelftestReport{Rows: make([]SelftestRow, len(cases)), Sockets: opt.Sockets}
	var mu sync.Mutex
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				rep.Rows[i] = SelftestRow{Case: c, Err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			row := RunSelftestCase(ctx, c, opt)
			rep.Rows[i] = row
			if opt.OnCase != nil {
				mu.Lock()
				opt.OnCase(row)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return rep, ctx.Err()
}

// RunSelftestCase runs one case: the server on its own listener, a probe
// engine with two client identities (by header, or by source address for a
// per-IP case), and infer.
func RunSelftestCase(ctx context.Context, c SelftestCase, opt SelftestOptions) (row SelftestRow) {
	row = SelftestRow{Case: c}
	start := time.Now()
	defer func() { row.Duration = time.Since(start) }()

	var l net.Listener
	var dial probe.DialFunc
	host := testserver.MemListenerAddr
	if opt.Sockets {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			row.Err = fmt.Errorf("scenario: selftest %s: listen: %w", c.Name, err)
			return row
		}
		l, host = tl, tl.Addr().String()
	} else {
		ml := testserver.NewMemListener()
		l, dial = ml, ml.Dial
	}
	stop, err := serveCase(c, l)
	if err == nil {
		stop = c.Wild.start(ctx, stop, host, dial, c.Policy)
	}
	if err != nil {
		l.Close()
		row.Err = fmt.Errorf("scenario: selftest %s: %w", c.Name, err)
		return row
	}
	defer stop()

	po := probe.Options{URLs: []string{"http://" + host + "/"}, Dial: dial, Agent: "selftest", AbortAfterErrors: -1}
	keyName := testserver.KeyHeaderPrefix + SelftestClientHeader
	if c.Want.Key == testserver.KeyIP {
		po.SourceIPs = []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")}
		keyName = testserver.KeyIP
	} else {
		po.ClientHeader = SelftestClientHeader
	}
	if opt.ProbeOptions != nil {
		opt.ProbeOptions(&po)
	}
	sess, err := session.New(session.Config{Probe: po, Tool: opt.Tool, Clients: 2})
	if err != nil {
		row.Err = fmt.Errorf("scenario: selftest %s: %w", c.Name, err)
		return row
	}
	inf, err := sess.Infer(ctx, session.InferOptions{NoPreflight: true, KeyName: keyName, MaxWindow: cmp.Or(c.MaxWindow, selftestMaxWindow), Without: c.Want.LeaveOut})
	if errors.Is(err, session.ErrIncomplete) || errors.Is(err, session.ErrNotConcluded) {
		err = nil // the row judges the inference as far as it got, and its fit
	}
	if err != nil {
		row.Err = fmt.Errorf("scenario: selftest %s: %w", c.Name, err)
	}
	row.Got = inf
	if inf != nil {
		row.Problems, row.ParamErrors = JudgeInference(c.Want, inf)
	}
	return row
}

// serveCase starts the case's server on l and returns its stop function.
func serveCase(c SelftestCase, l net.Listener) (stop func(), err error) {
	if c.Policy == nil {
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("ok\n"))
		}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(l) }()
		return func() { shutdown(hs.Shutdown) }, nil
	}
	srv, err := testserver.New(testserver.Config{
		Routes:  []testserver.Route{{Policy: *c.Policy}},
		Handler: testserver.HandlerOptions{EchoArrival: true},
		Memory:  c.Memory,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.StartListener(l); err != nil {
		return nil, err
	}
	return func() { shutdown(srv.Shutdown) }, nil
}

func shutdown(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = err // the case's outcome is already known; a slow stop changes nothing
	}
}

// integerParams are the parameters that must match exactly.
var integerParams = []string{"limit", "capacity", "undelayed", "queue"}

// JudgeInference compares an inference with what a case wants. It returns
// the problems (empty when right) and, per checked parameter, its error:
// relative for real values, absolute for integers.
func JudgeInference(w SelftestWant, inf *infer.Inference) (problems []string, errs map[string]float64) {
	errs = map[string]float64{}
	if len(w.LeaveOut) > 0 {
		if inf.Fit == infer.FitExact {
			problems = append(problems, fmt.Sprintf("%s, exact, without a model of %v", inf.Algorithm, w.LeaveOut))
		}
		return problems, errs
	}
	if inf.Fit == infer.FitMisfit {
		if !w.OutsideModels || inf.Closest != w.Family {
			problems = append(problems, fmt.Sprintf("no family fits; closest %s, want %s", inf.Closest, w.Family))
		}
		return problems, errs
	}
	if inf.Algorithm != w.Family {
		problems = append(problems, fmt.Sprintf("family %s, want %s", inf.Algorithm, w.Family))
		return problems, errs
	}
	if w.Alignment != "" {
		got := "null"
		if inf.Alignment != nil {
			got = *inf.Alignment
		}
		if got != w.Alignment {
			problems = append(problems, fmt.Sprintf("alignment %s, want %s", got, w.Alignment))
		}
	}
	if w.CountsRejected != nil {
		switch {
		case inf.CountsRejected == nil:
			problems = append(problems, fmt.Sprintf("counts_rejected unknown, want %v", *w.CountsRejected))
		case *inf.CountsRejected != *w.CountsRejected:
			problems = append(problems, fmt.Sprintf("counts_rejected %v, want %v", *inf.CountsRejected, *w.CountsRejected))
		}
	}
	for _, a := range inf.Advertised {
		// The reference server's headers are honest: a claim that
		// disagrees with the fit is a wrong fit or a wrong claims check.
		problems = append(problems, fmt.Sprintf("advertised %s %s, fitted %s: %s", a.Field, a.Advertised, a.Fitted, a.Message))
	}
	if w.Key != "" && inf.Key != w.Key {
		problems = append(problems, fmt.Sprintf("key %s, want %s", inf.Key, w.Key))
	}
	problems = append(problems, judgeWild(w, inf)...)
	names := make([]string, 0, len(w.Params))
	for n := range w.Params {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		want := w.Params[n]
		p := paramOf(inf, n)
		if p == nil {
			problems = append(problems, fmt.Sprintf("%s not estimated, want %g", n, want))
			continue
		}
		if slices.Contains(integerParams, n) || want == 0 {
			// Integers, and a real value of 0 (no relative error), must
			// be exact; the error is absolute.
			errs[n] = p.Value - want
			if p.Value != want {
				problems = append(problems, fmt.Sprintf("%s %g, want %g", n, p.Value, want))
			}
			continue
		}
		rel := (p.Value - want) / want
		errs[n] = rel
		if math.Abs(rel) > 0.10 {
			problems = append(problems, fmt.Sprintf("%s %.4g, want %g (%+.1f%%)", n, p.Value, want, rel*100))
		}
	}
	return problems, errs
}

// paramOf returns the named parameter of inf (nil when absent).
func paramOf(inf *infer.Inference, name string) *infer.Param {
	switch name {
	case "limit":
		return inf.Params.Limit
	case "window_s":
		return inf.Params.WindowS
	case "rate_per_s":
		return inf.Params.RatePerS
	case "capacity":
		return inf.Params.Capacity
	case "undelayed":
		return inf.Params.Undelayed
	case "queue":
		return inf.Params.Queue
	}
	return nil
}

// InferDemo runs infer against the demo's reference server (DemoPolicy:
// nginx rate=1r/s burst=3 nodelay) and returns its conclusion: a token
// bucket of rate 1/s and capacity 4. It listens like Demo (opt.Listener and
// opt.Dial, else a free loopback port), and keeps the record in memory.
// It takes about 15 seconds.
func InferDemo(ctx context.Context, opt DemoOptions) (*infer.Inference, error) {
	pol := DemoPolicy()
	l := opt.Listener
	host := testserver.MemListenerAddr
	if l == nil {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("scenario: demo inference: listen: %w", err)
		}
		l, host = tl, tl.Addr().String()
	}
	stop, err := serveCase(SelftestCase{Name: "demo", Policy: &pol}, l)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("scenario: demo inference: %w", err)
	}
	defer stop()
	sess, err := session.New(session.Config{Zero: opt.Zero,
		Probe: probe.Options{URLs: []string{"http://" + host + "/"}, Dial: opt.Dial, Agent: "demo", AbortAfterErrors: -1}})
	if err != nil {
		return nil, fmt.Errorf("scenario: demo inference: %w", err)
	}
	inf, err := sess.Infer(ctx, session.InferOptions{NoPreflight: true, MaxWindow: selftestMaxWindow})
	if errors.Is(err, session.ErrIncomplete) {
		err = nil
	}
	if err != nil {
		return inf, fmt.Errorf("scenario: demo inference: %w", err)
	}
	return inf, nil
}
