package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/limitconf"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newPolicyCmd(f, g) })
}

// policySource are the flags that say which config and which part of it.
type policySource struct {
	format   string
	server   string
	location string
}

func (s *policySource) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.format, "format", "", "`FORMAT` of the config: nginx, envoy, traefik or kong (default: guessed from the name and content)")
	fl.StringVar(&s.server, "server", "", "keep the limits of one server: nginx server_name, Envoy virtual host, Traefik router, Kong service (`NAME`)")
	fl.StringVar(&s.location, "location", "", "keep the limits of one location or route (`PATH`, e.g. /api or \"= /login\")")
}

// read parses the config file (- is stdin). Unreadable or malformed
// input is a usage/input error (exit 2).
func (s *policySource) read(f *Factory, file string) (*limitconf.Import, error) {
	o := limitconf.Options{Server: s.server, Location: s.location}
	if s.format != "" {
		fm, err := limitconf.ParseFormat(s.format)
		if err != nil {
			return nil, UsageErr(err)
		}
		o.Format = fm
	}
	var im *limitconf.Import
	if file == "-" {
		data, err := io.ReadAll(io.LimitReader(f.IO.In, 64<<20))
		if err != nil {
			return nil, UsageErr(fmt.Errorf("policy: %w", err))
		}
		im, err = limitconf.Parse(data, file, o)
		if err != nil {
			return nil, UsageErr(err)
		}
		return im, nil
	}
	im, err := limitconf.ParseFile(file, o)
	if err != nil {
		return nil, UsageErr(err)
	}
	return im, nil
}

func newPolicyCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Turn a limiter's own config (nginx, Envoy, Traefik, Kong) into a policy, and lint it",
		Long: `Read the rate limits a limiter's configuration declares — nginx limit_req,
Envoy's HTTP local rate limit filter, Traefik's rateLimit middleware, Kong's
rate-limiting plugin — and say what they promise, without sending anything.

  import  write the policy file (rlprobe check --policy-file) the config
          declares, each rule with the file and line it comes from
  lint    report what the config cannot do as written: a limit that never
          runs (config-not-enforced), a zone no location uses, queueing,
          keys a proxy would collapse`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPolicyImportCmd(f, g), newPolicyLintCmd(f, g))
	return cmd
}

type policyImportOptions struct {
	src policySource
	out string
}

func newPolicyImportCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &policyImportOptions{}
	cmd := &cobra.Command{
		Use:   "import FILE [--format nginx|envoy|traefik|kong] [--server NAME] [--location PATH] [-o FILE]",
		Short: "Write the policy a limiter's config declares, each rule naming its source line",
		Long: `Write the policy file a limiter's configuration declares (the format of
--policy-file: version 1, endpoints), each rule preceded by comments naming
the file and line it comes from, how it was read, and what lint found
there. "-" reads the config from stdin.

How each product's settings become a policy (the mapping table is in the
limitconf package's documentation):
  nginx    limit_req rate with burst B: rate, capacity B + 1 (nodelay: a
           token bucket; without it the excess is queued); limit_req_status;
           $binary_remote_addr → key ip, $http_x_name → header:X-Name,
           a constant → global
  Envoy    token_bucket: rate tokens_per_fill / fill_interval, capacity
           max_tokens + min(tokens_per_fill, max_tokens), the bound that
           holds for every fill-timer phase and both refill implementations
  Traefik  rateLimit: rate average / period, capacity burst
  Kong     rate-limiting: one fixed, clock-aligned window per second,
           minute, hour or day configured; all apply

Lint findings are printed on stderr; the exit code is 0 once the policy is
written. A config that cannot be read is exit 2, with its file and line.`,
		Example: `  rlprobe policy import examples/nginx.conf -o policy.yaml
  rlprobe policy import nginx.conf --server api.example.com --location /login
  rlprobe policy import traefik.toml --format traefik
  rlprobe policy import kong.yaml --json | jq .policy`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(f, g, args[0]) },
	}
	o.src.addFlags(cmd)
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "write the policy file to `FILE` instead of stdout")
	return cmd
}

