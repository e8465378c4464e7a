package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// This file holds the plain-text summaries the command line prints right
// after a check or an inference (report's table format renders stored
// files): one function per result type, over the real types.

// WriteTableFrom prints a borderless table (WriteTable) whose columns from
// numFrom on are right-aligned.
func WriteTableFrom(w io.Writer, header []string, rows [][]string, numFrom int) {
	align := []byte(strings.Repeat("l", len(header)))
	for i := numFrom; i < len(align); i++ {
		align[i] = 'r'
	}
	WriteTable(w, header, rows, string(align))
}

// TextOptions configure the plain-text summaries (WriteVerdict,
// WriteInference). The zero value writes no colour.
type TextOptions struct {
	// Color adds ANSI colours — the verdict word, each finding's severity,
	// the inferred family — as Table does; the caller decides (a terminal,
	// --color, NO_COLOR, FORCE_COLOR).
	Color bool
}

// paint wraps s in an ANSI colour when colour is on.
func (o TextOptions) paint(code, s string) string {
	if !o.Color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// severityColor is the colour of a finding's severity.
var severityColor = map[verify.Severity]string{
	verify.SeverityError: ansiRed, verify.SeverityWarning: ansiYellow, verify.SeverityInfo: ansiDim,
}

// verdictColor is the colour of a verdict word.
var verdictColor = map[string]string{
	verify.VerdictPass: ansiBold + ansiGreen, verify.VerdictFail: ansiBold + ansiRed, verify.VerdictIncomplete: ansiBold + ansiYellow,
}

// WriteVerdict prints a check or analyze document for people: the verdict
// line first, each finding with its hint and evidence, the notes, then the
// policy (described in one line), the targets and the record file.
func WriteVerdict(w io.Writer, rep *verify.Report, policy string, opt TextOptions) error {
	var b strings.Builder
	word, rest, _ := strings.Cut(VerdictLine(rep), ":")
	b.WriteString(opt.paint(verdictColor[rep.Verdict], word+":") + rest + "\n")
	for _, fd := range rep.Findings {
		who := ""
		if fd.Client != "" {
			who = " client " + fd.Client
		}
		check := ""
		if fd.Check != "" {
			check = " [" + fd.Check + "]"
		}
		sev := fmt.Sprintf("%-7s", fd.Severity)
		fmt.Fprintf(&b, "  %s %-8s %s%s%s: %s\n", opt.paint(severityColor[fd.Severity], sev), fd.Certainty, fd.ID, check, who, fd.Message)
		if fd.Hint != "" {
			fmt.Fprintf(&b, "          hint: %s\n", fd.Hint)
		}
		if n := len(fd.Evidence.Refs); n > 0 {
			refs := fd.Evidence.Refs
			more := ""
			if n > 6 {
				refs, more = refs[:6], fmt.Sprintf(" … (%d)", fd.Evidence.Count)
			}
			fmt.Fprintf(&b, "          evidence: %s%s\n", strings.Join(refs, " "), more)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	fmt.Fprintf(&b, "policy: %s\n", policy)
	if len(rep.Targets) > 0 {
		fmt.Fprintf(&b, "targets: %s\n", strings.Join(rep.Targets, ", "))
	}
	if rep.RecordFile != "" {
		fmt.Fprintf(&b, "record: %s\n", rep.RecordFile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// VerdictLine is a verdict in one line: PASS, FAIL with the failing
// findings, or INCOMPLETE, and how many findings fall below the fail level
// or are only possible.
func VerdictLine(rep *verify.Report) string {
	var failing, certain, possible []string
	for _, fd := range rep.Findings {
		switch {
		case fd.Certainty == verify.Certain && fd.Severity.AtLeast(rep.FailOn()):
			if !slices.Contains(failing, fd.ID) {
				failing = append(failing, fd.ID)
			}
		case fd.Certainty == verify.Certain:
			certain = append(certain, fd.ID)
		default:
			possible = append(possible, fd.ID)
		}
	}
	var also []string
	if n := len(certain); n > 0 {
		also = append(also, fmt.Sprintf("%d below --fail-on %s", n, rep.FailOn()))
	}
	if n := len(possible); n > 0 {
		also = append(also, fmt.Sprintf("%d possible", n))
	}
	rest := ""
	if len(also) > 0 {
		rest = "; also " + strings.Join(also, ", ")
	}
	switch rep.Verdict {
	case verify.VerdictFail:
		return fmt.Sprintf("FAIL: %s%s", strings.Join(failing, ", "), rest)
	case verify.VerdictIncomplete:
		return fmt.Sprintf("INCOMPLETE: the suite did not finish; no certain finding at or above %s so far%s", rep.FailOn(), rest)
	}
	if len(rep.Findings) == 0 {
		return "PASS: the target kept the policy; no finding"
	}
	return fmt.Sprintf("PASS: no certain finding at or above %s%s", rep.FailOn(), rest)
}

// WriteInference prints an inference for people; identities is how many
// client identities infer had (an unknown key is explained by it).
func WriteInference(w io.Writer, inf *infer.Inference, identities int, opt TextOptions) error {
	var b strings.Builder
	writeFamily(&b, inf, opt)
	fmt.Fprintf(&b, "fit: %s\n", FitLine(inf))
	for _, m := range inf.Misses {
		fmt.Fprintf(&b, "  misses %s: expected %s, observed %s\n", m.Experiment, m.Expected, m.Observed)
	}
	writeParams(&b, inf)
	if in := inf.Instances; in != nil {
		fmt.Fprintf(&b, "instances: %s (the parameters above are one instance's)\n", instancesWords(in))
	}
	if oa := inf.OverAdmission; oa != nil {
		fmt.Fprintf(&b, "over-admission: %s (a counter not updated atomically): %s\n", overAdmissionWords(oa), oa.Evidence)
	}
	if inf.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", inf.Note)
	}
	fmt.Fprintf(&b, "key: %s\n", inf.Key)
	if inf.Key == infer.KeyUnknown {
		if identities < 2 {
			b.WriteString("  (one client identity: --clients 2 with --client-header NAME or --source-ips tests it)\n")
		} else {
			b.WriteString("  (the second identity's requests could not tell a shared quota from one per client)\n")
		}
	}
	if inf.RejectStatus != nil {
		fmt.Fprintf(&b, "reject status: %d\n", *inf.RejectStatus)
	}
	fmt.Fprintf(&b, "headers: %s\n", strings.Join(inf.Headers, ", "))
	switch {
	case !inf.RetryAfter.Sent:
		b.WriteString("Retry-After: not sent\n")
	case inf.RetryAfter.Honest == nil && inf.Fit != infer.FitExact:
		b.WriteString("Retry-After: sent (not judged: no exact answer to judge it by)\n")
	case inf.RetryAfter.Honest == nil:
		b.WriteString("Retry-After: sent\n")
	case *inf.RetryAfter.Honest:
		b.WriteString("Retry-After: sent, honest\n")
	default:
		b.WriteString("Retry-After: sent, dishonest (a retry at the advertised time fails, or would have passed well before it)\n")
	}
	if len(inf.Alternatives) > 0 {
		b.WriteString("alternatives:\n")
		for _, a := range inf.Alternatives {
			fmt.Fprintf(&b, "  %s (%.1f%%): %s\n", a.Algorithm, a.Reproduced*100, a.RuledOutBy)
		}
	}
	fmt.Fprintf(&b, "%d requests in %s", inf.Requests, units.HumanDuration(units.Seconds(inf.DurationS)))
	if !inf.Complete {
		b.WriteString(" — incomplete: the budget ended first")
	}
	fmt.Fprintf(&b, "\nrecord: %s\n", inf.RecordFile)
	_, err := io.WriteString(w, b.String())
	return err
}

// FamilyName is the family an inference names, or, when none fits, "no
// family fits (closest X)" (or "(no model is left)").
func FamilyName(inf *infer.Inference) string {
	if inf.Algorithm == "" {
		return fmt.Sprintf("no family fits (%s)", inf.ClosestPhrase())
	}
	return string(inf.Algorithm)
}

// FitLine says how far an inference is to be trusted, for people: the
// fit, the share of outcomes reproduced and, for an exact fit, the
// experiment that validated it.
func FitLine(inf *infer.Inference) string {
	pct := fmt.Sprintf("%.1f%% of the outcomes reproduced", inf.Reproduced*100)
	switch inf.Fit {
	case infer.FitExact:
		if inf.Validation != "" {
			return fmt.Sprintf("exact, %s; validated by %s", pct, inf.Validation)
		}
		return "exact, " + pct
	case infer.FitApproximate:
		return fmt.Sprintf("approximate, %s, but not validated by an experiment it was not fitted on", pct)
	case infer.FitMisfit:
		if inf.Closest == "" {
			return "misfit: no family fits, and no model is left to come closest"
		}
		return fmt.Sprintf("misfit: no family fits; the closest, %s, reproduces %s", inf.Closest, pct)
	}
	return pct
}

// writeFamily writes the inferred family and the families that fit as
// well.
func writeFamily(b *strings.Builder, inf *infer.Inference, opt TextOptions) {
	name := opt.paint(ansiBold+ansiCyan, FamilyName(inf))
	switch inf.Algorithm {
	case infer.TokenBucket:
		name += " (or GCRA, or nginx limit_req nodelay: they decide alike)"
	case infer.LeakyBucketQueue:
		name += " (accepted requests are queued, as nginx limit_req without nodelay)"
	}
	fmt.Fprintf(b, "algorithm: %s\n", name)
	var tied []string
	for _, a := range inf.Alternatives {
		if a.Reproduced >= inf.Reproduced {
			tied = append(tied, string(a.Algorithm))
		}
	}
	if len(tied) > 0 && inf.Algorithm != infer.None && inf.Algorithm != "" { // none is decided by what was never refused, not by a fit
		fmt.Fprintf(b, "  undecided: %s fit as well\n", strings.Join(tied, ", "))
	}
}

// writeParams writes the inferred parameters, with nginx's words where
// they apply.
func writeParams(b *strings.Builder, inf *infer.Inference) {
	param := func(label string, p *infer.Param, unit string) {
		if p == nil {
			return
		}
		if p.Low == p.High {
			fmt.Fprintf(b, "%s: %s%s\n", label, units.HumanNumber(p.Value), unit)
			return
		}
		fmt.Fprintf(b, "%s: %s%s (fits from %s to %s)\n", label, units.HumanNumber(p.Value), unit, units.HumanNumber(p.Low), units.HumanNumber(p.High))
	}
	param("limit", inf.Params.Limit, " requests")
	param("window", inf.Params.WindowS, " s")
	param("rate", inf.Params.RatePerS, "/s")
	param("capacity", inf.Params.Capacity, "")
	if c := inf.Params.Capacity; c != nil && (inf.Algorithm == infer.TokenBucket || inf.Algorithm == infer.LeakyBucketQueue) {
		fmt.Fprintf(b, "  (nginx burst=%s)\n", units.HumanNumber(c.Value-1))
	}
	param("served at once", inf.Params.Undelayed, "")
	if u := inf.Params.Undelayed; u != nil {
		fmt.Fprintf(b, "  (nginx delay=%s)\n", units.HumanNumber(u.Value-1))
	}
	param("queued", inf.Params.Queue, "")
	param("forgets an idle key after", inf.Params.IdleS, " s")
	if pen := inf.Penalty; pen != nil {
		fmt.Fprintf(b, "penalty: %s\n", pen.Kind)
		param("  block", pen.DurationS, " s")
	}
	for _, q := range inf.Quirks {
		fmt.Fprintf(b, "quirk: %s\n", q)
	}
	if inf.MaxRatePerS != nil {
		fmt.Fprintf(b, "no limiting observed: up to %s accepted requests per second\n", units.HumanNumber(*inf.MaxRatePerS))
	}
	if inf.Alignment != nil {
		fmt.Fprintf(b, "windows aligned to: %s\n", *inf.Alignment)
	}
	if inf.CountsRejected != nil {
		fmt.Fprintf(b, "rejected requests count: %v\n", *inf.CountsRejected)
	}
}
