package scenario

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/testserver"
)

// Wild is what the selftest cases of limiters as people run them add to a
// case: a counter that is not atomic, long clock-aligned windows started
// at any phase, and other clients sharing the quota.
type Wild struct {
	// Memory configures the reference server's memory backend: NonAtomic
	// with a RaceGap over-admits under concurrency.
	Memory testserver.MemoryConfig
	// MaxWindow is the longest window infer looks for; 0 means the
	// selftest's 10 s.
	MaxWindow time.Duration
	// Period and Phase delay the start of infer until the clock modulo
	// Period is Phase (a 60 s epoch window entered at second Phase).
	Period, Phase time.Duration
	// Foreign is other clients' traffic on the same (global) key while
	// infer runs, as a share of the limiter's rate (limit per window, or
	// the bucket's rate): evenly spaced requests from another client.
	Foreign float64
	// Long marks a case that takes minutes in real time: it runs only
	// with SelftestOptions.Long (under synctest, where time is fake).
	Long bool
}

// wildCases are the cases of issue 13: a queue that only delays, a
// non-atomic fixed window, 60 s epoch windows with and without headers
// entered at several phases, every Retry-After lie and the accurate one,
// and foreign traffic at 20 % of the limit on six algorithms.
func wildCases() []SelftestCase {
	pol := func(lc limiter.Config, d headers.Dialect) *testserver.Policy {
		return &testserver.Policy{Name: "selftest", Limiter: lc, Key: testserver.KeyGlobal, Status: 429, Dialects: []headers.Dialect{d}}
	}
	fw := func(n int64, w time.Duration, align limiter.Align) limiter.Config {
		return limiter.Config{Algorithm: limiter.FixedWindow, Limit: n, Window: w, Align: align}
	}
	windows := func(n int64, w time.Duration) map[string]float64 {
		return map[string]float64{"limit": float64(n), "window_s": w.Seconds()}
	}
	var cs []SelftestCase
	cs = append(cs, SelftestCase{Name: "leaky-bucket-delay-only",
		Policy: pol(limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 20, Capacity: 1001}, headers.None),
		Want: SelftestWant{Family: infer.LeakyBucketQueue, Key: infer.KeyGlobal, NeverRejects: true,
			Params: map[string]float64{"rate_per_s": 20, "undelayed": 1}}})
	cs = append(cs, SelftestCase{Name: "fixed-window-non-atomic",
		Policy: pol(fw(10, 2*time.Second, limiter.AlignEpoch), headers.XRateLimitEpoch),
		Wild:   Wild{Memory: testserver.MemoryConfig{NonAtomic: true, RaceGap: 2 * time.Millisecond}},
		Want: SelftestWant{Family: infer.FixedWindow, Alignment: infer.AlignEpoch, Key: infer.KeyGlobal, OverAdmission: true,
			Params: windows(10, 2*time.Second)}})
	for _, d := range []headers.Dialect{headers.Draft8, headers.None} {
		for _, phase := range []time.Duration{0, 17 * time.Second, 41 * time.Second, 59 * time.Second} {
			cs = append(cs, SelftestCase{Name: fmt.Sprintf("fixed-window-60s-epoch-%s-at-%ds", d, int(phase.Seconds())),
				Policy: pol(fw(20, time.Minute, limiter.AlignEpoch), d),
				Wild:   Wild{MaxWindow: time.Minute, Period: time.Minute, Phase: phase, Long: true},
				Want:   SelftestWant{Family: infer.FixedWindow, Alignment: infer.AlignEpoch, Key: infer.KeyGlobal, Params: windows(20, time.Minute)}})
		}
	}
	for _, ra := range []struct {
		mode  testserver.RetryAfterMode
		grade string
	}{{testserver.RetryAccurate, "rounded-up"}, {testserver.RetryEarly, "early"}, {testserver.RetryLate, "late"}} {
		p := pol(fw(4, time.Second, limiter.AlignFirstRequest), headers.None)
		p.RetryAfter = ra.mode
		cs = append(cs, SelftestCase{Name: "retry-after-" + string(ra.mode), Policy: p,
			Want: SelftestWant{Family: infer.FixedWindow, Key: infer.KeyGlobal, RetryAfterGrade: ra.grade, Params: windows(4, time.Second)}})
	}
	foreign := []struct {
		name string
		lc   limiter.Config
		fam  infer.Family
	}{
		{"fixed-window-epoch", fw(10, 2*time.Second, limiter.AlignEpoch), infer.FixedWindow},
		{"sliding-log", limiter.Config{Algorithm: limiter.SlidingLog, Limit: 10, Window: 2 * time.Second}, infer.SlidingLog},
		{"token-bucket", limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 8}, infer.TokenBucket},
		{"leaky-bucket", limiter.Config{Algorithm: limiter.LeakyBucket, Rate: 5, Capacity: 8}, infer.LeakyBucketQueue},
		{"fixed-window-first", fw(10, 2*time.Second, limiter.AlignFirstRequest), infer.FixedWindow},
		{"sliding-window-counter", limiter.Config{Algorithm: limiter.SlidingWindowCounter, Limit: 10, Window: 2 * time.Second, Align: limiter.AlignEpoch}, infer.SlidingWindowCounter},
		{"gcra", limiter.Config{Algorithm: limiter.GCRA, Rate: 4, Capacity: 6}, infer.TokenBucket},
	}
	for _, f := range foreign {
		cs = append(cs, SelftestCase{Name: f.name + "-foreign-20pct", Policy: pol(f.lc, headers.None),
			Wild: Wild{Foreign: 0.2}, Want: SelftestWant{Family: f.fam, Key: infer.KeyGlobal, OutsideModels: true}})
	}
	return cs
}

