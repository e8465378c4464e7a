package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
)

// targetOptions are the target flags of run, check and infer: the
// session's Target and the confirmation flag.
type targetOptions struct {
	session.Target
	Yes bool
}

func newTargetOptions(command string) targetOptions {
	return targetOptions{Target: session.DefaultTarget(command)}
}

// addTargetFlags adds every target flag of contract.md to cmd, filling o;
// its current values are the defaults (session.DefaultTarget).
func addTargetFlags(cmd *cobra.Command, o *targetOptions) {
	t := &o.Target
	fl := cmd.Flags()
	fl.StringVarP(&t.Method, "request", "X", t.Method, "request `METHOD`; other than GET, HEAD and OPTIONS needs --allow-unsafe-method")
	fl.BoolVar(&t.AllowUnsafeMethod, "allow-unsafe-method", false, "allow a method that may change state on the target (POST, PUT, DELETE…)")
	fl.StringArrayVarP(&t.Headers, "header", "H", nil, "request header \"Name: value\" (repeatable); @FILE reads one header a line; $VAR expands from the environment")
	fl.StringVar(&t.Body, "body", "", "request body: @FILE reads it from a file")
	fl.Var((*units.Duration)(&t.Timeout), "timeout", "per-request timeout")
	fl.StringVar(&t.CACert, "cacert", "", "PEM `FILE` of CA certificates to trust for https targets")
	fl.StringVar(&t.ClientCert, "client-cert", "", "PEM `FILE` of the client certificate (with --client-key)")
	fl.StringVar(&t.ClientKey, "client-key", "", "PEM `FILE` of the client key (with --client-cert)")
	fl.BoolVar(&t.Insecure, "insecure", false, "do not verify the target's TLS certificate")
	fl.BoolVar(&t.H2C, "h2c", false, "speak HTTP/2 over cleartext (prior knowledge) to http targets")
	fl.IntVar(&t.Clients, "clients", t.Clients, "number of client identities; each plays the whole pattern")
	fl.StringVar(&t.ClientHeader, "client-header", "", "request header `NAME` carrying the client identity (values k1…kN, or --client-values)")
	fl.StringVar(&t.ClientValues, "client-values", "", "`FILE` of client identity values, one a line (for --client-header)")
	fl.StringVar(&t.SourceIPs, "source-ips", "", "source addresses of the clients: a comma-separated `LIST` or a CIDR (127.0.0.2,127.0.0.3 or 127.0.0.0/29)")
	fl.StringArrayVar(&t.SecretHeaders, "secret-header", nil, "header `NAME` whose values are never written (repeatable; Authorization, cookies and API keys always are)")
	fl.StringArrayVar(&t.SecretQuery, "secret-query", nil, "query parameter `NAME` whose values are never written (repeatable; api_key, key, token, sig, password, session… are by default)")
	fl.BoolVar(&t.NoDefaultSecrets, "no-default-secrets", false, "write the default secret query parameters (api_key, key, token…) as they are; only --secret-query names are redacted")
	fl.Uint64Var(&t.Seed, "seed", 0, "seed of every randomised choice (default: random, recorded in the file)")
	fl.StringVar(&t.Out, "out", "", "record `FILE` (default ./rlprobe-"+t.Command+"-<UTC time>.jsonl, -2, -3… when taken); never overwritten without --force")
	fl.BoolVar(&t.Force, "force", false, "overwrite the --out file if it exists")
	fl.IntVar(&t.MaxRequests, "max-requests", t.MaxRequests, "safety cap: refuse a plan of more requests")
	fl.Var((*units.Duration)(&t.MaxDuration), "max-duration", "safety cap: refuse a plan that lasts longer")
	fl.Var((*units.Rate)(&t.MaxRate), "max-rate", "safety cap: never send faster than this rate")
	fl.IntVar(&t.AbortAfterErrors, "abort-after-errors", t.AbortAfterErrors, "abort after this many consecutive transport errors (0: never)")
	fl.IntVar(&t.Connections, "connections", t.Connections, "keep at most `N` HTTP/1.1 connections per client and URL; requests due while all are busy wait for one and count late")
	fl.IntVar(&t.MaxHeaderBytes, "max-header-bytes", t.MaxHeaderBytes, "largest response head read; a larger one is an error (header-too-large) and its connection is closed")
	fl.Int64Var(&t.MaxBodyBytes, "max-body-bytes", t.MaxBodyBytes, "response body bytes read; beyond them the answer still counts and its connection is closed")
	fl.StringVar(&t.StartAt, "start-at", "", "send the first request at `TIME` (RFC 3339 or a time of day such as 12:00:05)")
	fl.StringVar(&t.TimeRef, "time-ref", "", "measure this agent's clock offset against `URL` (its Date header, or the X-Rlprobe-Arrival echo of rlprobe serve --echo-arrival) and record it in the record header; name an endpoint outside the limit, since the measurement sends about a dozen requests")
	fl.BoolVar(&t.DryRun, "dry-run", false, "print the plan and its duration, send nothing")
	fl.StringVar(&t.Proxy, "proxy", "", "reach the targets through this forward proxy `URL` (http://, socks5:// or socks5h://, USER:PASS@ allowed; default: HTTPS_PROXY or HTTP_PROXY); NO_PROXY still names targets reached directly")
	fl.StringVar(&t.Agent, "agent", "", "name this agent in the record (default: host name and process id), so merged records tell agents apart")
	fl.BoolVar(&o.Yes, "yes", false, "do not ask for confirmation before probing a target that is not on this machine")
}

