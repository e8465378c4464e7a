package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// clockT0 is an arbitrary agent-clock instant, half a second into a second.
var clockT0 = time.Date(2025, 6, 1, 12, 0, 0, 500_000_000, time.UTC)

func clockMS(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// contains fails t unless [offset−unc, offset+unc] holds want.
func clockContains(t *testing.T, offset, unc, want time.Duration) {
	t.Helper()
	if unc < 0 {
		t.Fatalf("uncertainty %v is negative", unc)
	}
	if want < offset-unc || want > offset+unc {
		t.Fatalf("estimate %v ± %v does not contain the true offset %v (off by %v)", offset, unc, want, want-offset)
	}
}

func TestClockSampleBounds(t *testing.T) {
	date := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		s      ClockSample
		lo, hi time.Duration
		ok     bool
	}{
		{
			name: "arrival echo: offset between send and receive minus the echo",
			s:    ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(4)), Arrival: clockT0.Add(-time.Second + clockMS(1))},
			lo:   time.Second - clockMS(1), hi: time.Second + clockMS(3), ok: true,
		},
		{
			name: "Date: the stamp lies anywhere in its second",
			s:    ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(2)), Date: date},
			lo:   clockMS(500) - time.Second, hi: clockMS(502), ok: true,
		},
		{
			name: "Date with a fraction is truncated to its second",
			s:    ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(2)), Date: date.Add(clockMS(700))},
			lo:   clockMS(500) - time.Second, hi: clockMS(502), ok: true,
		},
		{
			name: "echo wins over Date",
			s:    ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(2)), Date: date, Arrival: clockT0.Add(clockMS(1))},
			lo:   -clockMS(1), hi: clockMS(1), ok: true,
		},
		{name: "no reference time", s: ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(2))}},
		{name: "received before sent", s: ClockSample{Sent: clockT0, Received: clockT0.Add(-clockMS(1)), Date: date}},
		{name: "never sent", s: ClockSample{Received: clockT0, Date: date}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi, ok := tt.s.Bounds()
			if ok != tt.ok || lo != tt.lo || hi != tt.hi {
				t.Fatalf("Bounds() = %v, %v, %v; want %v, %v, %v", lo, hi, ok, tt.lo, tt.hi, tt.ok)
			}
		})
	}
}

// synthetic returns n exchanges starting at agent time start, one every
// gap, each taking out + back, with a reference clock behind the agent's by
// offset: the server stamps at send + out (agent clock), i.e. send + out −
// offset on its own clock.
func clockSynthetic(start time.Time, n int, gap, out, back, offset time.Duration, echo bool) []ClockSample {
	var s []ClockSample
	for i := range n {
		sent := start.Add(time.Duration(i) * gap)
		stamp := sent.Add(out - offset)
		c := ClockSample{Sent: sent, Received: sent.Add(out + back)}
		if echo {
			c.Arrival = stamp
		} else {
			c.Date = stamp.Truncate(time.Second)
		}
		s = append(s, c)
	}
	return s
}