// start waits for the case's phase and starts its foreign traffic; it
// returns the stop function of the whole case (the traffic's, then stop).
func (w Wild) start(ctx context.Context, stop func(), host string, dial probe.DialFunc, p *testserver.Policy) func() {
	if w.Period > 0 {
		now := time.Now()
		wait := (w.Phase - time.Duration(now.UnixNano())%w.Period + w.Period) % w.Period
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	if w.Foreign <= 0 || p == nil {
		return stop
	}
	rate := w.Foreign * p.Limiter.Rate
	if p.Limiter.Window > 0 {
		rate = w.Foreign * float64(p.Limiter.Limit) / p.Limiter.Window.Seconds()
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return stop
	}
	tr := &http.Transport{}
	if dial != nil {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, network, addr, netip.Addr{})
		}
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A foreign client keeps its own clock: an odd phase and period keep
		// its requests off the instants the probe's schedule uses, so that
		// under synctest no two requests meet at one fake instant, where
		// their order would be the goroutines' (and the grid not
		// replayable).
		select {
		case <-time.After(3141 * time.Microsecond):
		case <-fctx.Done():
			return
		}
		t := time.NewTicker(time.Duration(float64(time.Second)/rate) + 1373*time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-t.C:
			}
			req, err := http.NewRequestWithContext(fctx, http.MethodGet, "http://"+host+"/", nil)
			if err != nil {
				return
			}
			req.Header.Set(SelftestClientHeader, "foreign")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
		stop()
	}
}

// judgeWild checks what the wild cases want beyond the family and
// parameters.
func judgeWild(w SelftestWant, inf *infer.Inference) []string {
	var problems []string
	if w.NeverRejects && (!inf.NeverRejects || inf.Params.Queue != nil) {
		problems = append(problems, fmt.Sprintf("never_rejects %v, queue %v; want true and null", inf.NeverRejects, inf.Params.Queue))
	}
	if w.OverAdmission {
		oa := inf.OverAdmission
		if oa == nil || oa.ConcurrentMax <= oa.SequentialMax {
			problems = append(problems, fmt.Sprintf("over_admission %+v, want concurrent_max above sequential_max", oa))
		}
	}
	if w.RetryAfterGrade != "" {
		got := "null"
		if inf.RetryAfter.Grade != nil {
			got = *inf.RetryAfter.Grade
		}
		if got != w.RetryAfterGrade {
			problems = append(problems, fmt.Sprintf("retry_after grade %s, want %s", got, w.RetryAfterGrade))
		}
	}
	return problems
}

// ParamCoverage is how often a parameter's reported [low, high] contained
// the truth, over the cases whose family was right.
type ParamCoverage struct {
	Name           string
	Cases, Covered int
	// Missed names the cases whose bounds left the truth out.
	Missed []string
}

// Share is Covered/Cases (1 when there were no cases).
func (c ParamCoverage) Share() float64 {
	if c.Cases == 0 {
		return 1
	}
	return float64(c.Covered) / float64(c.Cases)
}

// coverageSlack is the relative slack of the bounds' check: reported
// bounds carry 4 significant digits.
const coverageSlack = 5e-4

// Coverage returns, per parameter of the contract, how often the reported
// bounds contained the true value, over the cases that ran, got the
// family right and estimated the parameter (one that was not estimated is
// not covered).
func (r *SelftestReport) Coverage() []ParamCoverage {
	var out []ParamCoverage
	for _, name := range []string{"limit", "window_s", "rate_per_s", "capacity", "undelayed", "queue"} {
		c := ParamCoverage{Name: name}
		for _, row := range r.Rows {
			truth, ok := row.Case.Want.Params[name]
			if !ok || row.Got == nil || row.Got.Algorithm != row.Case.Want.Family {
				continue
			}
			c.Cases++
			if p := paramOf(row.Got, name); p != nil &&
				p.Low <= truth+coverageSlack*math.Abs(truth) && truth-coverageSlack*math.Abs(truth) <= p.High {
				c.Covered++
			} else {
				c.Missed = append(c.Missed, row.Case.Name)
			}
		}
		if c.Cases > 0 {
			out = append(out, c)
		}
	}
	return out
}

// CoverageText prints the coverage, one line per parameter.
func (r *SelftestReport) CoverageText() string {
	var b strings.Builder
	b.WriteString("bounds containing the truth:\n")
	for _, c := range r.Coverage() {
		fmt.Fprintf(&b, "  %-11s %3d of %3d  %5.1f%%", c.Name, c.Covered, c.Cases, 100*c.Share())
		if len(c.Missed) > 0 {
			fmt.Fprintf(&b, "  (missed: %s)", strings.Join(c.Missed, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
