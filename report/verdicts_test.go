package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/verify"
)

// twoVerdictsRun is the bucket run with two analyze verdicts appended, as
// two `analyze --append` runs would leave it: first a FAIL under a strict
// window policy (at +20 s), then a PASS under the bucket policy (at +60
// s). Issue 12 item 4: they are two verdicts, never one FAIL.
func twoVerdictsRun(withTimes bool) synth {
	s := bucketRun()
	s.findings = nil
	failAt, passAt := start0.Add(20*time.Second), start0.Add(60*time.Second)
	doc := func(verdict, policy string, at time.Time, fs []verify.Finding) map[string]any {
		d := map[string]any{"schema": verify.SchemaAnalyze, "tool": "rlprobe v0.0.0-test", "verdict": verdict,
			"complete": true, "pass": verdict == "pass", "targets": []string{"http://127.0.0.1:9090/"},
			"policy": json.RawMessage(policy), "findings": fs, "record_file": "run1.jsonl"}
		if withTimes {
			d["time"] = at
		}
		return d
	}
	bound := int64(3)
	s.findings = []any{
		doc("fail", policyOf(`{"limit":3,"window":"10s"}`), failAt, []verify.Finding{{
			ID: verify.IDWindowLimitExceeded, Severity: verify.SeverityError, Certainty: verify.Certain, Check: "sustained",
			Endpoint: "/", Message: "21 accepted requests certainly arrived within 10s; the policy allows 3",
			Evidence: verify.Evidence{Refs: []string{"agent-1:0"}, StartNS: ms, EndNS: 9000 * ms, Count: 21, Bound: &bound},
		}}),
		doc("pass", bucketPolicy, passAt, []verify.Finding{}),
	}
	return s
}

// TestVerdictsNeverSummed: a record file holding a FAIL under one policy
// and a later PASS under another shows two verdicts, latest first, each
// with its policy and time, in every format; the report's verdict is the
// latest one's, and no format counts the FAIL's error as the report's.
func TestVerdictsNeverSummed(t *testing.T) {
	for _, withTimes := range []bool{true, false} {
		path := writeRun(t, t.TempDir(), "run1.jsonl", twoVerdictsRun(withTimes))
		in, err := ReadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		in.Tool = "rlprobe v0.0.0-test"
		// Latest first: by time, or (without times) the line appended last.
		var got []string
		for i := range in.Verdicts {
			v := &in.Verdicts[i]
			got = append(got, v.Report.Verdict+" under "+v.Report.Policy.String()+" at "+verdictTime(v.Time))
		}
		passAt, failAt := "2025-03-01T12:01:00Z", "2025-03-01T12:00:20Z"
		if !withTimes {
			passAt, failAt = "time unknown", "time unknown"
		}
		want := []string{"pass under rate 2/s, capacity 4 at " + passAt, "fail under 3 in any 10s at " + failAt}
		if !slices.Equal(got, want) {
			t.Fatalf("times %v: verdicts = %q, want %q", withTimes, got, want)
		}
		if in.Verdict() != verify.VerdictPass {
			t.Errorf("times %v: Verdict() = %s, want the latest: pass", withTimes, in.Verdict())
		}

		var table bytes.Buffer
		if err := Table(&table, in, TableOptions{Width: 120}); err != nil {
			t.Fatal(err)
		}
		text := table.String()
		first, _, _ := strings.Cut(text, "\n")
		if !strings.HasPrefix(first, "PASS: no certain error · 1 earlier verdict") || strings.Contains(first, "certain error (") {
			t.Errorf("times %v: first line %q: want the latest verdict alone, PASS, and the earlier one counted apart", withTimes, first)
		}
		for _, w := range []string{
			"Verdicts (2, latest first)",
			"PASS     " + passAt + "  rate 2/s, capacity 4",
			"FAIL     " + failAt + "  3 in any 10s",
			"Findings of verdict 2 of 2: FAIL under 3 in any 10s at " + failAt + " (1)",
		} {
			if !strings.Contains(text, w) {
				t.Errorf("times %v: table lacks %q:\n%s", withTimes, w, text)
			}
		}
		if strings.Index(text, "PASS     ") > strings.Index(text, "FAIL     ") {
			t.Errorf("times %v: the PASS is not listed first:\n%s", withTimes, text)
		}

		var md bytes.Buffer
		if err := Markdown(&md, in); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(md.String(), "### ✅ rlprobe: PASS") ||
			!strings.Contains(md.String(), "| PASS | "+passAt+" | rate 2/s, capacity 4 | no certain error |") ||
			!strings.Contains(md.String(), "| FAIL | "+failAt+" | 3 in any 10s | 1 certain error (window-limit-exceeded) |") ||
			!strings.Contains(md.String(), "| ❌ | 2 | error (certain) | `window-limit-exceeded`") {
			t.Errorf("times %v: markdown:\n%s", withTimes, md.String())
		}

		d, err := in.Document()
		if err != nil {
			t.Fatal(err)
		}
		var verdicts []string
		for _, raw := range d.Checks {
			var c struct{ Verdict string }
			json.Unmarshal(raw, &c)
			verdicts = append(verdicts, c.Verdict)
		}
		if d.Verdict != "pass" || !slices.Equal(verdicts, []string{"pass", "fail"}) {
			t.Errorf("times %v: document verdict %s, checks %v; want pass, [pass fail]", withTimes, d.Verdict, verdicts)
		}

		// JUnit: the suites of each verdict are apart and name it; only the
		// FAIL's suite fails.
		var ju bytes.Buffer
		if err := JUnit(&ju, in); err != nil {
			t.Fatal(err)
		}
		var doc junitSuites
		if err := xml.Unmarshal(ju.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		failing := 0
		for _, s := range doc.Suites {
			if !strings.Contains(s.Name, " — verdict ") {
				t.Errorf("times %v: suite %q does not name its verdict", withTimes, s.Name)
			}
			if s.Failures > 0 {
				failing++
				if !strings.Contains(s.Name, "verdict 2 of 2: FAIL under 3 in any 10s") {
					t.Errorf("times %v: failing suite %q is not the FAIL verdict's", withTimes, s.Name)
				}
			}
		}
		if failing != 1 || doc.Failures != 1 {
			t.Errorf("times %v: %d failing suites, %d failures; want 1 and 1", withTimes, failing, doc.Failures)
		}

		var page bytes.Buffer
		if err := HTML(&page, in); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page.String(), "<h2>Verdicts (2) and findings (1)</h2>") ||
			strings.Index(page.String(), "v-pass\">PASS</span>"+passAt) > strings.Index(page.String(), "v-fail\">FAIL</span>"+failAt) {
			t.Errorf("times %v: the HTML page does not list the two verdicts, latest first", withTimes)
		}
	}
}

