package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// Clock measurement: how far this agent's wall clock is from the reference
// clock (the target's, or a --time-ref server's), so that the record files
// of agents on several machines can be put on one timeline.
//
// Every answer from the reference server was stamped at some moment s of
// its clock, and that moment happened, on this agent's clock, somewhere
// between the request's send and the response's first byte. So the offset
// (agent − reference) lies in [Sent − s, Received − s]. The stamp is either
// exact (the reference server's X-Rlprobe-Arrival echo, in Unix
// nanoseconds) or the Date header, which only says that s lies in
// [Date, Date + 1 s). Intersecting the intervals of many exchanges gives the
// estimate: with Date, exchanges that bracket the moment the reference
// clock's second flips narrow it down to about a round trip.

// Doer sends one HTTP request and returns its response. *http.Client is a
// Doer; MeasureClock needs nothing more.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// ClockSample is one exchange with the reference server, as the clock
// estimate uses it. Sent and Received are on the agent's clock; Date and
// Arrival on the reference clock. Only wall-clock readings are used
// (monotonic readings are ignored).
type ClockSample struct {
	// Sent is no later than the moment the server could first see the
	// request: take it before the request's first byte is written.
	Sent time.Time
	// Received is no earlier than the moment the server stamped its
	// answer: take it when the response's first byte has arrived.
	Received time.Time
	// Date is the response's Date header (whole seconds); the zero time
	// when the response had none or it did not parse.
	Date time.Time
	// Arrival is the reference server's headers.ArrivalHeader echo (the
	// moment it received the request); the zero time when absent.
	Arrival time.Time
}

// Errors of the clock estimate.
var (
	// ErrNoClockReference: no response carried a usable Date or
	// X-Rlprobe-Arrival header, so there is nothing to compare with.
	ErrNoClockReference = errors.New("probe: no response carried a Date or X-Rlprobe-Arrival header")
	// ErrClockDisagree: the samples allow no common offset (the reference
	// clock jumped, replicas behind one URL disagree, or a cache answered
	// with a stale Date).
	ErrClockDisagree = errors.New("probe: clock samples disagree")
)

// Bounds returns the interval [lo, hi] of clock offsets (agent −
// reference) that the sample allows, and false when it carries no
// reference time (neither Arrival nor Date) or Received is before Sent.
// The Arrival echo is used when present, else the Date header.
func (s ClockSample) Bounds() (lo, hi time.Duration, ok bool) {
	sent, recv := s.Sent.UnixNano(), s.Received.UnixNano()
	if s.Sent.IsZero() || s.Received.IsZero() || recv < sent {
		return 0, 0, false
	}
	switch {
	case !s.Arrival.IsZero():
		a := s.Arrival.UnixNano()
		return time.Duration(sent - a), time.Duration(recv - a), true
	case !s.Date.IsZero():
		d := s.Date.Truncate(time.Second).UnixNano()
		return time.Duration(sent - d - int64(time.Second)), time.Duration(recv - d), true
	}
	return 0, 0, false
}

// clockInterval intersects the bounds of samples. n counts the samples
// that had bounds; it is an error when none had, or when the intersection
// is empty.
func clockInterval(samples []ClockSample) (lo, hi time.Duration, n int, err error) {
	var ci ClockInterval
	for _, s := range samples {
		ci.Add(s)
	}
	return ci.interval()
}

// ClockInterval intersects the bounds of clock samples added one at a
// time, holding only the intersection and a count: what EstimateClock
// computes of them all, for samples too many to keep. The zero value is
// empty. It is not safe for concurrent use.
type ClockInterval struct {
	lo, hi time.Duration
	n      int // samples with bounds
}

// Add intersects the bounds of s (a sample without bounds is ignored).
func (ci *ClockInterval) Add(s ClockSample) {
	l, h, ok := s.Bounds()
	if !ok {
		return
	}
	if ci.n == 0 || l > ci.lo {
		ci.lo = l
	}
	if ci.n == 0 || h < ci.hi {
		ci.hi = h
	}
	ci.n++
}

// interval returns the intersection, the number of samples with bounds,
// and the errors of clockInterval.
func (ci *ClockInterval) interval() (lo, hi time.Duration, n int, err error) {
	switch {
	case ci.n == 0:
		return 0, 0, 0, ErrNoClockReference
	case ci.lo > ci.hi:
		return ci.lo, ci.hi, ci.n, fmt.Errorf("%w: no offset fits all %d of them (the tightest bounds cross by %v)", ErrClockDisagree, ci.n, ci.lo-ci.hi)
	}
	return ci.lo, ci.hi, ci.n, nil
}

