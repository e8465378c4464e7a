package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdDemo(f, g, nil) })
}

// DemoOptions are the flags of `rlprobe demo`.
type DemoOptions struct {
	f        *Factory
	g        *GlobalOptions
	Scenario scenario.DemoOptions
	NoInfer  bool
	Out      outputOptions
}

// NewCmdDemo builds `rlprobe demo`; runF (nil: the real one) runs it.
func NewCmdDemo(f *Factory, g *GlobalOptions, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	o := &DemoOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "demo",
		Short:   "Show a rate limiter at work: the nginx limit_req demo on the reference server",
		Long:    helpLong("demo"),
		Example: helpExample("demo"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOr(runF, demoRun)(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.NoInfer, "no-infer", false, "skip the inference (it takes about 15 seconds)")
	addOutputFlags(cmd, &o.Out)
	return cmd
}

func demoRun(ctx context.Context, o *DemoOptions) error {
	f, g := o.f, o.g
	tool := f.tool()
	interrupted := func(err error) error {
		if ctx.Err() != nil {
			return Unreachablef("demo interrupted")
		}
		return WithCode(ExitInternal, err)
	}
	res, err := scenario.Demo(ctx, o.Scenario)
	if err != nil {
		return interrupted(err)
	}
	verdict := res.Judge(tool, f.now())
	var inf *infer.Inference
	if !o.NoInfer {
		if !g.Quiet {
			fmt.Fprintln(f.IO.ErrOut, "rlprobe demo: inferring the algorithm of a fresh demo server from the outside (about 15 s)…")
		}
		if inf, err = scenario.InferDemo(ctx, o.Scenario); err != nil {
			return interrupted(err)
		}
		inf.Tool = tool
	}
	if o.Out.wanted(f) {
		in := report.FromMerged(record.Merge(res.Run), nil)
		docs := []any{verdict}
		if inf != nil {
			docs = append(docs, inf)
		}
		for _, doc := range docs {
			if err := in.AddDocument(doc); err != nil {
				return WithCode(ExitInternal, err)
			}
		}
		if err := o.Out.write(f, in); err != nil {
			return err
		}
	}
	if g.JSON {
		return writeJSON(f.IO.Out, res.Doc(tool, verdict, inf))
	}
	return writeDemo(f, res, verdict, inf, textOptions(f, g))
}

// writeDemo renders the demo for people: the burst, the verdict, the
// inference.
func writeDemo(f *Factory, res *scenario.DemoResult, verdict verify.Report, inf *infer.Inference, opt report.TextOptions) error {
	w := f.IO.Out
	if err := res.WriteText(w); err != nil {
		return err
	}
	pol := verify.DemoPolicy()
	fmt.Fprintf(w, "\n%s\n", strings.Repeat("─", 72))
	fmt.Fprintf(w, "Checked against the policy a client would expect (%s, rejections with 429):\n", session.DescribePolicy(&pol))
	verdict.RecordFile = ""
	if err := report.WriteVerdict(w, &verdict, session.DescribePolicy(&pol), opt); err != nil || inf == nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", strings.Repeat("─", 72))
	fmt.Fprintln(w, "Inferred from the outside (rlprobe infer), against a fresh demo server:")
	inf.RecordFile = "(in memory)"
	return report.WriteInference(w, inf, 1, opt)
}
