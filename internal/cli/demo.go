package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newDemoCmd(f, g) })
}

// demoOptions are the flags of `rlprobe demo`.
type demoOptions struct {
	scenario scenario.DemoOptions
	noInfer  bool
	out      outputOptions
}

func newDemoCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show a rate limiter at work: the nginx limit_req demo on the reference server",
		Long: `Start the reference server on a free loopback port, limiting like nginx's
"limit_req rate=1r/s burst=3 nodelay" (503, no Retry-After, no rate-limit
headers), fire a burst of 8 requests at it, and show the outcomes in the order
the server received them: four 200s, then four 503s.

Then judge the burst against the policy "rate 1/s, burst 3, rejections with
429" (the server answers 503 without Retry-After: reject-status-mismatch and
retry-after-missing), and infer the server's algorithm from the outside
(token bucket, 1/s, capacity 4; about 15 seconds, --no-infer skips it).

Nothing leaves this machine; nothing is written to disk but the report files
you ask for.`,
		Example: `  rlprobe demo
  rlprobe demo --html demo.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return demoRun(cmd.Context(), f, g, o)
		},
	}
	cmd.Flags().BoolVar(&o.noInfer, "no-infer", false, "skip the inference (it takes about 15 seconds)")
	addOutputFlags(cmd, &o.out)
	return cmd
}

// demoDoc is the --json document of `rlprobe demo`.
type demoDoc struct {
	Schema    string           `json:"schema"`
	Tool      string           `json:"tool"`
	Server    demoServer       `json:"server"`
	Requests  []demoRequest    `json:"requests"`
	Counts    map[string]int   `json:"counts"`
	Verdict   verify.Report    `json:"verdict"`
	Inference *infer.Inference `json:"inference"`
}

type demoServer struct {
	Algorithm  string  `json:"algorithm"`
	RatePerS   float64 `json:"rate_per_s"`
	Capacity   int64   `json:"capacity"`
	NoDelay    bool    `json:"nodelay"`
	Status     int     `json:"status"`
	RetryAfter bool    `json:"retry_after"`
}

type demoRequest struct {
	Seq       int64   `json:"seq"`
	ArrivalMS float64 `json:"arrival_ms"`
	Status    int     `json:"status,omitempty"`
	Outcome   string  `json:"outcome"`
	Err       string  `json:"err,omitempty"`
}

func demoRun(ctx context.Context, f *Factory, g *GlobalOptions, o *demoOptions) error {
	tool := "rlprobe " + f.Version
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			return Unreachablef("demo interrupted")
		}
		return WithCode(ExitInternal, err)
	}
	res, err := scenario.Demo(ctx, o.scenario)
	if err != nil {
		return interrupted(err)
	}
	verdict := res.Judge(tool)
	var inf *infer.Inference
	if !o.noInfer {
		if !g.Quiet {
			fmt.Fprintln(f.IO.ErrOut, "rlprobe demo: inferring the algorithm of a fresh demo server from the outside (about 15 s)…")
		}
		inf, err = scenario.InferDemo(ctx, o.scenario)
		if err != nil {
			return interrupted(err)
		}
		inf.Tool = tool
	}
	if o.out.wanted(f) {
		in := report.FromMerged(record.Merge(res.Run), nil)
		if err := in.AddDocument(verdict); err != nil {
			return WithCode(ExitInternal, err)
		}
		if inf != nil {
			if err := in.AddDocument(inf); err != nil {
				return WithCode(ExitInternal, err)
			}
		}
		if err := o.out.write(f, in); err != nil {
			return err
		}
	}
	if g.JSON {
		lc := res.Policy.Limiter
		doc := demoDoc{
			Schema: "rlprobe.demo/v1", Tool: tool,
			Server: demoServer{Algorithm: string(lc.Algorithm), RatePerS: lc.Rate, Capacity: lc.Capacity,
				NoDelay: lc.NoDelay, Status: res.Policy.Status, RetryAfter: false},
			Counts:    res.Counts,
			Verdict:   verdict,
			Inference: inf,
		}
		for _, q := range res.Requests {
			doc.Requests = append(doc.Requests, demoRequest{Seq: q.Result.Seq,
				ArrivalMS: float64(q.Arrival) / float64(time.Millisecond), Status: q.Result.Status,
				Outcome: q.Outcome, Err: q.Result.Err})
		}
		return writeJSON(f.IO.Out, doc)
	}
	if err := res.WriteText(f.IO.Out); err != nil {
		return err
	}
	pol := verify.DemoPolicy()
	fmt.Fprintf(f.IO.Out, "\n%s\n", strings.Repeat("─", 72))
	fmt.Fprintf(f.IO.Out, "Checked against the policy a client would expect (%s, rejections with 429):\n", describePolicy(&pol))
	verdict.RecordFile = ""
	if err := printVerdict(f, &GlobalOptions{}, &verdict, describePolicy(&pol)); err != nil {
		return err
	}
	if inf != nil {
		fmt.Fprintf(f.IO.Out, "\n%s\n", strings.Repeat("─", 72))
		fmt.Fprintln(f.IO.Out, "Inferred from the outside (rlprobe infer), against a fresh demo server:")
		inf.RecordFile = "(in memory)"
		if err := writeInference(f.IO.Out, inf, 1); err != nil {
			return err
		}
	}
	return nil
}
