package cli

import (
	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/units"
)

// addPolicyFlags adds the policy flags of check, analyze and watch (contract.md
// "Policy flags") to cmd, filling o.
func addPolicyFlags(cmd *cobra.Command, o *session.PolicySpec) {
	fl := cmd.Flags()
	fl.Int64Var(&o.Limit, "limit", 0, "declared policy: at most `N` accepted requests per --window")
	fl.Var((*units.Duration)(&o.Window), "window", "declared policy: the window length (Go syntax: 60s, 1m)")
	fl.StringVar(&o.WindowType, "window-type", "", "sliding (N in any interval of length W; the default) or fixed (N per window)")
	fl.StringVar(&o.Align, "align", "", "where fixed windows start: epoch or first-request (the default)")
	fl.Var((*units.Rate)(&o.Rate), "rate", "declared policy: a bucket refilled at this rate (N/s, N/m, N/h, Nr/s, Nr/m)")
	fl.Int64Var(&o.Capacity, "capacity", 0, "declared policy: the bucket's capacity (requests accepted at once from idle)")
	fl.Int64Var(&o.Burst, "burst", 0, "declared policy: nginx's burst, capacity − 1 (give --capacity or --burst)")
	fl.StringVar(&o.Key, "key", "", "who shares a quota: global (the default), ip or header:NAME")
	fl.IntVar(&o.Status, "status", 0, "the declared reject status (default: 429 or 503)")
	fl.StringVar(&o.Headers, "headers", "", "expected rate-limit header `DIALECTS`, comma-separated: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8, draft-11, draft-12")
	fl.StringVar(&o.RetryAfter, "retry-after", "", "required: a rejection without Retry-After is an error; optional (the default): a warning")
	fl.StringVar(&o.Penalty, "penalty", "", "what a refusal does beyond counting, `PENALTY`: block:D (every request refused for D from the first refusal, then a fresh quota), extend (every request moves the window's end) or restart (every refusal does); extend and restart for windows only")
	fl.StringVar(&o.Draft, "policy", "", "declared policy in the RateLimit-Policy syntax, e.g. '\"api\";q=100;w=60'")
	fl.StringVar(&o.File, "policy-file", "", "declared policy `FILE` (YAML or JSON: version: 1, endpoints: [...])")
	o.Changed = fl.Changed
}
