package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
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
		in, err := res.Input(verdict, inf)
		if err != nil {
			return WithCode(ExitInternal, err)
		}
		if err := o.Out.write(f, in); err != nil {
			return err
		}
	}
	if g.JSON {
		return writeJSON(f.IO.Out, res.Doc(tool, verdict, inf))
	}
	return res.WriteReport(f.IO.Out, verdict, inf, textOptions(f, g))
}
