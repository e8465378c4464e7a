package patterns

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ParseRate parses a rate in the contract's syntax — N/s, N/m, N/h, or
// nginx's Nr/s and Nr/m, decimals allowed (0.5/s, 1.5r/m) — into requests
// per second. The rate must be positive. A bare number is refused with a
// hint, because its unit would be a guess.
//
// It is the same grammar as limiter.ParseRate, kept here because patterns
// imports nothing of rlprobe's.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		if isDecimal(s) {
			return 0, fmt.Errorf("patterns: rate %q has no unit: write it like %s/s, %s/m or %s/h", s, s, s, s)
		}
		return 0, fmt.Errorf("patterns: invalid rate %q: write N/s, N/m, N/h, Nr/s or Nr/m (for example 5/s)", s)
	}
	nginx := strings.HasSuffix(num, "r")
	num = strings.TrimSuffix(num, "r")
	var per float64
	switch unit {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		if nginx {
			return 0, fmt.Errorf("patterns: invalid rate %q: nginx rates are Nr/s or Nr/m; write %s/h", s, num)
		}
		per = 3600
	default:
		return 0, fmt.Errorf("patterns: invalid rate %q: the unit must be /s, /m or /h", s)
	}
	if !isDecimal(num) {
		return 0, fmt.Errorf("patterns: invalid rate %q: %q is not a decimal number", s, num)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(n, 0) {
		return 0, fmt.Errorf("patterns: invalid rate %q: %q is out of range", s, num)
	}
	if n == 0 {
		return 0, fmt.Errorf("patterns: invalid rate %q: a rate must be positive", s)
	}
	return n / per, nil
}

// isDecimal reports whether s is digits with at most one decimal point and
// at least one digit.
func isDecimal(s string) bool {
	digits, dot := 0, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}

// FormatRate formats a rate in requests per second in the contract's
// syntax: N/s, unless N/m or N/h is much shorter (1/m rather than
// 0.016666666666666666/s); ParseRate reads the result back as exactly r.
// It formats non-positive or non-finite rates as N/s (which ParseRate
// refuses).
func FormatRate(r float64) string {
	best := strconv.FormatFloat(r, 'f', -1, 64) + "/s"
	if !(r > 0) || math.IsInf(r, 0) {
		return best
	}
	for _, u := range []struct {
		unit string
		per  float64
	}{{"/m", 60}, {"/h", 3600}} {
		s := strconv.FormatFloat(r*u.per, 'f', -1, 64) + u.unit
		if back, err := ParseRate(s); err == nil && back == r && len(s)+2 < len(best) {
			best = s
		}
	}
	return best
}

// ParseDuration parses a duration in Go syntax (500ms, 1.5s, 2m). A bare
// number is refused with a hint, because its unit would be a guess.
func ParseDuration(s string) (time.Duration, error) {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("patterns: duration %q has no unit: write it like %ss or %sms", s, s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("patterns: invalid duration %q: use Go syntax such as 500ms, 1.5s, 2m", s)
	}
	return d, nil
}

// ParseTime parses a wall-clock instant: RFC 3339 (2025-06-01T12:00:00Z,
// fractional seconds allowed), or a time of day HH:MM, HH:MM:SS or
// HH:MM:SS.fff in now's location, meaning its next occurrence at or after
// now. now is only used for times of day.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04"} {
		clock, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		y, m, d := now.Date()
		t := time.Date(y, m, d, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), now.Location())
		if t.Before(now) {
			t = time.Date(y, m, d+1, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), now.Location())
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("patterns: invalid time %q: use RFC 3339 (2025-06-01T12:00:00Z) or a time of day (12:00:05)", s)
}

// NextEdge returns the first instant at or after t at which a window of
// length period begins, windows starting at phase past every multiple of
// period since the Unix epoch (phase 0: windows aligned to the epoch, as
// fixed windows of most servers are). period must be positive.
func NextEdge(t time.Time, period, phase time.Duration) time.Time {
	if period <= 0 {
		return t
	}
	ns := t.UnixNano() - int64(phase)
	rem := ns % int64(period)
	if rem < 0 {
		rem += int64(period)
	}
	if rem == 0 {
		return t
	}
	return t.Add(period - time.Duration(rem))
}

// Rate is a rate in requests per second that reads and writes the
// contract's syntax (5/s, 1r/m) in YAML, JSON and text. The zero value means
// "not set".
type Rate float64

// MarshalText formats the rate with FormatRate.
func (r Rate) MarshalText() ([]byte, error) { return []byte(FormatRate(float64(r))), nil }

// UnmarshalText parses the rate with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = Rate(v)
	return nil
}

// UnmarshalYAML parses a scalar with ParseRate; a bad value is reported with
// its line, and decoding goes on so every problem is reported at once.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "a rate must be a string such as 5/s")
	}
	v, err := ParseRate(n.Value)
	if err != nil {
		return lineError(n, strings.TrimPrefix(err.Error(), "patterns: "))
	}
	*r = Rate(v)
	return nil
}

// Duration is a time.Duration that reads and writes Go syntax (1.5s) in
// YAML, JSON and text, refusing bare numbers. The zero value means "not
// set" (or zero, where zero is allowed).
type Duration time.Duration

// MarshalText formats the duration in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses the duration with ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML parses a scalar with ParseDuration; a bad value is reported
// with its line, and decoding goes on so every problem is reported at once.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return lineError(n, "a duration must be a string such as 1.5s")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return lineError(n, strings.TrimPrefix(err.Error(), "patterns: "))
	}
	*d = Duration(v)
	return nil
}

// lineError is a YAML type error: the decoder collects them and goes on.
func lineError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}
