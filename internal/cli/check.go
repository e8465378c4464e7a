package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/limitconf"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/report"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdCheck(f, g, nil) })
}

// verdictOptions are the flags check and analyze share beyond the policy:
// --fail-on and the report files.
type verdictOptions struct {
	failOn string
	out    outputOptions
}

func addVerdictFlags(cmd *cobra.Command, o *verdictOptions) {
	fl := cmd.Flags()
	fl.StringVar(&o.failOn, "fail-on", string(verify.SeverityError), "exit 1 for a certain finding at or above this severity: info, warning or error")
	addOutputFlags(cmd, &o.out)
}

// CheckOptions are the flags of `rlprobe check`.
type CheckOptions struct {
	f       *Factory
	g       *GlobalOptions
	Target  targetOptions
	Policy  session.PolicySpec
	Verdict verdictOptions
	Only    []string
	Skip    []string
	// FromConfig is a limiter's config whose limits are the policy
	// (--from-config), read as Config says; LocationURLs are the
	// --location-url PATTERN=URL values.
	FromConfig   string
	Config       ConfigSource
	LocationURLs []string
	// configFlags are the flags that read a config: addConfigFlags's and
	// --location-url.
	configFlags []string
}

// NewCmdCheck builds `rlprobe check`; runF (nil: the real one) runs it.
func NewCmdCheck(f *Factory, g *GlobalOptions, runF func(context.Context, *CheckOptions) error) *cobra.Command {
	o := &CheckOptions{f: f, g: g, Target: newTargetOptions("check")}
	cmd := &cobra.Command{
		Use:     "check URL... [policy flags | --from-config FILE]",
		Short:   "Run the check suite against a declared policy and give verdicts",
		Long:    helpLong("check"),
		Example: helpExample("check"),
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Target.targetChanged(cmd, args)
			return runOr(runF, checkRun)(cmd.Context(), o)
		},
	}
	addTargetFlags(cmd, &o.Target)
	addPolicyFlags(cmd, &o.Policy)
	fl := cmd.Flags()
	fl.Lookup("start-at").Usage = startAtSuiteUsage
	fl.Lookup("clients").Usage = "client identities for a per-client key (ip with --source-ips, header:NAME): at most `N` fresh identities instead of waiting for quota to return (more than 1 is refused for a global key)"
	fl.StringSliceVar(&o.Only, "only", nil, "run only these `CHECKS` (comma-separated): "+strings.Join(verify.Checks, ", "))
	fl.StringSliceVar(&o.Skip, "skip", nil, "leave out these `CHECKS` (comma-separated)")
	addVerdictFlags(cmd, &o.Verdict)
	fl.StringVar(&o.FromConfig, "from-config", "", "take the policy from a limiter's config `FILE` (nginx, Envoy, Traefik, Kong) and check each limited location at BASE_URL + its path")
	fl.StringArrayVar(&o.LocationURLs, "location-url", nil, "with --from-config: probe the prefix or regex location `PATTERN=URL` at URL, a path under BASE_URL (repeatable)")
	o.configFlags = append(addConfigFlags(cmd, &o.Config), "location-url")
	return cmd
}

// options validates the check's own flags and returns the declared policy
// (nil: the advertised one) and the session's options.
func (o *CheckOptions) options() (*verify.Policy, session.CheckOptions, error) {
	pol, live, err := o.policy()
	if err != nil {
		return nil, session.CheckOptions{}, err
	}
	opts, err := o.Policy.CheckOptions(o.Verdict.failOn, o.Only, o.Skip)
	if live != nil {
		opts.Infer, opts.Judge = true, o.judge(live)
		for _, n := range live.Notes() {
			if !o.g.Quiet || strings.Contains(n, "not checked") {
				fmt.Fprintf(o.f.IO.ErrOut, "rlprobe: %s\n", n)
			}
		}
		if !o.g.Quiet {
			for _, e := range live.Policy.Endpoints {
				fmt.Fprintf(o.f.IO.ErrOut, "rlprobe: after the suites, %s is inferred within --max-duration: up to %s (%s for its quota to be whole, then 6 × its period %s + 30 s)\n",
					e.Path, units.HumanDuration(session.InferNeeds(e)), units.HumanDuration(session.IdleWait(e)), units.HumanDuration(e.Period()))
			}
		}
	}
	return pol, opts, err
}