// Estimate is EstimateClock of the samples added.
func (ci *ClockInterval) Estimate() (offset, uncertainty time.Duration, err error) {
	lo, hi, _, err := ci.interval()
	if err != nil {
		return 0, 0, err
	}
	half := (hi - lo) / 2
	return lo + half, hi - lo - half, nil
}

// EstimateClock returns this agent's clock offset (agent − reference: what
// to subtract from its times to put them on the reference clock) and the
// uncertainty of that estimate: the intersection of every sample's Bounds
// is [offset − uncertainty, offset + uncertainty]. It fails with
// ErrNoClockReference when no sample has bounds, and with ErrClockDisagree
// when the bounds have nothing in common. It is a pure function.
func EstimateClock(samples []ClockSample) (offset, uncertainty time.Duration, err error) {
	var ci ClockInterval
	for _, s := range samples {
		ci.Add(s)
	}
	return ci.Estimate()
}

// ResultClockSample turns one recorded result into a clock sample, the
// way ClockFromResults uses it: Sent is zero + the result's Wrote (the
// last byte written, else Sent — the moment from which verify, too, takes
// the server to have the request), Received is zero + TTFB (else Done),
// Date the first of its captured Date header lines that parses, and
// Arrival zero + its Arrival echo. zero is the record's Header.Start. It
// returns false for a result without an answer (Outcome not response, or
// no times) or without a Date or Arrival.
func ResultClockSample(r record.Result, zero time.Time) (ClockSample, bool) {
	if r.Outcome != record.OutcomeResponse {
		return ClockSample{}, false
	}
	sent, recv := r.Wrote, r.TTFB
	if sent == 0 {
		sent = r.Sent
	}
	if recv == 0 {
		recv = r.Done
	}
	if sent == 0 || recv == 0 || recv < sent {
		return ClockSample{}, false
	}
	s := ClockSample{Sent: zero.Add(time.Duration(sent)), Received: zero.Add(time.Duration(recv))}
	for _, v := range headers.Values(r.Headers, "Date") {
		if t, err := http.ParseTime(v); err == nil {
			s.Date = t
			break
		}
	}
	if r.Arrival != nil {
		s.Arrival = zero.Add(time.Duration(*r.Arrival))
	}
	_, _, ok := s.Bounds()
	return s, ok
}

// ClockFromResults estimates this agent's clock offset (agent − the
// target's clock) and its uncertainty after a run, from the run's own
// results at no extra request: every answer's Date header (or the
// reference server's Arrival echo) was stamped between the request's last
// byte written and its first response byte (see ResultClockSample and
// EstimateClock). zero is the record's Header.Start.
//
// Date has a resolution of one second, so the estimate is only as good as
// the run's answers bracket a flip of the target's second: a run that
// spans such a flip with answers close on both sides of it gets about
// the spacing of those answers plus a round trip, while a short burst
// inside one second gets an uncertainty of up to about half a second
// (the interval is at most a second plus a round trip wide). That is
// reported as it is.
//
// Errors are ErrNoClockReference when no result is usable and
// ErrClockDisagree when their bounds have nothing in common (replicas
// with different clocks behind one URL, a cache answering with a stale
// Date). It is a pure function.
func ClockFromResults(results []record.Result, zero time.Time) (offset, uncertainty time.Duration, err error) {
	samples := make([]ClockSample, 0, len(results))
	for _, r := range results {
		if s, ok := ResultClockSample(r, zero); ok {
			samples = append(samples, s)
		}
	}
	return EstimateClock(samples)
}

// clockRounds is how many second flips of the reference clock a Date-based
// measurement aims at, sharing the request budget between them: each round
// spreads its probes over where the flip may fall, dividing the interval
// by the number of probes plus one.
const clockRounds = 3

// planFlipProbes returns the agent-clock send times of the next round of k
// probes, for an offset known to lie in [lo, hi]. The reference clock's
// second S flips at agent time S + offset, somewhere in [S+lo, S+hi]; the
// probes aim their arrival (send + rtt/2) at k points evenly inside that
// window, for the first S whose earliest send is not before notBefore. It
// is a pure function; k < 1 gives nil.
func planFlipProbes(lo, hi time.Duration, notBefore time.Time, rtt time.Duration, k int) []time.Time {
	if k < 1 {
		return nil
	}
	step := (hi - lo) / time.Duration(k+1)
	first := lo + step - rtt/2 // offset of the first send from the flip S
	// Smallest whole second S with S + first >= notBefore.
	need := notBefore.UnixNano() - int64(first)
	sec := need / int64(time.Second)
	if sec*int64(time.Second) < need {
		sec++
	}
	flip := time.Unix(sec, 0)
	sends := make([]time.Time, k)
	for j := range sends {
		sends[j] = flip.Add(lo + time.Duration(j+1)*step - rtt/2)
	}
	return sends
}

