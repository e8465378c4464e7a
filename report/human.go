package report

import (
	"math"
	"strconv"
	"time"
)

// The one display format for people. These wrap what package units will
// provide (units.HumanNumber, HumanRate, HumanDuration).

// humanNumber formats v with at most 4 significant digits, no exponent.
func humanNumber(v float64) string {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	e := math.Floor(math.Log10(math.Abs(v)))
	p := math.Pow(10, 3-e)
	return strconv.FormatFloat(math.Round(v*p)/p, 'f', -1, 64)
}

// humanRate formats requests per second: "5/s", "0.5/s", "12/m".
func humanRate(r float64) string {
	if r > 0 && r < 1 {
		if m := r * 60; math.Abs(m-math.Round(m)) < 1e-9 {
			return strconv.FormatFloat(math.Round(m), 'f', -1, 64) + "/m"
		}
	}
	return humanNumber(r) + "/s"
}

// humanDuration formats a duration for people: 60s, 1.5s, 250ms, 2m0s.
func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