// policy returns the declared policy: from the policy flags (nil: the
// advertised one), or from --from-config with the live check that judges
// the verdict about the config.
func (o *CheckOptions) policy() (*verify.Policy, *limitconf.LiveCheck, error) {
	if o.FromConfig == "" {
		for _, n := range o.configFlags {
			if o.Policy.Changed != nil && o.Policy.Changed(n) {
				return nil, nil, Usagef("--%s reads a limiter's config: give --from-config FILE", n)
			}
		}
		pol, err := o.Policy.Resolve()
		return pol, nil, err
	}
	if set := o.Policy.Given(); len(set) > 0 {
		return nil, nil, Usagef("--from-config takes the policy from the config: drop %s", strings.Join(set, ", "))
	}
	live, err := o.Config.LiveCheck(o.f.IO.In, o.FromConfig, o.LocationURLs, limitconf.TargetOptions{
		Base: o.Target.URLs[0], MaxDuration: cmp.Or(o.Target.MaxDuration, session.SuiteMaxDuration)})
	if err != nil {
		return nil, nil, UsageErr(err)
	}
	return &live.Policy, live, nil
}

// judge is the session's Judge of a check --from-config: the verdict
// about the config, with each rule's inference read as limitconf's
// observation; the rules not inferred are printed.
func (o *CheckOptions) judge(live *limitconf.LiveCheck) func(*verify.Report, []session.Inferred) {
	return func(rep *verify.Report, inferred []session.Inferred) {
		obs := make([]limitconf.Inferred, len(inferred))
		for i, in := range inferred {
			obs[i].Skipped = in.Skipped
			if in.Inference == nil {
				continue
			}
			doc, err := json.Marshal(in.Inference)
			if err == nil {
				obs[i].Observed, err = limitconf.ParseObserved(doc)
			}
			if err != nil {
				obs[i].Skipped = err.Error()
			}
		}
		for _, n := range live.Judge(rep, obs) {
			fmt.Fprintf(o.f.IO.ErrOut, "rlprobe: %s\n", n)
		}
	}
}

func checkRun(ctx context.Context, o *CheckOptions) error {
	f, g := o.f, o.g
	pol, opts, err := o.options()
	if err != nil {
		return err
	}
	var sess *session.Session
	prog := sessionProgress(f, g, &sess)
	if sess, err = o.Target.newSession(f, g, prog); err != nil {
		return err
	}
	if pol != nil {
		if err := sess.CheckPolicy(pol); err != nil {
			return err
		}
	}
	if o.Target.DryRun {
		doc := sess.CheckDryRun(pol, o.Only, o.Skip)
		return printDryRun(f, g, &doc)
	}
	rep, err := sess.Check(ctx, pol, opts)
	prog.stop()
	if rep == nil {
		return err
	}
	path := sess.RecordFile()
	werr := writeReports(f, o.Verdict, record.Merge(sess.Record()), []string{path}, rep)
	err = session.VerdictOutputError(rep, err, werr)
	return session.VerdictOutputError(rep, err, printVerdict(f, g, rep))
}

// printVerdict writes the document (--json) or the summary, verdict first.
func printVerdict(f *Factory, g *GlobalOptions, rep *verify.Report) error {
	if g.JSON {
		return writeJSON(f.IO.Out, rep)
	}
	return report.WriteVerdict(f.IO.Out, rep, rep.Policy.String(), textOptions(f, g))
}

// writeReports writes the --html, --junit and --markdown files, and the
// Markdown summary to $GITHUB_STEP_SUMMARY when that is set.
func writeReports(f *Factory, o verdictOptions, m *record.Merged, files []string, rep *verify.Report) error {
	if !o.out.wanted(f) {
		return nil
	}
	in := report.FromMerged(m, files)
	in.Tool = rep.Tool
	if err := in.AddDocument(*rep); err != nil {
		return err
	}
	return o.out.write(f, in)
}
