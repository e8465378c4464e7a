package verify

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/record"
)

// TestRetryAfterDateOnTheServersClock: a Retry-After HTTP-date names a
// moment on the server's clock, and the server's Date header says what
// that clock read when it answered; the wait is the one against the
// other, whatever the client's clock says. A server 3 s behind the client
// that names the true moment is honest; one whose clock agrees with the
// client's and names a moment 3 s early is early, certainly; one 10 s
// ahead naming the true moment is not late, and one in step naming a
// moment 10 s late is.
func TestRetryAfterDateOnTheServersClock(t *testing.T) {
	// One per 5 s, a sliding log: accepted at 0 ms, the quota back at 5 s
	// (client time). The rejection is answered at 100–150 ms; two retries
	// at 2.3 s and 2.4 s are rejected, one at 5.2 s is accepted.
	e := Endpoint{Limit: 1, Window: 5 * time.Second, Status: 429, Headers: []string{"none"}}
	var noDate bool
	date := func(skew, clientMS time.Duration) string {
		if noDate {
			return "" // no header line
		}
		return "Date: " + t0.Add(clientMS*time.Millisecond+skew).Truncate(time.Second).UTC().Format(http.TimeFormat)
	}
	// retryAt is the HTTP-date of the quota's return (client 5 s) on a
	// clock skew ahead of the client's, moved by early (late when
	// negative).
	retryAt := func(skew, early time.Duration) string {
		return t0.Add(5*time.Second + skew - early).UTC().Format(http.TimeFormat)
	}
	tests := []struct {
		name                string
		skew, early         time.Duration
		wantEarly, wantLate bool
		noDate              bool // the server sends no Date
	}{
		{"server 3 s behind, honest", -3 * time.Second, 0, false, false, false},
		{"server in step, 3 s early", 0, 3 * time.Second, true, false, false},
		{"server 3 s ahead, honest", 3 * time.Second, 0, false, false, false},
		{"server 3 s behind, 3 s early", -3 * time.Second, 3 * time.Second, true, false, false},
		{"server 10 s ahead, honest", 10 * time.Second, 0, false, false, false},
		{"server in step, 10 s late", 0, -10 * time.Second, false, true, false},
		// Without a Date, the date names a moment on a clock the client
		// cannot place: neither early nor late is certain.
		{"no Date, 3 s early", 0, 3 * time.Second, false, false, true},
		{"no Date, 10 s late", 0, -10 * time.Second, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noDate = tt.noDate
			b := newRun("a", 0)
			lines := func(extra ...string) []string {
				var out []string
				for _, l := range extra {
					if l != "" {
						out = append(out, l)
					}
				}
				return out
			}
			b.add(0, 1, 200, lines(date(tt.skew, 1))...)
			ra := "Retry-After: " + retryAt(tt.skew, tt.early)
			b.add(100, 150, 429, lines(date(tt.skew, 150), ra)...)
			for _, ms := range []float64{2300, 2400} {
				b.add(ms, ms+1, 429, lines(date(tt.skew, time.Duration(ms+1)), ra)...)
			}
			b.add(5200, 5201, 200, lines(date(tt.skew, 5201))...)
			rep := analyze(t, e, Options{}, b)
			if got := rep.Count(IDRetryAfterEarly, Certain) > 0; got != tt.wantEarly {
				t.Errorf("certain %s: %v, want %v; findings:%s", IDRetryAfterEarly, got, tt.wantEarly, describeFindings(rep))
			}
			if got := rep.Count(IDRetryAfterLate, Certain) > 0; got != tt.wantLate {
				t.Errorf("certain %s: %v, want %v; findings:%s", IDRetryAfterLate, got, tt.wantLate, describeFindings(rep))
			}
		})
	}
}

// TestAdvertisedWindowOnTheServersClock: a fresh quota's epoch reset gives
// the advertised window read against the response's Date, whatever the
// skew of the server's clock; without a Date, against the receipt.
func TestAdvertisedWindowOnTheServersClock(t *testing.T) {
	received := t0.Add(300 * time.Millisecond)
	for _, tt := range []struct {
		name string
		skew time.Duration // of the server's clock, ahead of the client's
		date bool
		want time.Duration
	}{
		{"server 10 s ahead", 10 * time.Second, true, time.Hour},
		{"server 10 s behind", -10 * time.Second, true, time.Hour},
		{"in step, no Date", 0, false, time.Hour},
	} {
		server := t0.Add(tt.skew) // the window starts at the server's t0
		h := http.Header{}
		h.Set("X-RateLimit-Limit", "60")
		h.Set("X-RateLimit-Remaining", "59")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(server.Add(time.Hour).Unix(), 10))
		if tt.date {
			h.Set("Date", server.UTC().Format(http.TimeFormat))
		}
		adv := Advertised(h, received)
		if len(adv) != 1 || adv[0].Limit != 60 || adv[0].Window != tt.want {
			t.Errorf("%s: advertised %+v, want 60 per %v", tt.name, adv, tt.want)
		}
	}
}