// suiteBurstOnly is a `check --only burst` record file: the suite sent the
// burst alone, and the check document found nothing.
func suiteBurstOnly() synth {
	s := synth{header: header("", policyOf(`{"limit":5,"window":"10s"}`), "http://127.0.0.1:8080/")}
	for i := int64(0); i < 8; i++ {
		st := 200
		if i >= 5 {
			st = 429
		}
		r := response(i, "", ms+i*ms, ms, st, nil)
		r.Phase = verify.CheckBurst
		s.results = append(s.results, r)
	}
	s.end = &record.End{Reason: record.ReasonCompleted, Scheduled: 8, Sent: 8}
	s.findings = []any{map[string]any{"schema": verify.SchemaCheck, "tool": "rlprobe v0.0.0-test", "verdict": "pass",
		"complete": true, "pass": true, "targets": []string{"http://127.0.0.1:8080/"},
		"policy": json.RawMessage(policyOf(`{"limit":5,"window":"10s"}`)), "findings": []verify.Finding{}}}
	return s
}

// TestJUnitSkipsChecksThatNeverRan (issue 15): with --only burst, the
// other checks never ran; JUnit lists their cases as skipped with the
// reason, never as passed. The burst cases and the header cases (judged
// on every response) pass.
func TestJUnitSkipsChecksThatNeverRan(t *testing.T) {
	in, err := ReadFiles(writeRun(t, t.TempDir(), "only-burst.jsonl", suiteBurstOnly()))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := JUnit(&b, in); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			check := strings.TrimPrefix(c.Classname, "rlprobe.")
			ran := check == verify.CheckBurst || check == verify.CheckHeaders
			switch {
			case ran && c.Skipped != nil:
				t.Errorf("%s (%s): skipped, but the check ran", c.Name, check)
			case !ran && c.Skipped == nil:
				t.Errorf("%s (%s): listed as passed, but the check never ran", c.Name, check)
			case !ran && !strings.Contains(c.Skipped.Message, "no request of the "+check+" check"):
				t.Errorf("%s (%s): skipped without the reason: %q", c.Name, check, c.Skipped.Message)
			}
			checked++
		}
	}
	notRun := 0
	for _, id := range verify.SuiteFindingIDs {
		if c := verify.DefaultCheck(id); c != verify.CheckBurst && c != verify.CheckHeaders {
			notRun++
		}
	}
	if checked != len(verify.SuiteFindingIDs) || notRun == 0 || doc.Skipped != notRun {
		t.Errorf("%d cases, %d skipped; want %d cases, %d skipped", checked, doc.Skipped, len(verify.SuiteFindingIDs), notRun)
	}
}