func (o *policyImportOptions) run(f *Factory, g *GlobalOptions, file string) error {
	im, err := o.src.read(f, file)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if g.JSON {
		err = encodeJSON(&b, im.Document("rlprobe "+f.Version))
	} else {
		err = limitconf.WritePolicy(&b, im)
	}
	if err != nil {
		return err
	}
	if !g.Quiet && !g.JSON {
		for _, fd := range im.Findings {
			if fd.Severity.AtLeast(verify.SeverityWarning) {
				fmt.Fprintf(f.IO.ErrOut, "rlprobe: %s (%s, %s): %s\n", fd.ID, fd.Severity, fd.Certainty, fd.Message)
			}
		}
	}
	if o.out == "" || o.out == "-" {
		_, err = f.IO.Out.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(o.out, b.Bytes(), 0o644); err != nil {
		return UsageErr(fmt.Errorf("-o: %w", err))
	}
	if !g.Quiet {
		fmt.Fprintf(f.IO.ErrOut, "rlprobe: %d rules from %s written to %s\n", len(im.Rules), file, o.out)
	}
	return nil
}

type policyLintOptions struct {
	src    policySource
	failOn string
}

func newPolicyLintCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &policyLintOptions{}
	cmd := &cobra.Command{
		Use:   "lint FILE [--format nginx|envoy|traefik|kong] [--server NAME] [--location PATH] [--fail-on SEVERITY]",
		Short: "Report what a limiter's config cannot do as written, without sending anything",
		Long: `Read a limiter's configuration and report, without sending a request, what
it cannot do as written:

  config-not-enforced  a limit that never runs: nginx limit_req in a location
                       answered by return (the rewrite phase runs before
                       limit_req's preaccess phase), limit_req_dry_run on,
                       an Envoy filter enabled for 0 % of requests, a
                       Traefik rateLimit with average 0 (certain: error)
  queueing-latency     nginx burst without nodelay: the excess waits
  key-behind-proxy     a client-address key with no realip configuration,
                       or a key any client can set
  zone-unused          an nginx zone no limit_req uses
  key-unknown, not-interpreted, limit-untestable   notes

Each finding names the file and line. The exit code is 1 when a certain
finding is at or above --fail-on (default error), 2 when the config cannot
be read. --json prints the rlprobe.policy-lint/v1 document.`,
		Example: `  rlprobe policy lint examples/nginx.conf
  rlprobe policy lint envoy.yaml --json
  rlprobe policy lint nginx.conf --fail-on warning`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(f, g, args[0]) },
	}
	o.src.addFlags(cmd)
	cmd.Flags().StringVar(&o.failOn, "fail-on", "error", "exit 1 on a certain finding at or above `SEVERITY`: info, warning or error")
	return cmd
}

func (o *policyLintOptions) run(f *Factory, g *GlobalOptions, file string) error {
	failOn, err := verify.ParseSeverity(o.failOn)
	if err != nil {
		return UsageErr(err)
	}
	im, err := o.src.read(f, file)
	if err != nil {
		return err
	}
	doc := im.Lint("rlprobe "+f.Version, failOn)
	if g.JSON {
		err = encodeJSON(f.IO.Out, doc)
	} else {
		err = writeLintText(f.IO.Out, &doc)
	}
	if err != nil {
		return err
	}
	if !doc.Pass {
		return &ExitError{Class: session.Findings}
	}
	return nil
}

// writeLintText prints the verdict, the findings, then the limits read.
func writeLintText(w io.Writer, d *limitconf.LintDocument) error {
	var b strings.Builder
	certain := 0
	var ids []string
	for _, fd := range d.Findings {
		if fd.Certainty == verify.Certain && fd.Severity == verify.SeverityError {
			certain++
			ids = append(ids, fd.ID)
		}
	}
	switch {
	case !d.Pass:
		fmt.Fprintf(&b, "FAIL: %s (%d certain)\n", strings.Join(uniq(ids), ", "), certain)
	default:
		fmt.Fprintf(&b, "PASS: no certain finding at or above --fail-on\n")
	}
	for _, fd := range d.Findings {
		fmt.Fprintf(&b, "  %-7s %-8s %s: %s\n", fd.Severity, fd.Certainty, fd.ID, fd.Message)
		if fd.Hint != "" {
			fmt.Fprintf(&b, "          hint: %s\n", fd.Hint)
		}
	}
	fmt.Fprintf(&b, "%s (%s): %d limits\n", d.File, d.Format, len(d.Rules))
	for _, r := range d.Rules {
		where := r.Location
		if r.Server != "" {
			where += " (server " + r.Server + ")"
		}
		extra := ""
		if r.Status != 0 {
			extra = fmt.Sprintf(", rejects with %d", r.Status)
		}
		if r.Binding {
			extra += ", binding"
		}
		fmt.Fprintf(&b, "  %s: %s: %s%s\n", r.Source, where, r.Describe(), extra)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// encodeJSON writes v as an indented JSON document.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
