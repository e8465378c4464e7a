package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// VerdictWord returns the verdict in capitals for the first line of a
// report: PASS, FAIL, INCOMPLETE or NO VERDICT.
func (in *Input) VerdictWord() string {
	switch in.Verdict() {
	case VerdictPass:
		return "PASS"
	case VerdictFail:
		return "FAIL"
	case VerdictIncomplete:
		return "INCOMPLETE"
	}
	return "NO VERDICT"
}

// VerdictLine returns the report's one-line verdict, without the verdict
// word: why, what else was found, how much traffic, what was inferred.
func (in *Input) VerdictLine() string {
	var parts []string
	fs := in.Findings()
	var failing, possible, warnings, infos int
	var ids []string
	for i := range fs {
		f := &fs[i]
		switch {
		case f.Fails():
			failing++
			if !slices.Contains(ids, f.ID) {
				ids = append(ids, f.ID)
			}
		case f.Severity == SeverityError:
			possible++
		case f.Severity == SeverityWarning:
			warnings++
		default:
			infos++
		}
	}
	switch in.Verdict() {
	case VerdictFail:
		s := plural(failing, "certain error")
		if len(ids) > 3 {
			ids = append(ids[:3], "…")
		}
		if len(ids) > 0 {
			s += " (" + strings.Join(ids, ", ") + ")"
		}
		parts = append(parts, s)
	case VerdictPass:
		parts = append(parts, "no certain error")
	case VerdictIncomplete:
		s := "the checks did not finish"
		if failing > 0 {
			s += "; " + plural(failing, "certain error")
		}
		parts = append(parts, s)
	default:
		parts = append(parts, "no check or analyze document stored")
	}
	if possible > 0 {
		parts = append(parts, plural(possible, "possible error"))
	}
	if warnings > 0 {
		parts = append(parts, plural(warnings, "warning"))
	}
	if infos > 0 {
		parts = append(parts, plural(infos, "note"))
	}
	if len(in.Agents) > 0 {
		s := in.Summary()
		t := fmt.Sprintf("%s (%d accepted", plural(s.Scheduled, "request"), s.Accepted)
		if s.Delayed > 0 {
			t += fmt.Sprintf(" of which %d delayed", s.Delayed)
		}
		t += fmt.Sprintf(", %d rejected", s.Rejected)
		if n := s.Other + s.Errors + s.NotSent; n > 0 {
			t += fmt.Sprintf(", %d other", n)
		}
		t += ") in " + fmtSeconds(s.DurationS)
		parts = append(parts, t)
	}
	if len(in.Inferences) > 0 {
		inf := &in.Inferences[len(in.Inferences)-1]
		parts = append(parts, "inferred "+inf.Algorithm)
	}
	return strings.Join(parts, " · ")
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// fmtSeconds formats seconds as a duration rounded for people.
func fmtSeconds(s float64) string {
	return fmtDuration(time.Duration(math.Round(s * 1e9)))
}

// FormatMicros formats a duration of us microseconds for people: below a
// millisecond exactly (850µs), below a second to 0.1 ms (1.2ms), else to
// 10 ms (2.35s).
func FormatMicros(us int64) string {
	d := time.Duration(us) * time.Microsecond
	switch {
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// fmtNum formats a float without needless digits (4 significant).
func fmtNum(v float64) string {
	return strconv.FormatFloat(round4(v), 'f', -1, 64)
}

// fmtEstimate formats an inferred parameter: "10", "10 (9–11)".
func fmtEstimate(e *Estimate) (value, interval string) {
	if e == nil {
		return "", ""
	}
	value = fmtNum(e.Value)
	if e.Low != e.Value || e.High != e.Value {
		interval = fmtNum(e.Low) + "–" + fmtNum(e.High)
	}
	return value, interval
}

// estimateRows lists an inference's parameters as name, value, interval.
func estimateRows(inf *Inference) [][3]string {
	var rows [][3]string
	add := func(name string, e *Estimate) {
		if e != nil {
			v, iv := fmtEstimate(e)
			rows = append(rows, [3]string{name, v, iv})
		}
	}
	p := inf.Params
	add("limit", p.Limit)
	add("window_s", p.WindowS)
	add("rate_per_s", p.RatePerS)
	add("capacity", p.Capacity)
	add("undelayed", p.Undelayed)
	add("queue", p.Queue)
	if inf.MaxRatePerS != nil {
		rows = append(rows, [3]string{"max_rate_per_s", fmtNum(*inf.MaxRatePerS), ""})
	}
	if inf.Alignment != nil {
		rows = append(rows, [3]string{"alignment", *inf.Alignment, ""})
	}
	if inf.CountsRejected != nil {
		rows = append(rows, [3]string{"counts_rejected", strconv.FormatBool(*inf.CountsRejected), ""})
	}
	if inf.Key != nil && *inf.Key != "" {
		rows = append(rows, [3]string{"key", *inf.Key, ""})
	}
	if inf.RejectStatus != nil {
		rows = append(rows, [3]string{"reject_status", strconv.Itoa(*inf.RejectStatus), ""})
	}
	if len(inf.Headers) > 0 {
		rows = append(rows, [3]string{"headers", strings.Join(inf.Headers, ", "), ""})
	}
	if ra := inf.RetryAfter; ra != nil {
		s := "not sent"
		if ra.Sent {
			s = "sent"
			switch {
			case ra.Honest == nil:
				s += ", not judged"
			case *ra.Honest:
				s += ", honest"
			default:
				s += ", dishonest"
			}
		}
		rows = append(rows, [3]string{"retry_after", s, ""})
	}
	return rows
}