// TestEpochWindowsOnTheServersClock: epoch-aligned windows are the
// server's, placed under a lone run by its end line's clock estimate and
// widened by its uncertainty. The server's clock is 700 ms behind the
// client's (±20 ms), so its 2 s windows start 700 ms past each even second
// of the client's. Without an estimate the windows stay on the client's
// clock, and a note says so.
func TestEpochWindowsOnTheServersClock(t *testing.T) {
	const ms = int64(time.Millisecond)
	e := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: "epoch", Status: 429, Headers: []string{"none"}}
	estimate := &record.End{Reason: record.ReasonCompleted, ClockOffsetNS: 700 * ms, ClockUncertaintyNS: 20 * ms, ClockSource: record.ClockSourceDate}
	// at returns n accepted requests 100 ms apart from the first.
	at := func(first float64, n int) []float64 {
		var out []float64
		for i := range n {
			out = append(out, first+100*float64(i))
		}
		return out
	}
	tests := []struct {
		name              string
		end               *record.End
		accepted          []float64 // ms since the start, each answered 1 ms later; one refused at 1.7 s
		certain, possible bool
		note              bool
	}{
		{"5 before the server's edge and 5 after it", estimate, append(at(100, 5), at(800, 5)...), false, false, false},
		{"6 after the edge, the first within its uncertainty", estimate, at(710, 6), false, true, false},
		{"6 surely after the edge", estimate, at(750, 6), true, false, false},
		{"no estimate: the client's clock, said", &record.End{Reason: record.ReasonCompleted}, append(at(100, 5), at(800, 5)...), true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newRun("a", 0)
			b.run.End = tt.end
			for _, ms := range tt.accepted {
				b.add(ms, ms+1, 200)
			}
			b.add(1700, 1701, 429) // limiting was seen
			rep := analyze(t, e, Options{}, b)
			c, p := rep.Count(IDWindowLimitExceeded, Certain) > 0, rep.Count(IDWindowLimitExceeded, Possible) > 0
			if c != tt.certain || p != tt.possible {
				t.Errorf("certain %v, possible %v; want %v, %v; findings:%s", c, p, tt.certain, tt.possible, describeFindings(rep))
			}
			noted := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "this machine's clock") })
			if noted != tt.note {
				t.Errorf("note of this machine's clock: %v, want %v; notes %q", noted, tt.note, rep.Notes)
			}
		})
	}
}

// TestEchoOnTheServersClock: a reference server 700 ms ahead echoes each
// arrival on its clock. A lone run's end-line estimate (from those echoes:
// −700 ms ± 0.1 ms) puts the echoes on the run's clock as it places the
// server's epoch-aligned windows: five requests before the server's edge
// and five after it are two windows' worth, not ten in one. An echo later
// than its answer, with no estimate to place it, is ignored.
func TestEchoOnTheServersClock(t *testing.T) {
	const ms = int64(time.Millisecond)
	e := Endpoint{Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: "epoch", Status: 429, Headers: []string{"none"}}
	// The server's edge at its 2 s is at 1.3 s of the run's clock.
	first := []float64{900, 990, 1080, 1170, 1250}
	second := []float64{1350, 1440, 1530, 1620, 1700}
	run := func(end *record.End) *runBuilder {
		b := newRun("a", 0)
		b.run.End = end
		for _, at := range append(slices.Clone(first), second...) {
			r := b.add(at, at+0.5, 200)
			echo := int64(at*float64(ms)) + 100_000 + 700*ms // received 0.1 ms after the last byte
			r.Arrival = &echo
		}
		b.add(1800, 1801, 429)
		return b
	}
	estimate := &record.End{Reason: record.ReasonCompleted, ClockOffsetNS: -700 * ms, ClockUncertaintyNS: ms / 10, ClockSource: record.ClockSourceDate}
	rep := analyze(t, e, Options{}, run(estimate))
	if n := rep.Count(IDWindowLimitExceeded, Certain) + rep.Count(IDWindowLimitExceeded, Possible); n != 0 {
		t.Errorf("with the estimate: %d window-limit-exceeded, want none; findings:%s", n, describeFindings(rep))
	}
	// Without an estimate the windows are this machine's (noted), and
	// the echoes, 700 ms past their answers, are ignored: all ten fall
	// in its window [0, 2 s), certainly.
	rep = analyze(t, e, Options{}, run(&record.End{Reason: record.ReasonCompleted}))
	if rep.Count(IDWindowLimitExceeded, Certain) != 1 {
		t.Errorf("without an estimate: want a certain window-limit-exceeded; findings:%s", describeFindings(rep))
	}
	for _, f := range rep.Findings {
		if f.ID == IDWindowLimitExceeded && f.Evidence.Count != 10 {
			t.Errorf("without an estimate: %d accepted in one window, want 10 (read by the echoes, only 5 were)", f.Evidence.Count)
		}
	}
}