func TestEstimateClockContainsTheTruthAndIsTight(t *testing.T) {
	tests := []struct {
		name      string
		samples   []ClockSample
		offset    time.Duration
		maxUnc    time.Duration // the estimate's half-width must not exceed this
		exactNone bool
	}{
		{
			// One exchange per 7 ms over 1.5 s: some pair brackets a flip
			// within 7 ms + the round trip.
			name:    "Date, polled across a flip",
			offset:  1234567890 * time.Nanosecond,
			samples: clockSynthetic(clockT0, 215, clockMS(7), clockMS(1), clockMS(1), 1234567890*time.Nanosecond, false),
			maxUnc:  clockMS(4.5),
		},
		{
			name:    "Date, agent behind the reference, asymmetric path",
			offset:  -time.Hour + clockMS(123.456),
			samples: clockSynthetic(clockT0, 300, clockMS(5), clockMS(3), clockMS(0.5), -time.Hour+clockMS(123.456), false),
			maxUnc:  clockMS(4.25),
		},
		{
			// One exchange says little: a second and a round trip.
			name:    "Date, a single exchange",
			offset:  clockMS(250),
			samples: clockSynthetic(clockT0, 1, 0, clockMS(1), clockMS(1), clockMS(250), false),
			maxUnc:  clockMS(501),
		},
		{
			name:    "echo, symmetric",
			offset:  42 * time.Second,
			samples: clockSynthetic(clockT0, 5, clockMS(10), clockMS(2), clockMS(2), 42*time.Second, true),
			maxUnc:  clockMS(2),
		},
		{
			name:    "echo, asymmetric: still contained, a round trip wide",
			offset:  -clockMS(3),
			samples: clockSynthetic(clockT0, 5, clockMS(10), clockMS(0.2), clockMS(5), -clockMS(3), true),
			maxUnc:  clockMS(2.6),
		},
		{
			name:   "samples without a reference are ignored",
			offset: clockMS(10),
			samples: append(clockSynthetic(clockT0, 3, clockMS(10), clockMS(1), clockMS(1), clockMS(10), true),
				ClockSample{Sent: clockT0, Received: clockT0.Add(clockMS(1))}),
			maxUnc: clockMS(1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, unc, err := EstimateClock(tt.samples)
			if err != nil {
				t.Fatalf("EstimateClock: %v", err)
			}
			clockContains(t, off, unc, tt.offset)
			if unc > tt.maxUnc {
				t.Errorf("uncertainty %v, want at most %v", unc, tt.maxUnc)
			}
		})
	}
}

