package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// JUnit XML elements (the schema common to Jenkins, GitLab, GitHub
// reporters).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure"`
	Skipped   *junitSkipped `xml:"skipped"`
	SystemOut *junitText    `xml:"system-out"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit writes the stored verdicts as JUnit XML: for each verdict (latest
// first), one test case per finding rule — every finding id of the
// contract, for every endpoint — grouped in test suites by endpoint and
// check; with several verdicts, each suite names its verdict's policy and
// time, so that verdicts are never merged. A case fails when a finding
// with its id fails the default --fail-on error (certain, severity error);
// the failure carries every such finding with its evidence (interval,
// count, bound, refs, headers). Other findings (warnings, notes, possible
// errors) are listed in the case's system-out, the case passing. A case
// whose check never ran — a check document whose record file holds no
// request of that check (--only, --skip, or a suite cut short) — is
// skipped with the reason, never passed. Without any check or analyze
// document, every case is skipped.
func JUnit(w io.Writer, in *Input) error {
	doc := junitSuites{Name: "rlprobe", Time: "0"}
	if len(in.Verdicts) == 0 {
		doc.add(in.junitVerdict(nil, -1))
	}
	for i := range in.Verdicts {
		doc.add(in.junitVerdict(&in.Verdicts[i], i))
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("report: junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// add appends suites and their counts.
func (d *junitSuites) add(suites []junitSuite) {
	for _, s := range suites {
		d.Suites = append(d.Suites, s)
		d.Tests += s.Tests
		d.Failures += s.Failures
		d.Skipped += s.Skipped
	}
}

// junitVerdict returns the suites of one verdict (v nil: no verdict, every
// case skipped); i is its index among the verdicts.
func (in *Input) junitVerdict(v *Verdict, i int) []junitSuite {
	var fs []verify.Finding
	if v != nil {
		fs = v.Report.Findings
	}
	endpoints := in.endpoints(v)
	ran := in.checksRan(v)
	type key struct{ endpoint, check string }
	suites := map[key]*junitSuite{}
	var order []key
	suite := func(k key) *junitSuite {
		if s, ok := suites[k]; ok {
			return s
		}
		s := &junitSuite{Name: k.check + " (" + k.endpoint + ")", Time: "0",
			Properties: []junitProperty{{"endpoint", k.endpoint}, {"check", k.check}}}
		if v != nil && len(in.Verdicts) > 1 {
			s.Name += " — " + in.verdictTitle(i)
			s.Properties = append(s.Properties, junitProperty{"policy", v.Report.Policy.String()},
				junitProperty{"time", verdictTime(v.Time)})
		}
		suites[k] = s
		order = append(order, k)
		return s
	}
	ids := slices.Clone(verify.SuiteFindingIDs)
	for i := range fs {
		if !slices.Contains(ids, fs[i].ID) {
			ids = append(ids, fs[i].ID) // an id the suite does not raise (limitconf's, watch's)
		}
	}
	for _, ep := range endpoints {
		for _, id := range ids {
			for _, c := range checksOf(fs, ep, id) {
				s := suite(key{ep, c})
				tc := newCase(fs, ep, id, c)
				switch why, skip := ran(c); {
				case v == nil:
					tc.Skipped = &junitSkipped{Message: "no check or analyze document in the record files"}
				case skip && tc.Failure == nil && tc.SystemOut == nil:
					tc.Skipped = &junitSkipped{Message: why}
				}
				if tc.Skipped != nil {
					s.Skipped++
				} else if tc.Failure != nil {
					s.Failures++
				}
				s.Cases = append(s.Cases, tc)
				s.Tests++
			}
		}
	}
	// Suites in endpoint order, then in the order the suite runs checks.
	slices.SortStableFunc(order, func(a, b key) int {
		if a.endpoint != b.endpoint {
			return slices.Index(endpoints, a.endpoint) - slices.Index(endpoints, b.endpoint)
		}
		return checkRank(a.check) - checkRank(b.check)
	})
	out := make([]junitSuite, 0, len(order))
	for _, k := range order {
		out = append(out, *suites[k])
	}
	return out
}

// checksOf returns the checks under which the findings of id at ep are
// listed: those the findings name, else the id's default check.
func checksOf(fs []verify.Finding, ep, id string) []string {
	var checks []string
	for i := range fs {
		if fs[i].Endpoint == ep && fs[i].ID == id && !slices.Contains(checks, checkOf(&fs[i])) {
			checks = append(checks, checkOf(&fs[i]))
		}
	}
	if len(checks) == 0 {
		checks = []string{verify.DefaultCheck(id)}
	}
	return checks
}

// newCase builds the case of finding id at ep under check c: failing
// with the failing findings' evidence, the others in system-out.
func newCase(fs []verify.Finding, ep, id, c string) junitCase {
	tc := junitCase{Name: id, Classname: "rlprobe." + c, Time: "0"}
	var failing, other []string
	first := ""
	for i := range fs {
		f := &fs[i]
		if f.Endpoint != ep || f.ID != id || checkOf(f) != c {
			continue
		}
		if Fails(f) {
			if first == "" {
				first = f.Message
			}
			failing = append(failing, evidenceText(f))
		} else {
			other = append(other, evidenceText(f))
		}
	}
	if len(failing) > 0 {
		tc.Failure = &junitFailure{Message: first, Type: id, Text: strings.Join(failing, "\n\n")}
	}
	if len(other) > 0 {
		tc.SystemOut = &junitText{Text: strings.Join(other, "\n\n")}
	}
	return tc
}

// checksRan returns, for a verdict, whether each check ran: a check
// document's record file must hold a request of the check's phase (a
// request of a "key-spoof/NAME" phase counts for key-spoof); the headers
// check reads every response. An analyze document judges whatever traffic
// it was given, unless that traffic carries check phases: then the same
// rule applies. A check that a finding names ran. The function returns why a check did not run and true, or
// "" and false when it ran.
func (in *Input) checksRan(v *Verdict) func(check string) (string, bool) {
	if v == nil {
		return func(string) (string, bool) { return "", false }
	}
	seen := map[string]bool{}
	for _, q := range in.reqs {
		if v.agent >= 0 && int(q.agent) != v.agent || q.phase == 0 {
			continue
		}
		ph, _, _ := strings.Cut(in.phases[q.phase], "/")
		seen[ph] = true
	}
	for _, f := range v.Report.Findings {
		seen[f.Check] = f.Check != "" // a finding of a check shows that it ran
	}
	phased := false
	for _, c := range verify.Checks {
		phased = phased || seen[c]
	}
	if v.Report.Schema != verify.SchemaCheck && !phased {
		return func(string) (string, bool) { return "", false }
	}
	return func(c string) (string, bool) {
		if seen[c] || c == verify.CheckHeaders || c == "other" {
			return "", false
		}
		why := fmt.Sprintf("not run: no request of the %s check in the record file", c)
		if !v.Report.Complete {
			why += " (the suite did not finish)"
		} else {
			why += " (left out by --only or --skip, or not applicable to the policy)"
		}
		return why, true
	}
}

// checkOf returns the finding's check, or the default one of its id.
func checkOf(f *verify.Finding) string {
	if f.Check != "" {
		return f.Check
	}
	if c := verify.DefaultCheck(f.ID); c != "" {
		return c
	}
	return "other"
}

func checkRank(c string) int {
	if i := slices.Index(verify.Checks, c); i >= 0 {
		return i
	}
	return len(verify.Checks)
}

// endpoints lists the endpoints of a verdict: those its findings name,
// then those of its policy, in order of appearance; "*" when there are
// none.
func (in *Input) endpoints(v *Verdict) []string {
	var out []string
	add := func(e string) {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if v != nil {
		for _, f := range v.Report.Findings {
			add(f.Endpoint)
		}
		for _, e := range v.Report.Policy.Endpoints {
			add(in.ruleLabel(&e))
		}
	}
	if len(out) == 0 {
		out = []string{"*"}
	}
	return out
}

// ruleLabel names a rule's endpoint as package verify does: "METHOD path",
// the path of the requests when the rule names none ("*" when they differ).
func (in *Input) ruleLabel(r *verify.Endpoint) string {
	path := r.Path
	if path == "" {
		for _, rt := range in.routes {
			if r.Method != "" && !strings.EqualFold(r.Method, rt.method) {
				continue
			}
			if path == "" {
				path = rt.path
			} else if rt.path != path {
				path = "*"
				break
			}
		}
	}
	if path == "" {
		path = "*"
	}
	if r.Method != "" {
		return r.Method + " " + path
	}
	return path
}

// evidenceText describes a finding and its evidence in plain text.
func evidenceText(f *verify.Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s", f.Severity, f.Certainty)
	if f.Client != "" {
		fmt.Fprintf(&b, ", client %s", f.Client)
	}
	fmt.Fprintf(&b, ": %s\n", f.Message)
	if f.Hint != "" {
		fmt.Fprintf(&b, "hint: %s\n", f.Hint)
	}
	e := &f.Evidence
	fmt.Fprintf(&b, "evidence: %s–%s after the start, count %d", fmtOffset(e.StartNS), fmtOffset(e.EndNS), e.Count)
	if e.Bound != nil {
		fmt.Fprintf(&b, ", bound %s", strconv.FormatInt(*e.Bound, 10))
	}
	if len(e.Refs) > 0 {
		fmt.Fprintf(&b, "\nrefs: %s", strings.Join(e.Refs, " "))
	}
	if len(e.Headers) > 0 {
		fmt.Fprintf(&b, "\nheaders: %s", headersJSON(e.Headers))
	}
	return b.String()
}

// headersJSON writes evidence headers as compact JSON.
func headersJSON(h http.Header) string {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Sprint(h)
	}
	return string(b)
}

// fmtOffset formats a time since the start for people: "1.25s".
func fmtOffset(ns int64) string { return units.HumanDuration(time.Duration(ns)) }
