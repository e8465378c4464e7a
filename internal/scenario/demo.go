package scenario

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// Demo defaults: nginx's limit_req demo, rate=1r/s burst=3 nodelay, hit by
// a burst of 8.
const (
	DefaultDemoCount = 8
	// DefaultDemoSpread spreads the burst over 80 ms (10 ms apart): still a
	// burst to a 1 r/s limiter, but spaced as a client would send it. The
	// table shows the requests in the order the server decided them (its
	// decision numbers): on a loaded machine sends bunch up, and requests
	// that arrive within microseconds are not decided in arrival order.
	DefaultDemoSpread = 80 * time.Millisecond
	// DemoStatus is nginx's default limit_req_status.
	DemoStatus = http.StatusServiceUnavailable
)

// DemoPolicy is the demo server's policy: nginx `limit_req zone=… rate=1r/s
// burst=3 nodelay` — a leaky bucket of capacity 4 that drains one request
// per second and never delays — answering 503 without Retry-After or any
// rate-limit header, as nginx does.
func DemoPolicy() testserver.Policy {
	return testserver.Policy{
		Name:       "demo",
		Limiter:    limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 1, Capacity: 4, NoDelay: true},
		Key:        testserver.KeyGlobal,
		Status:     DemoStatus,
		Dialects:   []headers.Dialect{headers.None},
		RetryAfter: testserver.RetryMissing,
	}
}

// DemoOptions configure Demo. The zero value runs the default demo on a
// free loopback port.
type DemoOptions struct {
	// Count is the number of requests in the burst; 0 means
	// DefaultDemoCount.
	Count int
	// Spread is how long the burst lasts (requests evenly spaced); 0 means
	// DefaultDemoSpread, negative means all at once.
	Spread time.Duration
	// Listener, when set, serves the demo server (an in-memory
	// testserver.MemListener in tests, with Dial); nil listens on a free
	// loopback port.
	Listener net.Listener
	// Dial connects the probe engine; nil dials TCP.
	Dial probe.DialFunc
	// Zero is the record's start, from which result times count; zero
	// means when the burst begins.
	Zero time.Time
}

// DemoRequest is one request of the demo as the server saw it.
type DemoRequest struct {
	// Result is the recorded request.
	Result record.Result
	// Arrival is when the server received it, relative to the first
	// arrival: the server's echo when present, else the client's TTFB.
	Arrival time.Duration
	// Outcome is accepted, rejected or other (or error, not-sent).
	Outcome string
}

// DemoResult is what the demo saw. Later parts (verdicts, inference, the
// HTML report) add their fields here.
type DemoResult struct {
	// URL is the demo server's URL (it is gone by the time Demo returns).
	URL string
	// Policy is the server's policy.
	Policy testserver.Policy
	// Requests are the burst's requests in the order the server decided
	// them (its echoed decision numbers) when it numbers its decisions,
	// else in server arrival order; a request without an answer keeps its
	// place by arrival.
	Requests []DemoRequest
	// ByDecision says that Requests are in decision order.
	ByDecision bool
	// Counts per outcome: accepted (2xx), rejected (503), other, error,
	// not-sent.
	Counts map[string]int
	// Summary is the probe's summary of the burst.
	Summary probe.Summary
	// Results are the raw results in schedule order.
	Results []record.Result
	// Run is the burst as an in-memory record file (header, results, end),
	// for verdicts and reports.
	Run *record.Run
}

// Judge checks the burst against verify.DemoPolicy ("rate 1/s, burst 3,
// rejections with 429"): the nginx-like server breaks it with
// reject-status-mismatch (503, not 429) and retry-after-missing. tool is
// the document's "tool", now its "time".
func (r *DemoResult) Judge(tool string, now time.Time) verify.Report {
	return verify.AnalyzeRun(r.Run, verify.DemoPolicy(), verify.Options{Tool: tool, Schema: verify.SchemaCheck, Targets: []string{r.URL}, Time: now})
}

// Demo starts the reference server with DemoPolicy, fires a burst of Count
// requests at it through the probe engine, stops the server and returns
// the outcomes in the order the server decided them: with the defaults,
// four 200s, then four 503s.
func Demo(ctx context.Context, opt DemoOptions) (res *DemoResult, err error) {
	if opt.Count == 0 {
		opt.Count = DefaultDemoCount
	}
	if opt.Spread == 0 {
		opt.Spread = DefaultDemoSpread
	}
	spread := max(opt.Spread, 0)
	policy := DemoPolicy()
	srv, err := testserver.New(testserver.Config{
		Routes:  []testserver.Route{{Path: "", Policy: policy}},
		Handler: testserver.HandlerOptions{EchoArrival: true},
		Listen:  "127.0.0.1:0",
	})
	if err != nil {
		return nil, fmt.Errorf("scenario: demo server: %w", err)
	}
	if opt.Listener != nil {
		err = srv.StartListener(opt.Listener)
	} else {
		err = srv.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("scenario: start the demo server: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if serr := srv.Shutdown(sctx); serr != nil && err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = fmt.Errorf("scenario: stop the demo server: %w", serr)
		}
	}()
	url := srv.URL() + "/"
	sess, err := session.New(session.Config{Zero: opt.Zero,
		Probe: probe.Options{URLs: []string{url}, Dial: opt.Dial, Agent: "demo", AbortAfterErrors: -1}})
	if err != nil {
		return nil, fmt.Errorf("scenario: demo engine: %w", err)
	}
	burst := patterns.Phase{Pattern: patterns.PatternBurst, Count: opt.Count, Spread: patterns.Duration(spread)}
	if _, err := sess.Run(ctx, &patterns.Plan{Version: patterns.PlanVersion, Phases: []patterns.Phase{burst}}); err != nil {
		return nil, fmt.Errorf("scenario: demo burst: %w", err)
	}
	run := sess.Record()
	run.Header.Targets = []string{url}
	res = newDemoResult(url, policy, run.Results)
	res.Run = run
	return res, nil
}