func TestEstimateClockErrors(t *testing.T) {
	date := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		samples []ClockSample
		want    error
	}{
		{name: "no samples", want: ErrNoClockReference},
		{name: "no reference header", samples: []ClockSample{{Sent: clockT0, Received: clockT0.Add(clockMS(1))}}, want: ErrNoClockReference},
		{
			// The same agent moment, two seconds apart on the reference: a
			// clock jump, or two replicas that disagree.
			name: "disagreeing samples",
			samples: []ClockSample{
				{Sent: clockT0, Received: clockT0.Add(clockMS(1)), Date: date},
				{Sent: clockT0.Add(clockMS(2)), Received: clockT0.Add(clockMS(3)), Date: date.Add(2 * time.Second)},
			},
			want: ErrClockDisagree,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := EstimateClock(tt.samples)
			if !errors.Is(err, tt.want) {
				t.Fatalf("EstimateClock() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPlanFlipProbes(t *testing.T) {
	sec := time.Date(2025, 6, 1, 12, 0, 7, 0, time.UTC)
	tests := []struct {
		name      string
		lo, hi    time.Duration
		notBefore time.Time
		rtt       time.Duration
		k         int
		want      []time.Duration // relative to sec
	}{
		{
			name: "three probes split the window in four",
			lo:   -clockMS(100), hi: clockMS(900), notBefore: sec.Add(-clockMS(300)), k: 3,
			want: []time.Duration{clockMS(150), clockMS(400), clockMS(650)},
		},
		{
			name: "sent half a round trip early",
			lo:   0, hi: clockMS(300), notBefore: sec.Add(-clockMS(500)), rtt: clockMS(20), k: 2,
			want: []time.Duration{clockMS(90), clockMS(190)},
		},
		{
			name: "too late for this flip: the next second",
			lo:   0, hi: clockMS(400), notBefore: sec.Add(clockMS(250)), k: 1,
			want: []time.Duration{time.Second + clockMS(200)},
		},
		{name: "no probes", lo: 0, hi: time.Second, notBefore: sec, k: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planFlipProbes(tt.lo, tt.hi, tt.notBefore, tt.rtt, tt.k)
			if len(got) != len(tt.want) {
				t.Fatalf("planFlipProbes() = %v, want %d probes", got, len(tt.want))
			}
			for i, at := range got {
				if at.Before(tt.notBefore) {
					t.Errorf("probe %d at %v is before %v", i, at, tt.notBefore)
				}
				if want := sec.Add(tt.want[i]); !at.Equal(want) {
					t.Errorf("probe %d at %v, want %v", i, at.Sub(sec), tt.want[i])
				}
			}
		})
	}
}

// clockRef is a reference server behind a Doer, on the fake clock of a
// synctest bubble: its clock is the agent's minus offset; a request takes
// out to reach it and back to return.
type clockRef struct {
	offset    time.Duration
	out, back time.Duration
	echo      bool
	noDate    bool
	calls     int
}

func (f *clockRef) Do(req *http.Request) (*http.Response, error) {
	f.calls++
	time.Sleep(f.out)
	stamp := time.Now().Add(-f.offset)
	h := http.Header{}
	if !f.noDate {
		h.Set("Date", stamp.UTC().Format(http.TimeFormat))
	}
	if f.echo {
		h.Set(headers.ArrivalHeader, strconv.FormatInt(stamp.UnixNano(), 10))
	}
	time.Sleep(f.back)
	return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: io.NopCloser(strings.NewReader("slow down"))}, nil
}

func TestMeasureClock(t *testing.T) {
	tests := []struct {
		name    string
		ref     clockRef
		samples int
		maxUnc  time.Duration
		maxTime time.Duration // of fake time
	}{
		{name: "Date, agent ahead", ref: clockRef{offset: 1234567890 * time.Nanosecond, out: clockMS(1), back: clockMS(1)}, samples: 16, maxUnc: clockMS(4), maxTime: 4 * time.Second},
		{name: "Date, agent behind, slow asymmetric path", ref: clockRef{offset: -37*time.Minute - clockMS(417.3), out: clockMS(30), back: clockMS(5)}, samples: 16, maxUnc: clockMS(40), maxTime: 4 * time.Second},
		{name: "Date, in step", ref: clockRef{out: clockMS(0.2), back: clockMS(0.2)}, samples: 12, maxUnc: clockMS(10), maxTime: 4 * time.Second},
		{name: "Date, two requests", ref: clockRef{offset: clockMS(600), out: clockMS(1), back: clockMS(1)}, samples: 2, maxUnc: clockMS(251), maxTime: 2 * time.Second},
		{name: "echo: back to back, no waiting", ref: clockRef{offset: -clockMS(2500), out: clockMS(3), back: clockMS(1), echo: true}, samples: 5, maxUnc: clockMS(2), maxTime: clockMS(21)},
		{name: "echo without Date", ref: clockRef{offset: clockMS(70), out: clockMS(1), back: clockMS(1), echo: true, noDate: true}, samples: 3, maxUnc: clockMS(1), maxTime: clockMS(7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ref := tt.ref
				start := time.Now()
				off, unc, err := MeasureClock(t.Context(), &ref, "http://ref.test/", tt.samples)
				if err != nil {
					t.Fatalf("MeasureClock: %v", err)
				}
				t.Logf("true offset %v: estimate %v ± %v after %d requests, %v", ref.offset, off, unc, ref.calls, time.Since(start))
				clockContains(t, off, unc, ref.offset)
				if unc > tt.maxUnc {
					t.Errorf("uncertainty %v, want at most %v", unc, tt.maxUnc)
				}
				if ref.calls > tt.samples {
					t.Errorf("sent %d requests, more than samples=%d", ref.calls, tt.samples)
				}
				if took := time.Since(start); took > tt.maxTime {
					t.Errorf("took %v of fake time, want at most %v", took, tt.maxTime)
				}
			})
		})
	}
}