// MeasureClock measures this agent's clock offset (agent − reference) and
// its uncertainty against the server at url, sending at most samples GET
// requests (at least 1) one after the other through d:
//
//   - When the answer carries headers.ArrivalHeader (rlprobe serve
//     --echo-arrival), the remaining requests go back to back and the
//     uncertainty is about half a round trip.
//   - Otherwise the Date header is used. One request places the offset
//     within a second; the rest are spread over up to three of the
//     reference clock's second flips, each round cutting the interval by
//     the number of its probes plus one, down to about a round trip. This
//     takes up to a few seconds.
//
// Every request counts against the server's rate limit, if it has one:
// measure against a --time-ref server when that matters. Responses of any
// status count; transport errors end the measurement. The estimate is
// EstimateClock's over all exchanges; errors are ErrNoClockReference,
// ErrClockDisagree, the context's error, or the transport's, wrapped.
// MeasureClock reads the real clock and sleeps (time.Now, timers), so a
// synctest bubble drives it on its fake clock.
func MeasureClock(ctx context.Context, d Doer, url string, samples int) (offset, uncertainty time.Duration, err error) {
	if samples < 1 {
		return 0, 0, fmt.Errorf("probe: clock: samples must be at least 1, not %d", samples)
	}
	var got []ClockSample
	first, err := clockExchange(ctx, d, url)
	if err != nil {
		return 0, 0, err
	}
	got = append(got, first)
	rtt := first.Received.Sub(first.Sent)
	left := samples - 1

	if !first.Arrival.IsZero() {
		for ; left > 0; left-- {
			s, err := clockExchange(ctx, d, url)
			if err != nil {
				return 0, 0, err
			}
			got = append(got, s)
		}
		return EstimateClock(got)
	}

	for round := 0; left > 0 && round < clockRounds; round++ {
		lo, hi, _, err := clockInterval(got)
		if err != nil {
			return 0, 0, err
		}
		if hi-lo <= 2*rtt {
			break // a round trip is as tight as this gets
		}
		k := (left + clockRounds - round - 1) / (clockRounds - round)
		for _, at := range planFlipProbes(lo, hi, time.Now(), rtt, k) {
			if err := sleepUntil(ctx, at); err != nil {
				return 0, 0, fmt.Errorf("probe: clock: %w", err)
			}
			s, err := clockExchange(ctx, d, url)
			if err != nil {
				return 0, 0, err
			}
			got = append(got, s)
			rtt = min(rtt, s.Received.Sub(s.Sent))
			left--
		}
	}
	return EstimateClock(got)
}

// clockExchange sends one GET and times it: Sent when a connection is in
// hand (before the first byte is written), Received at the first response
// byte, falling back to the moments around d.Do when d does not report
// them through httptrace.
func clockExchange(ctx context.Context, d Doer, url string) (ClockSample, error) {
	var gotConn, firstByte time.Time
	trace := &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { gotConn = time.Now() },
		GotFirstResponseByte: func() { firstByte = time.Now() },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, url, nil)
	if err != nil {
		return ClockSample{}, fmt.Errorf("probe: clock: %w", err)
	}
	req.Header.Set("Cache-Control", "no-cache")
	before := time.Now()
	resp, err := d.Do(req)
	after := time.Now()
	if err != nil {
		// A *url.Error quotes the URL: redact the default secrets.
		return ClockSample{}, fmt.Errorf("probe: clock: %w", redactError(nil, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()

	s := ClockSample{Sent: before, Received: after}
	if !gotConn.IsZero() && !gotConn.Before(before) && !gotConn.After(after) {
		s.Sent = gotConn
	}
	if !firstByte.IsZero() && !firstByte.Before(s.Sent) && !firstByte.After(after) {
		s.Received = firstByte
	}
	if v := resp.Header.Get("Date"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			s.Date = t
		}
	}
	if v := strings.TrimSpace(resp.Header.Get(headers.ArrivalHeader)); v != "" {
		if ns, err := strconv.ParseInt(v, 10, 64); err == nil && ns > 0 {
			s.Arrival = time.Unix(0, ns)
		}
	}
	return s, nil
}

// sleepUntil waits until the wall clock reads at, or ctx ends.
func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
