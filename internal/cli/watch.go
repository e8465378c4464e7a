package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
	"github.com/rlprobe/rlprobe/watch"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdWatch(f, g, nil) })
}

// WatchOptions are the flags of `rlprobe watch`.
type WatchOptions struct {
	f      *Factory
	g      *GlobalOptions
	Target targetOptions
	Policy session.PolicySpec
	watch.Settings
	Webhook string
}

// NewCmdWatch builds `rlprobe watch`; runF (nil: the real one) runs it.
func NewCmdWatch(f *Factory, g *GlobalOptions, runF func(context.Context, *WatchOptions) error) *cobra.Command {
	o := &WatchOptions{f: f, g: g, Target: newTargetOptions("watch")}
	cmd := &cobra.Command{
		Use:     "watch URL... [policy flags] [--every D] [--budget P%]",
		Short:   "Watch a limiter continuously: budgeted probes, drift, Prometheus metrics, webhooks",
		Long:    helpLong("watch"),
		Example: helpExample("watch"),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Target.targetChanged(cmd, args)
			return runOr(runF, watchRun)(cmd.Context(), o)
		},
	}
	addTargetFlags(cmd, &o.Target)
	addPolicyFlags(cmd, &o.Policy)
	fl := cmd.Flags()
	fl.Var((*units.Duration)(&o.Every), "every", "time from one cycle's start to the next (default 5m)")
	fl.StringVar(&o.Budget, "budget", "2%", "share of the binding rule's quota the cycles may spend per window and per --every, as a percentage (at least one request per window)")
	fl.StringVar(&o.MetricsListen, "metrics-listen", "", "serve Prometheus metrics on `ADDR` (host:port, port 0 picks one; loopback unless --public)")
	fl.BoolVar(&o.Public, "public", false, "allow --metrics-listen on an address other than loopback")
	fl.StringVar(&o.Webhook, "webhook", "", "POST every event (rlprobe.watch-event/v1) to `URL`")
	fl.StringVar(&o.Dir, "dir", "rlprobe-watch", "directory of the cycles' record files")
	fl.IntVar(&o.Keep, "keep", watch.DefaultKeep, "record files kept in --dir (oldest removed first)")
	fl.Int64Var(&o.KeepBytes, "keep-bytes", watch.DefaultKeepBytes, "bytes of record files kept in --dir")
	fl.BoolVar(&o.Once, "once", false, "run one cycle and exit with check's exit codes")
	fl.BoolVar(&o.Infer, "infer", false, "run a full inference as the first cycle even with a policy (always without one)")
	fl.StringVar(&o.FailOn, "fail-on", string(verify.SeverityError), "with --once: exit 1 for a certain finding at or above this severity")
	return cmd
}

func watchRun(ctx context.Context, o *WatchOptions) error {
	f, g := o.f, o.g
	cfg, maddr, probs := o.Settings.Config()
	if err := session.Problems(probs); err != nil {
		return err
	}
	pol, err := o.Policy.Resolve()
	if err != nil {
		return err
	}
	sess, err := o.Target.newSession(f, g, nil)
	if err != nil {
		return err
	}
	cfg.Session, cfg.Policy, cfg.Tool = sess.Config(), pol, f.tool()
	cfg.Warn = func(msg string) { fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", msg) }
	cfg.Log = watch.NewLogger(f.IO.Out, f.IO.ErrOut, g.JSON, g.Quiet)
	cfg.Session.Progress = session.Progress{}
	cfg.ConfirmInfer = cfg.Session.Confirm
	if o.Webhook != "" {
		cfg.Webhook = watch.NewWebhook(o.Webhook, cfg.Session.Probe.Redactor)
	}
	if maddr != "" {
		bound, stop, err := watch.ServeMetrics(maddr, cfg.Metrics)
		if err != nil {
			return UsageErr(err)
		}
		defer stop()
		fmt.Fprintf(f.IO.ErrOut, "rlprobe watch: metrics on http://%s/metrics\n", bound)
	}
	res, err := watch.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if o.Once && res.Last != nil {
		return session.VerdictError(res.Last, nil)
	}
	return nil
}