func TestMeasureClockErrors(t *testing.T) {
	t.Run("no reference header", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ref := &clockRef{noDate: true}
			if _, _, err := MeasureClock(t.Context(), ref, "http://ref.test/", 3); !errors.Is(err, ErrNoClockReference) {
				t.Fatalf("err = %v, want ErrNoClockReference", err)
			}
		})
	})
	t.Run("samples below 1", func(t *testing.T) {
		if _, _, err := MeasureClock(context.Background(), &clockRef{}, "http://ref.test/", 0); err == nil {
			t.Fatal("samples=0 accepted")
		}
	})
	t.Run("transport error", func(t *testing.T) {
		c := &http.Client{Transport: clockRoundTrip(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection refused")
		})}
		_, _, err := MeasureClock(context.Background(), c, "http://ref.test/", 3)
		if err == nil || !strings.HasPrefix(err.Error(), "probe: clock:") {
			t.Fatalf("err = %v, want a probe: clock: error", err)
		}
	})
	t.Run("cancelled while waiting for a flip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			ref := &clockRef{out: clockMS(1), back: clockMS(1)}
			go func() { time.Sleep(clockMS(50)); cancel() }()
			if _, _, err := MeasureClock(ctx, ref, "http://ref.test/", 16); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		})
	})
}

type clockRoundTrip func(*http.Request) (*http.Response, error)

func (f clockRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMeasureClockLoopback measures over real sockets against a server on
// this machine's clock: the true offset is zero, and the echo interval (from
// the connection in hand to the first response byte) must contain it.
func TestMeasureClockLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			w.Header().Set(headers.ArrivalHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		}
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	for _, tt := range []struct {
		path    string
		samples int
		maxUnc  time.Duration
	}{
		{path: "/echo", samples: 8, maxUnc: 250 * time.Millisecond},
		{path: "/date", samples: 1, maxUnc: time.Second},
	} {
		t.Run(tt.path, func(t *testing.T) {
			off, unc, err := MeasureClock(t.Context(), srv.Client(), srv.URL+tt.path, tt.samples)
			if err != nil {
				t.Fatalf("MeasureClock: %v", err)
			}
			clockContains(t, off, unc, 0)
			if unc > tt.maxUnc {
				t.Errorf("uncertainty %v over loopback, want at most %v", unc, tt.maxUnc)
			}
		})
	}
}

func ExampleEstimateClock() {
	// Three exchanges with a server whose clock is 250 ms behind ours,
	// each 2 ms long; the server echoed when it received each request.
	agent := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var samples []ClockSample
	for i := range 3 {
		sent := agent.Add(time.Duration(i) * 10 * time.Millisecond)
		samples = append(samples, ClockSample{
			Sent:     sent,
			Received: sent.Add(2 * time.Millisecond),
			Arrival:  sent.Add(time.Millisecond - 250*time.Millisecond),
		})
	}
	offset, uncertainty, err := EstimateClock(samples)
	fmt.Println(offset, uncertainty, err)
	// Output: 250ms 1ms <nil>
}

