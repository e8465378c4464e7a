package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/limitconf"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "policy",
			Short: "Turn a limiter's own config (nginx, Envoy, Traefik, Kong) into a policy, and lint it",
			Long:  helpLong("policy"),
			Args:  cobra.NoArgs,
		}
		cmd.AddCommand(NewCmdPolicyImport(f, g, nil), NewCmdPolicyLint(f, g, nil))
		return cmd
	})
}

// ConfigSource are the flags that say which config and which part of it
// (policy import, policy lint, check --from-config).
type ConfigSource = limitconf.ConfigSource

// addConfigFlags adds the config flags to cmd, in one place for policy
// import, policy lint and check --from-config, and returns their names.
func addConfigFlags(cmd *cobra.Command, s *ConfigSource) []string {
	fl := cmd.Flags()
	fl.StringVar(&s.Format, "format", "", "`FORMAT` of the config: nginx, envoy, traefik or kong (default: guessed from the name and content)")
	fl.StringVar(&s.Server, "server", "", "keep the limits of one server: nginx server_name, Envoy virtual host, Traefik router, Kong service (`NAME`)")
	fl.StringVar(&s.Location, "location", "", "keep the limits of one location or route (`PATH`, e.g. /api or \"= /login\")")
	fl.StringArrayVar(&s.Set, "set", nil, "substitute a template's $NAME and ${NAME} with VALUE (`NAME=VALUE`, repeatable); other $ are left alone, as envsubst '$NAME' does")
	fl.StringArrayVar(&s.Env, "env", nil, "substitute the NAME=VALUE lines of `FILE` as --set does (repeatable; --set wins)")
	fl.StringVar(&s.Root, "root", "", "read nginx's absolute includes under `DIR` (e.g. a checkout of /etc/nginx's tree); relative ones are read from the config's directory")
	fl.BoolVar(&s.Strict, "strict", false, "refuse an nginx directive that neither nginx nor a known module defines (default: not-interpreted, skipped)")
	fl.BoolVar(&s.StrictIncludes, "strict-includes", false, "refuse an nginx include that cannot be read (default: include-missing, the rest read)")
	return []string{"format", "server", "location", "set", "env", "root", "strict", "strict-includes"}
}

// PolicyImportOptions are the flags of `rlprobe policy import`.
type PolicyImportOptions struct {
	f      *Factory
	g      *GlobalOptions
	File   string
	Source ConfigSource
	Out    string
}

// NewCmdPolicyImport builds `rlprobe policy import`; runF (nil: the real
// one) runs it.
func NewCmdPolicyImport(f *Factory, g *GlobalOptions, runF func(context.Context, *PolicyImportOptions) error) *cobra.Command {
	o := &PolicyImportOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "import FILE [--format nginx|envoy|traefik|kong] [--server NAME] [--location PATH] [--set NAME=VALUE] [-o FILE]",
		Short:   "Write the policy a limiter's config declares, each rule naming its source line",
		Long:    helpLong("policy-import"),
		Example: helpExample("policy-import"),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = args[0]
			return runOr(runF, policyImportRun)(cmd.Context(), o)
		},
	}
	addConfigFlags(cmd, &o.Source)
	cmd.Flags().StringVarP(&o.Out, "output", "o", "", "write the policy file to `FILE` instead of stdout")
	return cmd
}

func policyImportRun(_ context.Context, o *PolicyImportOptions) error {
	f, g := o.f, o.g
	im, err := o.Source.Import(f.IO.In, o.File)
	if err != nil {
		return UsageErr(err)
	}
	var b bytes.Buffer
	if g.JSON {
		err = writeJSON(&b, im.Document(f.tool()))
	} else {
		err = limitconf.WritePolicy(&b, im)
	}
	if err != nil {
		return err
	}
	if !g.Quiet && !g.JSON {
		for _, w := range im.Warnings(verify.SeverityWarning) {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: %s\n", w)
		}
	}
	if o.Out == "" || o.Out == "-" {
		_, err = f.IO.Out.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(o.Out, b.Bytes(), 0o644); err != nil {
		return UsageErr(fmt.Errorf("-o: %w", err))
	}
	if !g.Quiet {
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: %d rules from %s written to %s\n", len(im.Rules), o.File, o.Out)
	}
	return nil
}

// PolicyLintOptions are the flags of `rlprobe policy lint`.
type PolicyLintOptions struct {
	f      *Factory
	g      *GlobalOptions
	File   string
	Source ConfigSource
	FailOn string
}

// NewCmdPolicyLint builds `rlprobe policy lint`; runF (nil: the real one)
// runs it.
func NewCmdPolicyLint(f *Factory, g *GlobalOptions, runF func(context.Context, *PolicyLintOptions) error) *cobra.Command {
	o := &PolicyLintOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "lint FILE [--format nginx|envoy|traefik|kong] [--server NAME] [--location PATH] [--set NAME=VALUE] [--fail-on SEVERITY]",
		Short:   "Report what a limiter's config cannot do as written, without sending anything",
		Long:    helpLong("policy-lint"),
		Example: helpExample("policy-lint"),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = args[0]
			return runOr(runF, policyLintRun)(cmd.Context(), o)
		},
	}
	addConfigFlags(cmd, &o.Source)
	cmd.Flags().StringVar(&o.FailOn, "fail-on", "error", "exit 1 on a certain finding at or above `SEVERITY`: info, warning or error")
	return cmd
}

func policyLintRun(_ context.Context, o *PolicyLintOptions) error {
	f, g := o.f, o.g
	failOn, err := verify.ParseSeverity(o.FailOn)
	if err != nil {
		return UsageErr(err)
	}
	im, err := o.Source.Read(f.IO.In, o.File)
	if err != nil {
		return UsageErr(err)
	}
	doc := im.Lint(f.tool(), failOn)
	if g.JSON {
		err = writeJSON(f.IO.Out, doc)
	} else {
		err = limitconf.WriteLint(f.IO.Out, &doc)
	}
	if err != nil {
		return err
	}
	if !doc.Pass {
		return &ExitError{Class: session.Findings}
	}
	return nil
}
