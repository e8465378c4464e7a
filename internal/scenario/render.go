package scenario

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// DemoDoc is the JSON document of `rlprobe demo` (schema rlprobe.demo/v1).
type DemoDoc struct {
	Schema    string           `json:"schema"`
	Tool      string           `json:"tool"`
	Server    DemoServer       `json:"server"`
	Requests  []DemoDocRequest `json:"requests"`
	Counts    map[string]int   `json:"counts"`
	Verdict   verify.Report    `json:"verdict"`
	Inference *infer.Inference `json:"inference"`
}

// DemoServer is the demo server's policy in the document.
type DemoServer struct {
	Algorithm  string  `json:"algorithm"`
	RatePerS   float64 `json:"rate_per_s"`
	Capacity   int64   `json:"capacity"`
	NoDelay    bool    `json:"nodelay"`
	Status     int     `json:"status"`
	RetryAfter bool    `json:"retry_after"`
}

// DemoDocRequest is one request of the burst in the document.
type DemoDocRequest struct {
	Seq       int64   `json:"seq"`
	ArrivalMS float64 `json:"arrival_ms"`
	Status    int     `json:"status,omitempty"`
	Outcome   string  `json:"outcome"`
	Err       string  `json:"err,omitempty"`
}

// Doc returns the demo's document with its verdict and inference (nil when
// skipped).
func (r *DemoResult) Doc(tool string, verdict verify.Report, inf *infer.Inference) DemoDoc {
	lc := r.Policy.Limiter
	doc := DemoDoc{
		Schema: "rlprobe.demo/v1", Tool: tool,
		Server: DemoServer{Algorithm: string(lc.Algorithm), RatePerS: lc.Rate, Capacity: lc.Capacity,
			NoDelay: lc.NoDelay, Status: r.Policy.Status, RetryAfter: false},
		Counts: r.Counts, Verdict: verdict, Inference: inf,
	}
	for _, q := range r.Requests {
		doc.Requests = append(doc.Requests, DemoDocRequest{Seq: q.Result.Seq,
			ArrivalMS: float64(q.Arrival) / float64(time.Millisecond), Status: q.Result.Status,
			Outcome: q.Outcome, Err: q.Result.Err})
	}
	return doc
}

// SelftestDoc is the JSON document of `rlprobe selftest`
// (schema rlprobe.selftest/v1).
type SelftestDoc struct {
	Schema   string            `json:"schema"`
	Tool     string            `json:"tool"`
	Pass     bool              `json:"pass"`
	Quick    bool              `json:"quick"`
	Sockets  bool              `json:"sockets"`
	Cases    []SelftestDocCase `json:"cases"`
	Families []string          `json:"families"`
	Matrix   [][]int           `json:"matrix"`
	// Coverage is, per parameter, how often the reported [low, high]
	// contained the truth.
	Coverage []SelftestCoverage `json:"coverage"`
}

// SelftestCoverage is one parameter's bounds coverage in the document.
type SelftestCoverage struct {
	Param   string `json:"param"`
	Cases   int    `json:"cases"`
	Covered int    `json:"covered"`
}

// SelftestDocCase is one case of the selftest in the document.
type SelftestDocCase struct {
	Name        string             `json:"name"`
	Served      string             `json:"served"`
	Want        infer.Family       `json:"want"`
	Right       bool               `json:"right"`
	Problems    []string           `json:"problems"`
	ParamErrors map[string]float64 `json:"param_errors"`
	Error       string             `json:"error,omitempty"`
	DurationS   float64            `json:"duration_s"`
	Inference   *infer.Inference   `json:"inference"`
}