// TestClockFromResults estimates the clock from a run's own results: a
// simulated target whose clock is clockTruth behind the agent's stamps its
// Date header (whole seconds) halfway through each exchange.
func TestClockFromResults(t *testing.T) {
	const truth = 137*time.Millisecond + 250*time.Microsecond // agent − target
	const rtt = 2 * time.Millisecond
	zero := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) // the record's start, agent clock

	// answered is a result sent at agent time at (since zero), answered
	// after rtt, its Date stamped by the target halfway.
	answered := func(seq int64, at time.Duration) record.Result {
		stamp := zero.Add(at + rtt/2 - truth)
		h := http.Header{}
		h.Set("Date", stamp.UTC().Format(http.TimeFormat))
		return record.Result{Seq: seq, Outcome: record.OutcomeResponse, Status: 200,
			Sent: int64(at) - 1000, Wrote: int64(at), TTFB: int64(at + rtt), Done: int64(at + rtt + time.Millisecond), Headers: h}
	}
	// every returns n results sent every step from first.
	every := func(first, step time.Duration, n int) []record.Result {
		var rs []record.Result
		for i := range n {
			rs = append(rs, answered(int64(i), first+time.Duration(i)*step))
		}
		return rs
	}
	noDate := func(r record.Result) record.Result { r.Headers = nil; return r }

	// The target's second flips at agent time zero + 1 s + truth.
	flip := time.Second + truth

	tests := []struct {
		name    string
		results []record.Result
		maxUnc  time.Duration // the half-width may be at most this
		minUnc  time.Duration // and at least this (an honest width)
		err     error
	}{
		{
			// Answers 10 ms apart across a flip: the flip is bracketed to
			// one spacing plus a round trip.
			name:    "straddles a flip",
			results: every(flip-100*time.Millisecond, 10*time.Millisecond, 20),
			maxUnc:  (10*time.Millisecond + rtt) / 2,
		},
		{
			// A 50 ms burst inside one target second: Date only places
			// the offset within a second (plus the burst and a round trip).
			name:    "inside one second",
			results: every(flip+300*time.Millisecond, 10*time.Millisecond, 6),
			maxUnc:  (time.Second + rtt) / 2,
			minUnc:  (time.Second - 50*time.Millisecond) / 2,
		},
		{
			// Only usable samples count: errors, not-sent, an unparsable
			// Date and a missing TTFB are skipped.
			name: "skips what it cannot use",
			results: append(every(flip-100*time.Millisecond, 10*time.Millisecond, 20),
				record.Result{Seq: 90, Outcome: record.OutcomeError, Err: record.ErrTimeout, Wrote: 5, Headers: http.Header{"Date": {"garbage"}}},
				record.Result{Seq: 91, Outcome: record.OutcomeNotSent},
				func() record.Result { r := answered(92, 0); r.Headers.Set("Date", "yesterday"); return r }(),
				func() record.Result { r := answered(93, 0); r.TTFB, r.Done = 0, 0; return r }()),
			maxUnc: (10*time.Millisecond + rtt) / 2,
		},
		{
			// The arrival echo is exact: half a round trip.
			name: "arrival echo",
			results: func() []record.Result {
				rs := every(flip+300*time.Millisecond, 10*time.Millisecond, 3)
				for i := range rs {
					rs[i] = noDate(rs[i])
					a := rs[i].Wrote + int64(rtt/2) - int64(truth)
					rs[i].Arrival = &a
				}
				return rs
			}(),
			maxUnc: rtt / 2,
		},
		{name: "no Date header", results: []record.Result{noDate(answered(0, time.Second))}, err: ErrNoClockReference},
		{name: "no results", err: ErrNoClockReference},
		{
			// A cache answers with a Date five seconds stale.
			name: "stale Date",
			results: append(every(flip+300*time.Millisecond, 10*time.Millisecond, 3), func() record.Result {
				r := answered(9, flip+400*time.Millisecond)
				r.Headers.Set("Date", zero.Add(-5*time.Second).Format(http.TimeFormat))
				return r
			}()),
			err: ErrClockDisagree,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, unc, err := ClockFromResults(tt.results, zero)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ClockFromResults = %v ± %v, %v; want %v", off, unc, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClockFromResults: %v", err)
			}
			clockContains(t, off, unc, truth)
			if unc > tt.maxUnc || unc < tt.minUnc {
				t.Errorf("uncertainty %v, want within [%v, %v]", unc, tt.minUnc, tt.maxUnc)
			}
		})
	}
}

// TestSinceZero: an arrival echo (wall clock) lands on the run's clock by
// the wall clock of the moment it is read, so a step of the wall clock
// between the run's zero and the echo moves it nowhere.
func TestSinceZero(t *testing.T) {
	const zero = int64(1_700_000_000_000_000_000) // the zero's wall time
	tests := []struct {
		name  string
		echo  int64         // the server's wall-clock arrival
		now   int64         // the wall clock when the answer is read
		since time.Duration // the run's clock then
		want  int64
	}{
		{"no step", zero + 2e9, zero + 2.001e9, 2001 * time.Millisecond, 2e9},
		{"the wall clock stepped 1 s forward before the echo", zero + 3e9, zero + 3.001e9, 2001 * time.Millisecond, 2e9},
		{"and 50 ms back", zero + 1.95e9, zero + 1.951e9, 2001 * time.Millisecond, 2e9},
		{"an echo before the zero", zero - 5e6, zero + 1e6, time.Millisecond, -5e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sinceZero(tt.echo, tt.now, tt.since); got != tt.want {
				t.Errorf("sinceZero = %d, want %d", got, tt.want)
			}
		})
	}
}
