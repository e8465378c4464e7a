package headers

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// received is a fixed receipt time with a sub-second part.
var received = time.Date(2026, 5, 14, 10, 20, 30, 250_000_000, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	whole := received.Truncate(time.Second)
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{"delay-seconds", "120", 120 * time.Second},
		{"zero", "0", 0},
		{"leading zeros", "007", 7 * time.Second},
		{"surrounding whitespace", " \t30 ", 30 * time.Second},
		{"saturates", "99999999999999999999999", time.Duration(1<<63 - 1)},
		// The three HTTP-date forms of RFC 9110 §5.6.7, 90 s after the whole
		// second of receipt, so 89.75 s after receipt itself.
		{"IMF-fixdate", "Thu, 14 May 2026 10:22:00 GMT", whole.Add(90 * time.Second).Sub(received)},
		{"RFC 850", "Thursday, 14-May-26 10:22:00 GMT", whole.Add(90 * time.Second).Sub(received)},
		{"asctime", "Thu May 14 10:22:00 2026", whole.Add(90 * time.Second).Sub(received)},
		{"asctime single-digit day", "Sat May  2 10:22:00 2026", 0},
		{"date in the past clamps to 0", "Fri, 31 Dec 1999 23:59:59 GMT", 0},
		{"RFC 850 year within 50 years ahead", "Tuesday, 14-May-75 10:20:30 GMT",
			time.Date(2075, 5, 14, 10, 20, 30, 0, time.UTC).Sub(received)},
	}
	for _, tt := range tests {
		got, err := ParseRetryAfter(tt.in, received)
		if err != nil || got != tt.want {
			t.Errorf("%s: ParseRetryAfter(%q) = %v, %v; want %v", tt.name, tt.in, got, err, tt.want)
		}
	}
}

func TestParseRetryAfterTwoDigitYearPast(t *testing.T) {
	// "80" is more than 50 years after 2026, so it is 1980: in the past.
	got, err := ParseRetryAfter("Wednesday, 14-May-80 10:20:30 GMT", received)
	if err != nil || got != 0 {
		t.Fatalf("ParseRetryAfter(RFC 850, year 80) = %v, %v; want 0 (1980)", got, err)
	}
	// Received in 2099, "00" is 2100, one year ahead, not 2000.
	late := time.Date(2099, 5, 14, 0, 0, 0, 0, time.UTC)
	got, err = ParseRetryAfter("Friday, 14-May-00 00:00:00 GMT", late)
	if want := time.Date(2100, 5, 14, 0, 0, 0, 0, time.UTC).Sub(late); err != nil || got != want {
		t.Fatalf("ParseRetryAfter(RFC 850, year 00, received 2099) = %v, %v; want %v", got, err, want)
	}
}

func TestParseRetryAfterMalformed(t *testing.T) {
	for _, in := range []string{
		"", " ", "-1", "+5", "1.5", "5s", "0x10", "soon",
		"Thu, 14 May 2026 10:22:00 UTC",    // IMF-fixdate must say GMT
		"2026-05-14T10:22:00Z",             // RFC 3339 is not an HTTP-date
		"Thursday, 14-May-26 10:22:00 PST", // RFC 850 must say GMT
		"Thu, 14 May 2026 10:22:00 GMT, 5",
	} {
		got, err := ParseRetryAfter(in, received)
		if err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want an error wrapping ErrMalformed", in, got, err)
		}
	}
}

func TestFormatRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 14, 10, 20, 30, 250_000_000, time.UTC)
	tests := []struct {
		d    time.Duration
		f    RetryAfterFormat
		want string
	}{
		{30 * time.Second, RetryAfterSeconds, "30"},
		{29*time.Second + time.Nanosecond, RetryAfterSeconds, "30"},
		{1500 * time.Millisecond, "", "2"},
		{0, RetryAfterSeconds, "0"},
		{-time.Second, RetryAfterSeconds, "0"},
		// now + 29.75 s = 10:21:00 exactly.
		{29750 * time.Millisecond, RetryAfterHTTPDate, "Thu, 14 May 2026 10:21:00 GMT"},
		// now + 29.75 s + 1 ns rounds up to the next second.
		{29750*time.Millisecond + 1, RetryAfterHTTPDate, "Thu, 14 May 2026 10:21:01 GMT"},
		{-time.Hour, RetryAfterHTTPDate, "Thu, 14 May 2026 10:20:31 GMT"},
	}
	for _, tt := range tests {
		if got := FormatRetryAfter(tt.d, tt.f, now); got != tt.want {
			t.Errorf("FormatRetryAfter(%v, %q) = %q, want %q", tt.d, tt.f, got, tt.want)
		}
	}
}

// TestRetryAfterNeverEarly checks that formatting then parsing at the same
// instant never asks for less than was meant, nor a second more.
func TestRetryAfterNeverEarly(t *testing.T) {
	now := received
	for _, f := range []RetryAfterFormat{RetryAfterSeconds, RetryAfterHTTPDate} {
		for d := time.Duration(0); d < 5*time.Second; d += 125 * time.Millisecond {
			got, err := ParseRetryAfter(FormatRetryAfter(d, f, now), now)
			if err != nil || got < d || got >= d+time.Second {
				t.Errorf("%s: %v → %q → %v, %v; want in [%v, %v)", f, d, FormatRetryAfter(d, f, now), got, err, d, d+time.Second)
			}
		}
	}
}

func TestParseRetryAfterFormat(t *testing.T) {
	for in, want := range map[string]RetryAfterFormat{"seconds": RetryAfterSeconds, "HTTP-Date": RetryAfterHTTPDate} {
		if got, err := ParseRetryAfterFormat(in); err != nil || got != want {
			t.Errorf("ParseRetryAfterFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseRetryAfterFormat("date"); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseRetryAfterFormat(\"date\") error = %v, want ErrMalformed", err)
	}
}

// TestServerNow: absolute times are read against the first Date that
// parses, in any of the three HTTP-date forms; without one, against the
// receipt.
func TestServerNow(t *testing.T) {
	received := time.Date(2026, 12, 7, 15, 0, 0, 700e6, time.UTC) // shadows the file's
	server := time.Date(2026, 12, 7, 14, 59, 57, 0, time.UTC)     // 3.7 s behind
	tests := []struct {
		name      string
		dates     []string
		want      time.Time
		wantDated bool
	}{
		{"IMF-fixdate", []string{"Mon, 07 Dec 2026 14:59:57 GMT"}, server, true},
		{"RFC 850", []string{"Monday, 07-Dec-26 14:59:57 GMT"}, server, true},
		{"asctime", []string{"Mon Dec  7 14:59:57 2026"}, server, true},
		{"spaces around", []string{"  Mon, 07 Dec 2026 14:59:57 GMT "}, server, true},
		{"the first that parses", []string{"yesterday", "Mon, 07 Dec 2026 14:59:57 GMT"}, server, true},
		{"none", nil, received, false},
		{"malformed", []string{"1733583597"}, received, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, d := range tt.dates {
			h.Add("Date", d)
		}
		got, dated := ServerNow(h, received)
		if !got.Equal(tt.want) || dated != tt.wantDated {
			t.Errorf("%s: ServerNow = %v, %v; want %v, %v", tt.name, got, dated, tt.want, tt.wantDated)
		}
	}
}

func TestIsDelaySeconds(t *testing.T) {
	for v, want := range map[string]bool{
		"120": true, " 0 ": true, "99999999999999999999999": true,
		"Mon, 07 Dec 2026 14:59:57 GMT": false, "1.5": false, "-1": false, "": false, "2s": false,
	} {
		if got := IsDelaySeconds(v); got != want {
			t.Errorf("IsDelaySeconds(%q) = %v, want %v", v, got, want)
		}
	}
}
