package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
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

// JUnit writes the findings as JUnit XML: one test case per finding rule —
// every finding id of the contract, for every endpoint — grouped in test
// suites by endpoint and check. A case fails when a finding with its id
// fails the default --fail-on error (certain, severity error); the failure
// carries every such finding with its evidence (interval, count, bound,
// refs, headers). Other findings (warnings, notes, possible errors) are
// listed in the case's system-out, the case passing. A case whose id was
// not raised passes; it sits in the check that raises that id. Without any
// check or analyze document, every case is skipped.
func JUnit(w io.Writer, in *Input) error {
	doc := junitSuites{Name: "rlprobe", Time: "0"}
	fs := in.Findings()
	endpoints := in.endpoints()
	skipped := len(in.Checks) == 0
	type key struct{ endpoint, check string }
	suites := map[key]*junitSuite{}
	var order []key
	suite := func(k key) *junitSuite {
		if s, ok := suites[k]; ok {
			return s
		}
		s := &junitSuite{Name: k.check + " (" + k.endpoint + ")", Time: "0",
			Properties: []junitProperty{{"endpoint", k.endpoint}, {"check", k.check}}}
		suites[k] = s
		order = append(order, k)
		return s
	}
	for _, ep := range endpoints {
		for _, id := range FindingIDs {
			var checks []string
			for i := range fs {
				if fs[i].Endpoint == ep && fs[i].ID == id && !slices.Contains(checks, checkOf(&fs[i])) {
					checks = append(checks, checkOf(&fs[i]))
				}
			}
			if len(checks) == 0 {
				checks = []string{defaultCheck[id]}
			}
			for _, c := range checks {
				s := suite(key{ep, c})
				tc := junitCase{Name: id, Classname: "rlprobe." + c, Time: "0"}
				var failing, other []string
				first := ""
				for i := range fs {
					f := &fs[i]
					if f.Endpoint != ep || f.ID != id || checkOf(f) != c {
						continue
					}
					if f.Fails() {
						if first == "" {
							first = f.Message
						}
						failing = append(failing, evidenceText(f))
					} else {
						other = append(other, evidenceText(f))
					}
				}
				switch {
				case skipped:
					tc.Skipped = &junitSkipped{Message: "no check or analyze document in the record files"}
					s.Skipped++
				case len(failing) > 0:
					tc.Failure = &junitFailure{Message: first, Type: id, Text: strings.Join(failing, "\n\n")}
					s.Failures++
				}
				if len(other) > 0 {
					tc.SystemOut = &junitText{Text: strings.Join(other, "\n\n")}
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
	for _, k := range order {
		s := suites[k]
		doc.Suites = append(doc.Suites, *s)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Skipped += s.Skipped
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

// checkOf returns the finding's check, or the default one of its id.
func checkOf(f *Finding) string {
	if f.Check != "" {
		return f.Check
	}
	if c := defaultCheck[f.ID]; c != "" {
		return c
	}
	return "other"
}

func checkRank(c string) int {
	if i := slices.Index(Checks, c); i >= 0 {
		return i
	}
	return len(Checks)
}

// endpoints lists the endpoints of the report: those the findings name,
// then those of the checks' policies, in order of appearance; "*" when
// there are none.
func (in *Input) endpoints() []string {
	var out []string
	add := func(e string) {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	for _, c := range in.Checks {
		for _, f := range c.Findings {
			add(f.Endpoint)
		}
	}
	for _, c := range in.Checks {
		for _, r := range parsePolicy(c.Policy) {
			add(in.ruleLabel(&r))
		}
	}
	if len(out) == 0 {
		out = []string{"*"}
	}
	return out
}

// ruleLabel names a rule's endpoint as package verify does: "METHOD path",
// the path of the requests when the rule names none ("*" when they differ).
func (in *Input) ruleLabel(r *rule) string {
	path := r.path
	if path == "" {
		for _, rt := range in.routes {
			if r.method != "" && !strings.EqualFold(r.method, rt.method) {
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
	if r.method != "" {
		return r.method + " " + path
	}
	return path
}

// evidenceText describes a finding and its evidence in plain text.
func evidenceText(f *Finding) string {
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
		fmt.Fprintf(&b, ", bound %s", fmtNum(*e.Bound))
	}
	if len(e.Refs) > 0 {
		fmt.Fprintf(&b, "\nrefs: %s", strings.Join(e.Refs, " "))
	}
	if len(e.Headers) > 0 && string(e.Headers) != "null" {
		fmt.Fprintf(&b, "\nheaders: %s", e.Headers)
	}
	return b.String()
}

// fmtOffset formats a time since the start in seconds with millisecond
// precision: "1.250s".
func fmtOffset(ns int64) string {
	return strconv.FormatFloat(float64(time.Duration(ns).Round(time.Millisecond))/1e9, 'f', 3, 64) + "s"
}
