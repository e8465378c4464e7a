package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newSelftestCmd(f, g) })
}

// selftestHook, when set (by tests), adjusts the selftest's options before
// it runs.
var selftestHook func(*scenario.SelftestOptions)

// selftestOptions are the flags of `rlprobe selftest`.
type selftestOptions struct {
	quick    bool
	parallel int
}

func newSelftestCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &selftestOptions{}
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Serve every algorithm with the reference server, infer each, print the confusion matrix",
		Long: `Check rlprobe's inference against its own reference server: for every case
of the truth table (fixed window aligned to the epoch and to the first
request; sliding log and sliding-window counter with and without counting
rejected requests; token bucket of capacity 1 and more; GCRA; leaky bucket
nodelay, queueing, and queueing with delay=; no limiter), serve it, run infer
against it, and judge the answer: the family must match, integer parameters
exactly, real-valued ones within 10 %, and the alignment, counting of
rejections and key where they apply.

The full grid runs over in-memory connections, in real time, with windows of
1–2 s, three cases at a time (about half a minute); --quick runs a handful of
cases over loopback sockets, one at a time (about 40 s). Any miss exits 1.`,
		Example: `  rlprobe selftest
  rlprobe selftest --quick --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), f, g)
		},
	}
	cmd.Flags().BoolVar(&o.quick, "quick", false, "run a handful of cases over loopback sockets instead of the full grid in memory")
	cmd.Flags().IntVar(&o.parallel, "parallel", 0, "cases to run at once (default 3, and 1 with --quick)")
	_ = cmd.Flags().MarkHidden("parallel")
	return cmd
}

// selftestDoc is the --json document of `rlprobe selftest`.
type selftestDoc struct {
	Schema   string            `json:"schema"`
	Tool     string            `json:"tool"`
	Pass     bool              `json:"pass"`
	Quick    bool              `json:"quick"`
	Sockets  bool              `json:"sockets"`
	Cases    []selftestDocCase `json:"cases"`
	Families []string          `json:"families"`
	Matrix   [][]int           `json:"matrix"`
	// Coverage is, per parameter, how often the reported [low, high]
	// contained the truth.
	Coverage []selftestCoverage `json:"coverage"`
}

type selftestCoverage struct {
	Param   string `json:"param"`
	Cases   int    `json:"cases"`
	Covered int    `json:"covered"`
}

type selftestDocCase struct {
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

func (o *selftestOptions) run(ctx context.Context, f *Factory, g *GlobalOptions) error {
	par := o.parallel
	if o.quick && par == 0 {
		// Over real sockets each case has the cores to itself: the timing
		// infer reads must not wait behind another case's fitting.
		par = 1
	}
	if par == 0 {
		par = 3
	}
	opt := scenario.SelftestOptions{Quick: o.quick, Sockets: o.quick, Parallel: par, Tool: "rlprobe " + f.Version}
	if selftestHook != nil {
		selftestHook(&opt)
	}
	start := time.Now()
	if !g.Quiet {
		where := "in-memory connections"
		if opt.Sockets {
			where = "loopback sockets"
		}
		fmt.Fprintf(f.IO.ErrOut, "selftest: reference server × every family → infer (%s, real time)\n", where)
		opt.OnCase = func(r scenario.SelftestRow) {
			verdict := "right"
			if !r.OK() {
				verdict = "MISS"
			}
			fmt.Fprintf(f.IO.ErrOut, "selftest: %s: %s (%s)\n", r.Case.Name, verdict, roundDur(r.Duration))
		}
	}
	rep, err := scenario.Selftest(ctx, opt)
	if err != nil {
		return Unreachablef("selftest interrupted after %s", roundDur(time.Since(start)))
	}
	if g.JSON {
		err = writeJSON(f.IO.Out, newSelftestDoc(f, rep, o.quick))
	} else {
		err = writeSelftest(f.IO.Out, rep)
	}
	if err != nil {
		return err
	}
	if !rep.Pass() {
		misses := 0
		for _, r := range rep.Rows {
			if !r.OK() {
				misses++
			}
		}
		return WithCode(ExitFindings, fmt.Errorf("selftest: %d of %d cases missed", misses, len(rep.Rows)))
	}
	return nil
}

func newSelftestDoc(f *Factory, rep *scenario.SelftestReport, quick bool) selftestDoc {
	doc := selftestDoc{Schema: "rlprobe.selftest/v1", Tool: "rlprobe " + f.Version, Pass: rep.Pass(), Quick: quick,
		Sockets: rep.Sockets, Matrix: rep.Matrix()}
	for _, fam := range infer.Families {
		doc.Families = append(doc.Families, string(fam))
	}
	doc.Coverage = []selftestCoverage{}
	for _, c := range rep.Coverage() {
		doc.Coverage = append(doc.Coverage, selftestCoverage{Param: c.Name, Cases: c.Cases, Covered: c.Covered})
	}
	for _, r := range rep.Rows {
		c := selftestDocCase{Name: r.Case.Name, Served: r.Case.Describe(), Want: r.Case.Want.Family, Right: r.OK(),
			Problems: r.Problems, ParamErrors: r.ParamErrors, DurationS: r.Duration.Seconds(), Inference: r.Got}
		if c.Problems == nil {
			c.Problems = []string{}
		}
		if r.Err != nil {
			c.Error = r.Err.Error()
		}
		doc.Cases = append(doc.Cases, c)
	}
	return doc
}

// familyAbbrev names the families in the confusion matrix's columns.
var familyAbbrev = map[infer.Family]string{
	infer.FixedWindow: "FW", infer.SlidingLog: "SL", infer.SlidingWindowCounter: "SWC",
	infer.TokenBucket: "TB", infer.LeakyBucketQueue: "LBQ", infer.None: "none",
}

// writeSelftest renders the selftest for people: one line per case, the
// confusion matrix, the verdict.
func writeSelftest(w io.Writer, rep *scenario.SelftestReport) error {
	var rows [][]string
	right := 0
	for _, r := range rep.Rows {
		got, params, requests := "-", "", "-"
		if r.Got != nil {
			got = string(r.Got.Algorithm)
			if r.Got.Alignment != nil {
				got += " " + *r.Got.Alignment
			}
			params = describeParamErrors(r)
			requests = fmt.Sprint(r.Got.Requests)
		}
		verdict := "right"
		switch {
		case r.Err != nil:
			verdict = "error: " + r.Err.Error()
		case !r.OK():
			verdict = "MISS: " + strings.Join(r.Problems, "; ")
		default:
			right++
		}
		rows = append(rows, []string{r.Case.Name, r.Case.Describe(), got, params, fmtSeconds(r.Duration.Seconds()), requests, verdict})
	}
	renderTable(w, []string{"case", "served", "inferred", "parameters (error)", "time", "requests", "result"}, rows, 4)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "confusion matrix (rows: served family, columns: inferred family)")
	m := rep.Matrix()
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
	renderTable(w, header, mrows, 1)
	fmt.Fprintln(w)
	fmt.Fprintln(w, rep.CoverageText())
	verdict := "pass"
	if right != len(rep.Rows) {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, "%d of %d cases right: %s\n", right, len(rep.Rows), verdict)
	return err
}

// describeParamErrors lists the checked parameters with their values and
// errors: "limit 5, window_s 2.01 (+0.5%)".
func describeParamErrors(r scenario.SelftestRow) string {
	names := make([]string, 0, len(r.ParamErrors))
	for n := range r.ParamErrors {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		want := r.Case.Want.Params[n]
		e := r.ParamErrors[n]
		switch n {
		case "window_s", "rate_per_s":
			parts = append(parts, fmt.Sprintf("%s %s (%+.1f%%)", n, fmtNum(want*(1+e)), e*100))
		default:
			if e == 0 {
				parts = append(parts, fmt.Sprintf("%s %s", n, fmtNum(want)))
			} else {
				parts = append(parts, fmt.Sprintf("%s %s (%+g)", n, fmtNum(want+e), e))
			}
		}
	}
	return strings.Join(parts, ", ")
}
