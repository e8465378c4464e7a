package watch

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/session"
)

// Settings are a watch's own settings as a front end spells them (the
// flags of rlprobe watch), before they are checked; Config checks them.
type Settings struct {
	// Every is Config.Every; negative is refused.
	Every time.Duration
	// Budget is the share as a percentage such as "2%" (ParseShare).
	Budget string
	// FailOn is the severity name of Config.FailOn: info, warning or error.
	FailOn string
	// MetricsListen, when set, is where to serve Prometheus metrics
	// (host:port, MetricsAddr's rules); Public allows a non-loopback host.
	MetricsListen string
	Public        bool
	// Dir, Keep and KeepBytes are Config.Dir's Path, Keep and KeepBytes.
	Dir       string
	Keep      int
	KeepBytes int64
	// Once and Infer are Config.Once and Config.Infer.
	Once  bool
	Infer bool
}

// Config checks every setting and returns the Config they make: Every,
// Share, FailOn, Dir, Once and Infer set, and Metrics a fresh NewMetrics
// when MetricsListen is set; the caller adds the session, policy and
// sinks. metricsAddr is MetricsAddr's answer for MetricsListen ("" when
// unset), to give ServeMetrics. problems lists every bad setting at once,
// in the flags' words, in a fixed order (session.Problems makes them the
// usage error); when it is not empty the Config is not to be used.
func (s Settings) Config() (cfg Config, metricsAddr string, problems []problem.Problem) {
	share, err := ParseShare(s.Budget)
	problems = append(problems, problem.From(err)...)
	failOn, err := session.ParseFailOn(s.FailOn)
	problems = append(problems, problem.From(err)...)
	if s.Every < 0 {
		problems = append(problems, problem.Problem{Message: "--every must be positive"})
	}
	if s.MetricsListen != "" {
		metricsAddr, err = MetricsAddr(s.MetricsListen, s.Public)
		problems = append(problems, problem.From(err)...)
	}
	cfg = Config{Every: s.Every, Share: share, FailOn: failOn, Once: s.Once, Infer: s.Infer,
		Dir: Dir{Path: s.Dir, Keep: s.Keep, KeepBytes: s.KeepBytes}}
	if metricsAddr != "" {
		cfg.Metrics = NewMetrics()
	}
	return cfg, metricsAddr, problems
}

// NewLogger returns a Config.Log that writes each event for people or
// programs: with asJSON the event document, one line on out (JSON Lines);
// else a line "TIME rlprobe watch: MESSAGE" on errOut (TIME in RFC 3339),
// where quiet keeps only drift and finding events.
func NewLogger(out, errOut io.Writer, asJSON, quiet bool) func(Event) {
	return func(ev Event) {
		if asJSON {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(out, "%s\n", b)
			return
		}
		if quiet && ev.Kind != KindDrift && ev.Kind != KindFinding {
			return
		}
		fmt.Fprintf(errOut, "%s rlprobe watch: %s\n", ev.Time.Format(time.RFC3339), ev.Message)
	}
}
