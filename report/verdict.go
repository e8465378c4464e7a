package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// verdictWord returns a verdict in capitals: PASS, FAIL, INCOMPLETE or NO
// VERDICT.
func verdictWord(v string) string {
	switch v {
	case verify.VerdictPass:
		return "PASS"
	case verify.VerdictFail:
		return "FAIL"
	case verify.VerdictIncomplete:
		return "INCOMPLETE"
	}
	return "NO VERDICT"
}

// VerdictWord returns the latest verdict in capitals for the first line of
// a report: PASS, FAIL, INCOMPLETE or NO VERDICT.
func (in *Input) VerdictWord() string { return verdictWord(in.Verdict()) }

// tally counts one verdict's findings by how they weigh.
type tally struct {
	failing, possible, warnings, infos int
	ids                                []string // ids of the failing findings, first seen first
}

func tallyOf(fs []verify.Finding) tally {
	var t tally
	for i := range fs {
		f := &fs[i]
		switch {
		case Fails(f):
			t.failing++
			if !slices.Contains(t.ids, f.ID) {
				t.ids = append(t.ids, f.ID)
			}
		case f.Severity == verify.SeverityError:
			t.possible++
		case f.Severity == verify.SeverityWarning:
			t.warnings++
		default:
			t.infos++
		}
	}
	return t
}

// parts says what one verdict found: "1 certain error
// (window-limit-exceeded)", "1 warning", …
func (t tally) parts(verdict string) []string {
	var parts []string
	switch verdict {
	case verify.VerdictFail:
		s := units.Count(t.failing, "certain error")
		ids := t.ids
		if len(ids) > 3 {
			ids = append(slices.Clip(ids[:3]), "…")
		}
		if len(ids) > 0 {
			s += " (" + strings.Join(ids, ", ") + ")"
		}
		parts = append(parts, s)
	case verify.VerdictPass:
		parts = append(parts, "no certain error")
	case verify.VerdictIncomplete:
		s := "the checks did not finish"
		if t.failing > 0 {
			s += "; " + units.Count(t.failing, "certain error")
		}
		parts = append(parts, s)
	}
	if t.possible > 0 {
		parts = append(parts, units.Count(t.possible, "possible error"))
	}
	if t.warnings > 0 {
		parts = append(parts, units.Count(t.warnings, "warning"))
	}
	if t.infos > 0 {
		parts = append(parts, units.Count(t.infos, "note"))
	}
	return parts
}

// VerdictLine returns the report's one-line verdict, without the verdict
// word: what the latest verdict found (never a sum across verdicts), how
// many earlier verdicts are stored, how much traffic, what was inferred.
func (in *Input) VerdictLine() string {
	var parts []string
	if v := in.Latest(); v != nil {
		parts = tallyOf(v.Report.Findings).parts(v.Report.Verdict)
		if n := len(in.Verdicts) - 1; n > 0 {
			parts = append(parts, units.Count(n, "earlier verdict")+" listed below")
		}
	} else {
		parts = append(parts, "no check or analyze document stored")
	}
	if len(in.Agents) > 0 {
		s := in.Summary()
		t := fmt.Sprintf("%s (%d accepted", units.Count(s.Scheduled, "request"), s.Accepted)
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
		parts = append(parts, "inferred "+string(in.Inferences[0].Algorithm))
	}
	return strings.Join(parts, " · ")
}