// newDemoResult orders results by server arrival, then those the server
// numbered by its decision numbers among their own places, and counts
// outcomes.
func newDemoResult(url string, policy testserver.Policy, results []record.Result) *DemoResult {
	r := &DemoResult{URL: url, Policy: policy, Results: results, Counts: map[string]int{}, Summary: probe.Summarize(results)}
	for _, res := range results {
		req := DemoRequest{Result: res, Outcome: outcome(res, policy.Status)}
		r.Counts[req.Outcome]++
		r.Requests = append(r.Requests, req)
	}
	at := func(res record.Result) int64 {
		if res.Arrival != nil {
			return *res.Arrival
		}
		if res.TTFB != 0 {
			return res.TTFB
		}
		return res.Sched
	}
	slices.SortStableFunc(r.Requests, func(a, b DemoRequest) int {
		if c := cmp.Compare(at(a.Result), at(b.Result)); c != 0 {
			return c
		}
		return cmp.Compare(a.Result.Seq, b.Result.Seq)
	})
	if len(r.Requests) > 0 {
		first := at(r.Requests[0].Result)
		for i := range r.Requests {
			r.Requests[i].Arrival = time.Duration(at(r.Requests[i].Result) - first)
		}
	}
	// Requests arriving within microseconds of each other (a burst bunched
	// up by a loaded machine) are decided in whatever order the server's
	// goroutines run: its decision numbers give that order.
	var places []int
	var decided []DemoRequest
	for i, q := range r.Requests {
		if q.Result.Decision != nil {
			places = append(places, i)
			decided = append(decided, q)
		}
	}
	if len(decided) > 1 {
		slices.SortStableFunc(decided, func(a, b DemoRequest) int { return cmp.Compare(*a.Result.Decision, *b.Result.Decision) })
		for k, i := range places {
			r.Requests[i] = decided[k]
		}
		r.ByDecision = true
	}
	return r
}

// outcome names what became of one request: record.Classify's class
// (accepted, rejected, other, error or not-sent).
func outcome(r record.Result, declared int) string {
	c, _ := record.Classify(r, declared)
	return string(c)
}

// Statuses returns the statuses in the order of Requests (0 for a request
// without an answer).
func (r *DemoResult) Statuses() []int {
	out := make([]int, len(r.Requests))
	for i, q := range r.Requests {
		out[i] = q.Result.Status
	}
	return out
}

// DemoExplanation explains the default demo's outcome in one paragraph.
const DemoExplanation = `Why: the server limits like nginx's "limit_req zone=... rate=1r/s; limit_req
zone=... burst=3 nodelay;". The bucket holds the request being served plus a
burst of 3 (capacity 4) and drains one request per second. The first four
requests of the burst fit and are served at once (nodelay); the next four find
the bucket full and get 503, nginx's default limit_req_status, with no
Retry-After and no rate-limit header to say when to come back. One second
later one more request would pass. In real nginx, a location that answers with
"return" runs before limit_req and so limits nothing: probe the location you
think is limited, and rlprobe shows whether it is.`

// WriteText renders the demo for a terminal.
func (r *DemoResult) WriteText(w io.Writer) error {
	lc := r.Policy.Limiter
	var b strings.Builder
	fmt.Fprintf(&b, "rlprobe demo: a burst of %d requests against the reference server at %s\n", len(r.Requests), r.URL)
	fmt.Fprintf(&b, "policy: %s, rate %s, capacity %d (nginx burst %d)%s, rejects with %d, no rate-limit headers\n\n",
		lc.Algorithm, units.FormatRate(lc.Rate), lc.Capacity, lc.Capacity-1, map[bool]string{true: ", nodelay"}[lc.NoDelay], r.Policy.Status)
	fmt.Fprintf(&b, "%3s  %10s  %6s  %s\n", "#", "arrival", "status", "outcome")
	for i, q := range r.Requests {
		status := "-"
		if q.Result.Status != 0 {
			status = fmt.Sprint(q.Result.Status)
		}
		detail := q.Outcome
		if q.Result.Err != "" {
			detail += " (" + q.Result.Err + ")"
		}
		fmt.Fprintf(&b, "%3d  %10s  %6s  %s\n", i+1, "+"+fmtMS(q.Arrival), status, detail)
	}
	fmt.Fprintf(&b, "\n%d accepted, %d rejected", r.Counts["accepted"], r.Counts["rejected"])
	for _, k := range []string{"other", "error", "not-sent"} {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, ", %d %s", n, k)
		}
	}
	if r.ByDecision {
		b.WriteString(" (in the order the server decided them).\n\n")
	} else {
		b.WriteString(" (in the order the server received them).\n\n")
	}
	b.WriteString(DemoExplanation)
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtMS formats a duration in milliseconds with one decimal.
func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