// changedFlags returns the names of the flags the user set, prefixed.
func changedFlags(cmd *cobra.Command, names []string, prefix string) []string {
	var set []string
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			set = append(set, prefix+name)
		}
	}
	return set
}

// targetChanged records which target flags the user set (in RunE).
func (o *targetOptions) targetChanged(cmd *cobra.Command, urls []string) {
	o.URLs = urls
	o.ClientsSet = cmd.Flags().Changed("clients")
	o.SeedSet = cmd.Flags().Changed("seed")
	o.MaxRequestsSet = cmd.Flags().Changed("max-requests")
	o.TimeoutSet = cmd.Flags().Changed("timeout")
}

// startAtSuiteUsage is the --start-at help of check and infer, whose first
// request is the preflight.
const startAtSuiteUsage = "send the first request, the preflight, at `TIME` (RFC 3339 or a time of day such as 12:00:05), the probes right after it: agents given the same TIME start together"

// newSession resolves the target flags into a session that reports
// through f's streams: the plan summary on a terminal and the question
// before probing a remote target, warnings, and progress through p.
func (o *targetOptions) newSession(f *Factory, g *GlobalOptions, p *reporter) (*session.Session, error) {
	cfg, err := o.Resolve(f.now(), f.Env)
	if err != nil {
		return nil, err
	}
	cfg.Tool = f.tool()
	if f.ProbeOptions != nil {
		f.ProbeOptions(&cfg.Probe)
	}
	cfg.Confirm = func(summary string) error {
		if f.IO.ErrTTY && !g.Quiet {
			fmt.Fprintln(f.IO.ErrOut, summary)
		}
		return o.confirm(f, summary)
	}
	cfg.Warn = func(msg string) { fmt.Fprintf(f.IO.ErrOut, "rlprobe: warning: %s\n", msg) }
	if p != nil {
		cfg.Progress = p.hooks()
	}
	return session.New(*cfg)
}

// confirm asks, on an interactive terminal and unless --yes, before
// probing targets that are not on this machine. It returns a usage error
// when the user declines.
func (o *targetOptions) confirm(f *Factory, summary string) error {
	if o.Yes || o.DryRun || !f.IO.ErrTTY || !isTerminal(f.IO.In) {
		return nil
	}
	remote := o.RemoteURLs()
	if len(remote) == 0 {
		return nil
	}
	fmt.Fprintf(f.IO.ErrOut, "%s\nProbe %s? [y/N] ", summary, strings.Join(remote, ", "))
	line, _ := bufio.NewReader(f.IO.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return session.Suggest(session.Usage, "not confirmed: nothing sent (to skip this question)", session.Fix{Flag: "--yes"})
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