// Doc returns the selftest's document.
func (r *SelftestReport) Doc(tool string, quick bool) SelftestDoc {
	doc := SelftestDoc{Schema: "rlprobe.selftest/v1", Tool: tool, Pass: r.Pass(), Quick: quick,
		Sockets: r.Sockets, Matrix: r.Matrix()}
	for _, fam := range infer.Families {
		doc.Families = append(doc.Families, string(fam))
	}
	doc.Coverage = []SelftestCoverage{}
	for _, c := range r.Coverage() {
		doc.Coverage = append(doc.Coverage, SelftestCoverage{Param: c.Name, Cases: c.Cases, Covered: c.Covered})
	}
	for _, row := range r.Rows {
		c := SelftestDocCase{Name: row.Case.Name, Served: row.Case.Describe(), Want: row.Case.Want.Family, Right: row.OK(),
			Problems: row.Problems, ParamErrors: row.ParamErrors, DurationS: row.Duration.Seconds(), Inference: row.Got}
		if c.Problems == nil {
			c.Problems = []string{}
		}
		if row.Err != nil {
			c.Error = row.Err.Error()
		}
		doc.Cases = append(doc.Cases, c)
	}
	return doc
}

// Misses counts the cases that went wrong.
func (r *SelftestReport) Misses() int {
	n := 0
	for _, row := range r.Rows {
		if !row.OK() {
			n++
		}
	}
	return n
}

// familyAbbrev names the families in the confusion matrix's columns.
var familyAbbrev = map[infer.Family]string{
	infer.FixedWindow: "FW", infer.SlidingLog: "SL", infer.SlidingWindowCounter: "SWC",
	infer.TokenBucket: "TB", infer.LeakyBucketQueue: "LBQ", infer.None: "none",
}

// WriteText renders the selftest for people: one line per case, the
// confusion matrix, the verdict.
func (r *SelftestReport) WriteText(w io.Writer) error {
	var rows [][]string
	for _, row := range r.Rows {
		got, params, requests := "-", "", "-"
		if row.Got != nil {
			got = string(row.Got.Algorithm)
			if row.Got.Alignment != nil {
				got += " " + *row.Got.Alignment
			}
			params = describeParamErrors(row)
			requests = fmt.Sprint(row.Got.Requests)
		}
		verdict := "right"
		switch {
		case row.Err != nil:
			verdict = "error: " + row.Err.Error()
		case !row.OK():
			verdict = "MISS: " + strings.Join(row.Problems, "; ")
		}
		took := row.Duration.Round(time.Millisecond).String()
		rows = append(rows, []string{row.Case.Name, row.Case.Describe(), got, params, took, requests, verdict})
	}
	report.WriteTableFrom(w, []string{"case", "served", "inferred", "parameters (error)", "time", "requests", "result"}, rows, 4)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "confusion matrix (rows: served family, columns: inferred family)")
	m := r.Matrix()
	header := []string{"served \\ inferred"}
	for _, fam := range infer.Families {
		header = append(header, familyAbbrev[fam])
	}
	var mrows [][]string
	for i, fam := range infer.Families {
		total := 0
		row := []string{string(fam)}
		for _, n := range m[i] {
			total += n
			row = append(row, fmt.Sprint(n))
		}
		if total > 0 {
			mrows = append(mrows, row)
		}
	}
	report.WriteTableFrom(w, header, mrows, 1)
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.CoverageText())
	verdict := "pass"
	if r.Misses() > 0 {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%d of %d cases right: %s\n", len(r.Rows)-r.Misses(), len(r.Rows), verdict)
	return err
}

// describeParamErrors lists the checked parameters with their values and
// errors: "limit 5, window_s 2.01 (+0.5%)".
func describeParamErrors(r SelftestRow) string {
	names := make([]string, 0, len(r.ParamErrors))
	for n := range r.ParamErrors {
		names = append(names, n)
	}
	sort.Strings(names)
	num := units.HumanNumber
	var parts []string
	for _, n := range names {
		want := r.Case.Want.Params[n]
		e := r.ParamErrors[n]
		switch {
		case n == "window_s" || n == "rate_per_s":
			parts = append(parts, fmt.Sprintf("%s %s (%+.1f%%)", n, num(want*(1+e)), e*100))
		case e == 0:
			parts = append(parts, fmt.Sprintf("%s %s", n, num(want)))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%+g)", n, num(want+e), e))
		}
	}
	return strings.Join(parts, ", ")
}
