package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/internal/scenario"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return newDemoCmd(f, g) })
}

// demoOptions are the flags of `rlprobe demo`. --html arrives with the
// report package.
type demoOptions struct {
	scenario scenario.DemoOptions
}

func newDemoCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	o := &demoOptions{}
	return &cobra.Command{
		Use:   "demo",
		Short: "Show a rate limiter at work: the nginx limit_req demo on the reference server",
		Long: `Start the reference server on a free loopback port, limiting like nginx's
"limit_req rate=1r/s burst=3 nodelay" (503, no Retry-After, no rate-limit
headers), fire a burst of 8 requests at it, and show the outcomes in the order
the server received them: four 200s, then four 503s.

Nothing leaves this machine and nothing is written to disk.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return demoRun(cmd.Context(), f, g, o)
		},
	}
}

// demoDoc is the --json document of `rlprobe demo`.
type demoDoc struct {
	Schema   string         `json:"schema"`
	Tool     string         `json:"tool"`
	Server   demoServer     `json:"server"`
	Requests []demoRequest  `json:"requests"`
	Counts   map[string]int `json:"counts"`
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
	res, err := scenario.Demo(ctx, o.scenario)
	if err != nil {
		if ctx.Err() != nil {
			return Unreachablef("demo interrupted")
		}
		return WithCode(ExitInternal, err)
	}
	if g.JSON {
		lc := res.Policy.Limiter
		doc := demoDoc{
			Schema: "rlprobe.demo/v1", Tool: "rlprobe " + f.Version,
			Server: demoServer{Algorithm: string(lc.Algorithm), RatePerS: lc.Rate, Capacity: lc.Capacity,
				NoDelay: lc.NoDelay, Status: res.Policy.Status, RetryAfter: false},
			Counts: res.Counts,
		}
		for _, q := range res.Requests {
			doc.Requests = append(doc.Requests, demoRequest{Seq: q.Result.Seq,
				ArrivalMS: float64(q.Arrival) / float64(time.Millisecond), Status: q.Result.Status,
				Outcome: q.Outcome, Err: q.Result.Err})
		}
		return writeJSON(f.IO.Out, doc)
	}
	return res.WriteText(f.IO.Out)
}