// rawFloat matches a number printed with float noise: five or more
// decimals.
var rawFloat = regexp.MustCompile(`\d\.\d{5,}`)

// TestOneNumberFormat (issue 15): rates, confidences, parameters and
// bounds that are not round print in the one display format (4
// significant digits) in every format for people — never as a raw float
// such as 40.90909090909091.
func TestOneNumberFormat(t *testing.T) {
	noisy := 40.90909090909091
	s := synth{header: header("", policyOf(`{"rate":"40.90909090909091/s","capacity":3}`), "http://127.0.0.1:8080/")}
	for i := int64(0); i < 11; i++ {
		r := response(i, "", ms+i*22*ms, ms, 200, nil)
		r.Sched = r.Sent - 1234567 // a late send: pacing error 1.234567ms
		s.results = append(s.results, r)
	}
	s.end = &record.End{Reason: record.ReasonCompleted, Scheduled: 11, Sent: 11}
	conf, rate := 0.4090909090909091, infer.Param{Value: noisy, Low: noisy - 1.0/3, High: noisy + 2.0/3}
	capacity := infer.Param{Value: 3, Low: 3, High: 3}
	s.inferences = []any{infer.Inference{Schema: infer.Schema, Tool: "rlprobe v0.0.0-test", Algorithm: infer.TokenBucket, Fit: infer.FitExact, Closest: infer.TokenBucket, Misses: []infer.Miss{},
		Params: infer.Params{RatePerS: &rate, Capacity: &capacity}, MaxRatePerS: &noisy, Reproduced: conf,
		Alternatives: []infer.Alternative{{Algorithm: infer.None, Reproduced: 1.0 / 3, RuledOutBy: "x"}},
		Requests:     11, DurationS: 0.22222222222, Complete: true}}
	in, err := ReadFiles(writeRun(t, t.TempDir(), "noisy.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{FormatTable, FormatMarkdown, FormatJUnit, FormatHTML} {
		var b bytes.Buffer
		if err := Render(&b, f, in, TableOptions{Width: 120}); err != nil {
			t.Fatal(err)
		}
		if m := rawFloat.FindAllString(b.String(), 5); m != nil {
			t.Errorf("%s prints raw floats %q", f, m)
		}
		if f != FormatJUnit && !strings.Contains(b.String(), "40.91") {
			t.Errorf("%s does not show the rate as 40.91", f)
		}
	}
}

// TestRaceSummary: the run document counts race releases (sent results of
// one agent and phase sharing a sched) and their spreads, and late sends.
func TestRaceSummary(t *testing.T) {
	s := synth{header: header("", "")}
	a1, a2 := int64(30*ms), int64(31*ms)
	for i, wrote := range []int64{10 * ms, 12 * ms, 15 * ms} {
		r := response(int64(i), "c", 9*ms, ms, 200, nil)
		r.Phase, r.Sched, r.Wrote = "race", 9*ms, wrote
		r.TTFB, r.Done = wrote+ms, wrote+2*ms
		if i == 0 {
			r.Arrival = &a1
		} else if i == 1 {
			r.Arrival = &a2
		}
		s.results = append(s.results, r)
	}
	late := response(3, "c", 50*ms, ms, 200, nil)
	late.Sched = 40 * ms // 10ms late, alone in its release
	s.results = append(s.results, late)
	in, err := ReadFiles(writeRun(t, t.TempDir(), "race.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	sum := in.Summary()
	if sum.Races != 1 || sum.RaceWroteSpread.MaxUS != 5000 || sum.RaceArrivalSpread.MaxUS != 1000 || sum.Late != 1 {
		t.Errorf("races %d, wrote spread %+v, arrival spread %+v, late %d; want 1, 5ms, 1ms, 1",
			sum.Races, sum.RaceWroteSpread, sum.RaceArrivalSpread, sum.Late)
	}
}

// TestHeaderPolicyWarnedOnce: a run policy this rlprobe cannot read is
// warned about once, however often the Input is rendered or added to.
func TestHeaderPolicyWarnedOnce(t *testing.T) {
	s := leakyRun()
	s.header.Policy = json.RawMessage(`{"version":1,"endpoints":[{"limit":3,"window":"1s","colour":"red"}]}`)
	in, err := ReadFiles(writeRun(t, t.TempDir(), "odd.jsonl", s))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := Table(&bytes.Buffer{}, in, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := in.AddDocument(verify.Finding{ID: verify.IDCacheable429, Severity: "error", Certainty: "certain"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(in.Warnings) != 1 || !strings.Contains(in.Warnings[0], "colour") {
		t.Errorf("warnings = %q, want one naming the unknown key", in.Warnings)
	}
}
