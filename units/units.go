// Package units is rlprobe's one grammar for rates and durations: how they
// are written in flags, files and documents, and how they are shown to
// people.
//
// A rate is a number of requests per unit of time, written N/s, N/m, N/h or
// in nginx's spelling Nr/s, Nr/m, with N a positive decimal number ("10/s",
// "1.5/m", "30r/m"); in Go it is a float64 in requests per second. A
// duration is written in Go syntax ("500ms", "1.5s", "2m"). Bare numbers are
// refused with a hint in both, because their unit would be a guess.
//
// The Parse and Format functions round-trip: ParseRate(FormatRate(r)) == r
// for every positive finite r. The Human functions are for display only
// (4 significant digits) and are not meant to be parsed back exactly.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rateForms is the grammar, spelled for error messages.
const rateForms = "N/s, N/m, N/h, Nr/s or Nr/m with N a positive decimal number (for example 10/s, 1.5/m, 30r/m)"

// ParseRate parses a rate into requests per second. Surrounding white space
// is ignored. "1r/m" gives 1/60: limiters that work in nginx's integer
// arithmetic truncate it themselves.
func ParseRate(s string) (float64, error) {
	str := strings.TrimSpace(s)
	num, unit, ok := strings.Cut(str, "/")
	if !ok {
		if isDecimal(str) {
			return 0, fmt.Errorf("rate %q has no unit: write it like %s/s, %s/m or %s/h", s, str, str, str)
		}
		return 0, fmt.Errorf("invalid rate %q: write %s", s, rateForms)
	}
	var per float64
	switch unit {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("invalid rate %q: the unit must be /s, /m or /h", s)
	}
	if n, nginx := strings.CutSuffix(num, "r"); nginx {
		if unit == "h" {
			return 0, fmt.Errorf("invalid rate %q: nginx rates are Nr/s or Nr/m; write %s/h", s, n)
		}
		num = n
	}
	if !isDecimal(num) {
		return 0, fmt.Errorf("invalid rate %q: %q is not a decimal number; write %s", s, num, rateForms)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid rate %q: %q is out of range", s, num)
	}
	if v == 0 {
		return 0, fmt.Errorf("invalid rate %q: a rate must be positive, for example 5/s", s)
	}
	return v / per, nil
}

// isDecimal reports whether s is digits with an optional fractional part
// ("5", "1.5"; not "", ".5", "5.", "1e3", "+1").
func isDecimal(s string) bool {
	intPart, frac, hasDot := strings.Cut(s, ".")
	digits := func(x string) bool {
		if x == "" {
			return false
		}
		for i := 0; i < len(x); i++ {
			if x[i] < '0' || x[i] > '9' {
				return false
			}
		}
		return true
	}
	return digits(intPart) && (!hasDot || digits(frac))
}

// FormatRate formats a rate in requests per second in the grammar ParseRate
// reads, exactly: N/s, unless N/m or N/h is much shorter (1/m rather than
// 0.016666666666666666/s). A non-positive or non-finite rate is formatted
// as N/s, which ParseRate refuses.
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

// ParseDuration parses a duration in Go syntax ("500ms", "1.5s", "2m").
// Surrounding white space is ignored; a bare number is refused with a hint.
func ParseDuration(s string) (time.Duration, error) {
	str := strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(str, 64); err == nil {
		return 0, fmt.Errorf("duration %q has no unit: write it like %ss or %sms", s, str, str)
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use Go syntax such as 500ms, 1.5s, 2m", s)
	}
	return d, nil
}

// FormatDuration formats a duration in Go syntax, exactly (ParseDuration
// reads it back): "1.5s", "2m0s", "0s".
func FormatDuration(d time.Duration) string { return d.String() }

// HumanNumber formats v for people: at most 4 significant digits, no
// exponent for ordinary magnitudes, no float noise (40.90909090909091 →
// "40.91", 1361.4 → "1361", 0.0004567 → "0.0004567").
func HumanNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	r := round4(v)
	if a := math.Abs(r); a >= 1e4 {
		return strconv.FormatFloat(math.Round(r), 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// round4 rounds v to 4 significant digits (at least to whole units).
func round4(v float64) float64 {
	if v == 0 {
		return 0
	}
	e := math.Floor(math.Log10(math.Abs(v)))
	if e >= 3 {
		return math.Round(v)
	}
	p := math.Pow(10, 3-e)
	return math.Round(v*p) / p
}

// HumanRate formats a rate in requests per second for people: "5/s",
// "40.91/s", and "12/m" or "2/h" when the rate is below one per second and
// whole per minute or per hour.
func HumanRate(r float64) string {
	if r > 0 && r < 1 {
		for _, u := range []struct {
			unit string
			per  float64
		}{{"/m", 60}, {"/h", 3600}} {
			if m := r * u.per; math.Abs(m-math.Round(m)) < 1e-9*m {
				return strconv.FormatFloat(math.Round(m), 'f', -1, 64) + u.unit
			}
		}
	}
	return HumanNumber(r) + "/s"
}

// Count writes n and noun for people, the noun with an s unless n is 1:
// "1 request", "3 requests", "0 clients".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// HumanDuration formats a duration for people, rounded to what matters at
// its scale: "250µs", "1.5ms", "1.234s", "2m0s".
func HumanDuration(d time.Duration) string {
	switch a := d.Abs(); {
	case d == 0:
		return "0s"
	case a < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case a < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case a < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Seconds converts seconds (as in a document's _s fields) to a duration,
// rounded to the nanosecond and clamped to what a time.Duration holds.
func Seconds(s float64) time.Duration {
	switch ns := math.Round(s * 1e9); {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	default:
		return time.Duration(ns)
	}
}