// verdictTime formats when a verdict was given: RFC 3339 in UTC, to the
// second; "time unknown" for a document without one.
func verdictTime(t time.Time) string {
	if t.IsZero() {
		return "time unknown"
	}
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// verdictRow is one stored verdict in words: its verdict, time, policy
// and what it found.
func verdictRow(v *Verdict) []string {
	found := strings.Join(tallyOf(v.Report.Findings).parts(v.Report.Verdict), ", ")
	return []string{verdictWord(v.Report.Verdict), verdictTime(v.Time), v.Report.Policy.String(), found}
}

// verdictTitle names a verdict in a heading: "verdict 2 of 3: PASS under
// POLICY at TIME".
func (in *Input) verdictTitle(i int) string {
	v := &in.Verdicts[i]
	return fmt.Sprintf("verdict %d of %d: %s under %s at %s", i+1, len(in.Verdicts), verdictWord(v.Report.Verdict),
		v.Report.Policy.String(), verdictTime(v.Time))
}

// fmtSeconds formats seconds (a document's _s field) as a duration for
// people.
func fmtSeconds(s float64) string { return units.HumanDuration(units.Seconds(s)) }

// FormatMicros formats a duration of us microseconds (a run document's
// _us fields) for people, in the one display format of units.HumanDuration:
// 850µs, 1.2ms, 2.346s.
func FormatMicros(us int64) string { return units.HumanDuration(time.Duration(us) * time.Microsecond) }

// fmtEstimate formats an inferred parameter: "10", "9–11".
func fmtEstimate(e *infer.Param) (value, interval string) {
	if e == nil {
		return "", ""
	}
	value = units.HumanNumber(e.Value)
	if e.Low != e.Value || e.High != e.Value {
		interval = units.HumanNumber(e.Low) + "–" + units.HumanNumber(e.High)
	}
	return value, interval
}

// estimateRows lists an inference's parameters as name, value, interval.
func estimateRows(inf *infer.Inference) [][3]string {
	var rows [][3]string
	add := func(name string, e *infer.Param) {
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
	add("idle_s", p.IdleS)
	add("phase_s", p.PhaseS)
	if pen := inf.Penalty; pen != nil {
		rows = append(rows, [3]string{"penalty", string(pen.Kind), ""})
		add("penalty duration_s", pen.DurationS)
	}
	if len(inf.Quirks) > 0 {
		qs := make([]string, len(inf.Quirks))
		for i, q := range inf.Quirks {
			qs[i] = string(q)
		}
		rows = append(rows, [3]string{"quirks", strings.Join(qs, ", "), ""})
	}
	if inf.MaxRatePerS != nil {
		rows = append(rows, [3]string{"max_rate_per_s", units.HumanNumber(*inf.MaxRatePerS), ""})
	}
	if inf.Alignment != nil {
		rows = append(rows, [3]string{"alignment", *inf.Alignment, ""})
	}
	if inf.CountsRejected != nil {
		rows = append(rows, [3]string{"counts_rejected", strconv.FormatBool(*inf.CountsRejected), ""})
	}
	if inf.Key != "" {
		rows = append(rows, [3]string{"key", inf.Key, ""})
	}
	if inf.RejectStatus != nil {
		rows = append(rows, [3]string{"reject_status", strconv.Itoa(*inf.RejectStatus), ""})
	}
	if len(inf.Headers) > 0 {
		rows = append(rows, [3]string{"headers", strings.Join(inf.Headers, ", "), ""})
	}
	rows = append(rows, [3]string{"retry_after", retryAfterWords(&inf.RetryAfter), ""})
	if inf.NeverRejects {
		rows = append(rows, [3]string{"never_rejects", "true", ""})
	}
	if oa := inf.OverAdmission; oa != nil {
		rows = append(rows, [3]string{"over_admission", overAdmissionWords(oa), oa.Evidence})
	}
	if in := inf.Instances; in != nil {
		rows = append(rows, [3]string{"instances", instancesWords(in), "params are one instance's"})
	}
	return rows
}

// overAdmissionWords describes a racy counter's over-admission: how many
// a concurrent burst and a paced one admitted.
func overAdmissionWords(oa *infer.OverAdmission) string {
	return fmt.Sprintf("%d at once, %d paced", oa.ConcurrentMax, oa.SequentialMax)
}

// instancesWords describes the limiter instances an inference found: the
// count (with the range the outcomes allow, when they do not fix it) and
// how the balancer spreads requests.
func instancesWords(in *infer.Instances) string {
	count := strconv.Itoa(in.Value)
	if in.Low != in.High {
		count = fmt.Sprintf("%d (%d–%d)", in.Value, in.Low, in.High)
	}
	return count + " by " + in.By
}

// retryAfterWords says what infer judged of Retry-After: "sent, honest
// (exact)", "sent, dishonest (early; true wait 2s)".
func retryAfterWords(ra *infer.RetryAfter) string {
	if !ra.Sent {
		return "not sent"
	}
	s := "sent, dishonest"
	switch {
	case ra.Honest == nil:
		return "sent, not judged"
	case *ra.Honest:
		s = "sent, honest"
	}
	var why []string
	if ra.Grade != nil {
		why = append(why, *ra.Grade)
	}
	if ra.TrueWaitS != nil {
		why = append(why, "true wait "+fmtSeconds(*ra.TrueWaitS))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, "; ") + ")"
	}
	return s
}
