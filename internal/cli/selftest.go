package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/session"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdSelftest(f, g, nil) })
}

// SelftestOptions are the flags of `rlprobe selftest`.
type SelftestOptions struct {
	f        *Factory
	g        *GlobalOptions
	Quick    bool
	Parallel int
}

// NewCmdSelftest builds `rlprobe selftest`; runF (nil: the real one) runs it.
func NewCmdSelftest(f *Factory, g *GlobalOptions, runF func(context.Context, *SelftestOptions) error) *cobra.Command {
	o := &SelftestOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "selftest",
		Short:   "Serve every algorithm with the reference server, infer each, print the confusion matrix",
		Long:    helpLong("selftest"),
		Example: helpExample("selftest"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOr(runF, selftestRun)(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Quick, "quick", false, "run a handful of cases over loopback sockets instead of the full grid in memory")
	cmd.Flags().IntVar(&o.Parallel, "parallel", 0, "cases to run at once (default 3, and 2 with --quick)")
	_ = cmd.Flags().MarkHidden("parallel")
	return cmd
}

func selftestRun(ctx context.Context, o *SelftestOptions) error {
	f, g := o.f, o.g
	opt := scenario.SelftestOptions{Quick: o.Quick, Sockets: o.Quick, Parallel: o.Parallel, Tool: f.tool()}
	if f.Selftest != nil {
		f.Selftest(&opt)
	}
	start := time.Now()
	if !g.Quiet {
		fmt.Fprintf(f.IO.ErrOut, "selftest: %s\n", opt.Describe())
		opt.OnCase = func(r scenario.SelftestRow) { fmt.Fprintf(f.IO.ErrOut, "selftest: %s\n", r) }
	}
	rep, err := scenario.Selftest(ctx, opt)
	if err != nil {
		return Unreachablef("selftest interrupted after %s", session.RoundDuration(time.Since(start)))
	}
	if g.JSON {
		err = writeJSON(f.IO.Out, rep.Doc(f.tool(), o.Quick))
	} else {
		err = rep.WriteText(f.IO.Out)
	}
	if err != nil {
		return err
	}
	if n := rep.Misses(); n > 0 {
		return WithCode(ExitFindings, fmt.Errorf("selftest: %d of %d cases missed", n, len(rep.Rows)))
	}
	return nil
}
