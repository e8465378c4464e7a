package scenario

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// The soundness harness: honest reference servers, generated from an
// all-pairs covering array over the factors (soundness_cases_test.go), run
// the whole check suite and one pattern in a synctest bubble over
// in-memory connections, under injected disorder; no certain finding at
// warning or above may come of it. Servers with a deliberate fault must be caught, certainly, when
// nothing disturbs the run; under disorder the share caught is logged.
//
// Every case is a function of its seed (factor levels in the low bits,
// the fault above them, the random parameters in the high bits), so a
// failure prints a command that replays it alone:
//
//	go test ./internal/scenario -run 'TestSoundness$' -count=1 -v -args -seed=N
//
// RLPROBE_SOAK=1 runs ten times as many cases.

var soundSeed = flag.Uint64("seed", 0, "TestSoundness: replay only the case with this seed")

// soundOutcome is what one case gave.
type soundOutcome struct {
	c        *soundCase
	findings []verify.Finding
	bad      []verify.Finding // certain, warning or above, neither allowed nor the fault's
	found    bool             // the fault's finding is certain (fault cases)
	err      error
}

// replay is the command that runs case seed alone.
func replay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/scenario -run 'TestSoundness$' -count=1 -v -args -seed=%d", seed)
}

// TestSoundness runs the harness; see the comment at the top of the file.
func TestSoundness(t *testing.T) {
	if *soundSeed != 0 {
		c, err := decodeCase(*soundSeed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("case %d: %s", c.seed, c)
		o := runSoundCase(t, c)
		for _, f := range o.findings {
			t.Logf("  %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message)
		}
		judgeSound(t, o)
		return
	}
	rounds, perFault := soundRounds(soundCases), 8
	if os.Getenv("RLPROBE_SOAK") == "1" {
		rounds, perFault = soundRounds(10*soundCases), 80
	}
	cases := soundCaseList(rounds, perFault)
	outcomes := make([]soundOutcome, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			t.Run(fmt.Sprintf("%04d", i), func(t *testing.T) {
				t.Parallel()
				outcomes[i] = runSoundCase(t, c)
				judgeSound(t, outcomes[i])
			})
		}
	})
	logSoundShares(t, outcomes)
}

// soundRounds returns how many covering arrays make at least n cases.
func soundRounds(n int) int {
	per := len(allPairs(factorSizes(), rand.New(rand.NewPCG(1, 0))))
	return (n + per - 1) / per
}

func factorSizes() []int {
	s := make([]int, nFactors)
	for f := range nFactors {
		s[f] = len(soundFactors[f].levels)
	}
	return s
}

// soundCaseList builds the cases: rounds covering arrays of honest cases,
// and for each fault the first perFault fitting rows of the arrays at zero
// disorder, and perFault with disorder.
func soundCaseList(rounds, perFault int) []*soundCase {
	var cases []*soundCase
	var first [][nFactors]int // every row, in order
	for r := range rounds {
		rng := rand.New(rand.NewPCG(uint64(r)+1, 0xa11))
		for _, row := range allPairs(factorSizes(), rng) {
			var lv [nFactors]int
			copy(lv[:], row)
			c, _ := decodeCase(encodeSeed(lv, 0, rng.Uint64()>>(seedLevelBits+seedFaultBits)))
			cases = append(cases, c)
			first = append(first, lv)
		}
	}
	rng := rand.New(rand.NewPCG(0xfa, 0x17))
	for k, f := range soundFaults {
		calm, rough := 0, 0
		for _, lv := range first {
			c, _ := decodeCase(encodeSeed(lv, k+1, rng.Uint64()>>(seedLevelBits+seedFaultBits)))
			if !f.fits(c) {
				continue
			}
			switch {
			case c.level(fDisorder) == "none" && calm < perFault:
				calm++
			case c.level(fDisorder) != "none" && rough < perFault:
				rough++
			case calm < perFault:
				lv[fDisorder] = 0
				c, _ = decodeCase(encodeSeed(lv, k+1, c.seed>>(seedLevelBits+seedFaultBits)))
				calm++
			default:
				continue
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// judgeSound fails the test for a false positive on an honest server, or a
// fault missed at zero disorder.
func judgeSound(t *testing.T, o soundOutcome) {
	t.Helper()
	c := o.c
	switch {
	case o.err != nil:
		t.Errorf("case %s\n  seed=%d: %v\n  replay: %s", c, c.seed, o.err, replay(c.seed))
	case len(o.bad) > 0:
		var lines []string
		for _, f := range o.bad {
			lines = append(lines, fmt.Sprintf("    %s %s %s [%s]: %s", f.Severity, f.Certainty, f.ID, f.Check, f.Message))
		}
		what := "honest server, certain finding"
		if c.fault > 0 {
			what = "server with fault " + c.faultName() + ", a certain finding the fault does not explain"
		}
		t.Errorf("%s:\n  case %s\n  seed=%d\n%s\n  replay: %s", what, c, c.seed, strings.Join(lines, "\n"), replay(c.seed))
	}
	if fi := c.faultInfo(); fi != nil && !o.found && c.level(fDisorder) == "none" && !fi.optional && (fi.optionalIf == nil || !fi.optionalIf(c)) {
		var ids []string
		for _, f := range o.findings {
			ids = append(ids, fmt.Sprintf("%s/%s", f.ID, f.Certainty))
		}
		t.Errorf("fault %s not found certain (want %s; found %v):\n  case %s\n  seed=%d\n  replay: %s",
			c.faultName(), soundFaults[c.fault-1].want, ids, c, c.seed, replay(c.seed))
	}
}

// logSoundShares logs the totals: cases, false positives, and per fault
// the share found at zero disorder and under disorder.
func logSoundShares(t *testing.T, outs []soundOutcome) {
	honest, fp := 0, 0
	type share struct{ calm, calmFound, rough, roughFound int }
	per := make([]share, len(soundFaults))
	byID := map[string]int{}
	for _, o := range outs {
		if o.c == nil {
			continue
		}
		if o.c.fault == 0 {
			honest++
			if len(o.bad) > 0 || o.err != nil {
				fp++
			}
		}
		for _, f := range o.bad {
			byID[f.ID]++
		}
		if o.c.fault == 0 {
			continue
		}
		s := &per[o.c.fault-1]
		if o.c.level(fDisorder) == "none" {
			s.calm++
			if o.found {
				s.calmFound++
			}
		} else {
			s.rough++
			if o.found {
				s.roughFound++
			}
		}
	}
	t.Logf("soundness: %d cases, %d honest; %d honest cases with a certain finding at warning or above; such findings (faulty servers' included) by id: %v", len(outs), honest, fp, byID)
	for k, s := range per {
		t.Logf("  fault %-22s found %d/%d at zero disorder, %d/%d under disorder", soundFaults[k].name, s.calmFound, s.calm, s.roughFound, s.rough)
	}
}

// runSoundCase runs case c in a synctest bubble.
func runSoundCase(t *testing.T, c *soundCase) (out soundOutcome) {
	out.c = c
	synctest.Test(t, func(t *testing.T) {
		res, err := soundRun(t.Context(), c)
		// Let delayed writes on closed connections run out.
		time.Sleep(2 * (c.lateMax + c.jitterMax + linkDelay))
		if err != nil {
			out.err = err
			return
		}
		e, allowed := c.policy()
		pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{e}}
		if err := pol.Validate(); err != nil {
			out.err = fmt.Errorf("policy: %w", err)
			return
		}
		rep := verify.Analyze(record.Merge(res), pol.Normalize(), verify.Options{})
		out.findings = rep.Findings
		for _, f := range rep.Findings {
			if f.Certainty != verify.Certain {
				continue
			}
			if fl := c.faultInfo(); fl != nil && (f.ID == fl.want || fl.found && slices.Contains(fl.also, f.ID)) {
				out.found = true
			}
			if fl := c.faultInfo(); fl != nil && (f.ID == fl.want || slices.Contains(fl.also, f.ID)) {
				continue
			}
			if f.Severity.AtLeast(verify.SeverityWarning) && !slices.Contains(allowed, f.ID) {
				out.bad = append(out.bad, f)
			}
		}
	})
	return out
}

// soundRun serves c's server and probes it: the check suite, then the
// case's pattern on an identity of its own. It returns the record.
func soundRun(ctx context.Context, c *soundCase) (*record.Run, error) {
	rng := &lockedRand{r: rand.New(rand.NewPCG(c.seed, 0xd15))}
	pol, mem := c.server()
	hopt := testserver.HandlerOptions{EchoArrival: c.level(fEcho) == "on", Deployment: c.deploy}
	if c.disorder("reorder") {
		hopt.DecisionDelay = func(*http.Request) time.Duration { return rng.dur(c.reorderMax) }
	}
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{Policy: pol}}, Handler: hopt,
		Memory: mem, H2C: c.level(fTransport) == "h2c"})
	if err != nil {
		return nil, err
	}
	ml := testserver.NewMemListener()
	if err := srv.StartListener(&linkListener{Listener: ml, c: c, rng: rng}); err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.Background())

	// Start somewhere in a second of 2026: the bubble's clock starts in
	// 2000, before the Unix times X-RateLimit-Reset readers recognise as
	// epoch seconds (from 2001-09-09).
	time.Sleep(time.Until(soundEpoch) + c.phase)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // fake time
	defer cancel()
	zero := time.Now()
	base := probe.Options{URLs: []string{"http://" + testserver.MemListenerAddr + "/"}, Dial: ml.Dial, TimerPacing: true,
		H2C: c.level(fTransport) == "h2c", AbortAfterErrors: -1}
	e, _ := c.policy()
	identities := 1
	switch c.level(fKey) {
	case "ip":
		base.SourceIPs = sourceIPs
		identities = len(sourceIPs)
	case "header":
		base.ClientHeader = keyHeader
		identities = 0
	}
	var seq atomic.Int64
	var engines []*probe.Engine
	defer func() {
		for _, p := range engines {
			p.Close()
		}
	}()
	newEngine := func(o probe.Options) (*soundEngine, error) {
		p, err := probe.New(o)
		if err != nil {
			return nil, err
		}
		engines = append(engines, p)
		return &soundEngine{p: p, zero: zero, seq: &seq}, nil
	}
	eng, err := newEngine(base)
	if err != nil {
		return nil, err
	}
	s := verify.Suite{Rule: e, Engine: eng, Zero: zero,
		Options: verify.SuiteOptions{Identities: identities, Spoofing: e.Key == verify.KeyIP}}
	if e.Key == verify.KeyIP {
		s.Spoof = func(header string) (verify.Engine, error) {
			o := base
			o.ClientHeader, o.ClientValues, o.SourceIPs = header, spoofValues, sourceIPs[:1]
			return newEngine(o)
		}
	}
	var results []record.Result
	if ch := c.level(fChecks); ch != "none" {
		if ch != "all" {
			s.Options.Only = []string{ch}
		}
		sr, err := s.Run(ctx)
		if err != nil {
			return nil, fmt.Errorf("suite: %w", err)
		}
		results = sr.Results
	}
	ps, err := c.pattern(e, time.Now())
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	// The pattern on an identity nothing else used (the last one).
	client := 0
	switch c.level(fKey) {
	case "ip":
		client = len(sourceIPs) - 1
	case "header":
		client = 1000
	}
	for i := range ps.Sends {
		ps.Sends[i].Client = client
	}
	pres, err := eng.Run(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("pattern %s: %w", c.level(fPattern), err)
	}
	results = append(results, pres...)
	var sent int64
	for _, r := range results {
		if r.Outcome != record.OutcomeNotSent {
			sent++
		}
	}
	return &record.Run{Header: record.Header{Start: zero, Agent: "a1", Targets: base.URLs},
		Results: results, End: &record.End{Reason: record.ReasonCompleted, Scheduled: int64(len(results)), Sent: sent}}, nil
}

// pattern returns the case's pattern for rule e, to start at now.
func (c *soundCase) pattern(e verify.Endpoint, now time.Time) (patterns.Schedule, error) {
	q := int(e.Quota())
	period := e.Period()
	switch c.level(fPattern) {
	case "burst":
		return patterns.Burst(2*q+2, period/4)
	case "steady":
		return patterns.Steady(2*float64(q)/period.Seconds(), 2*period)
	case "edge":
		// q on each side of the next whole-period edge of the clock.
		next := now.Truncate(period).Add(period)
		if next.Sub(now) < 200*time.Millisecond {
			next = next.Add(period)
		}
		s, err := patterns.Edge(q, 100*time.Millisecond, 100*time.Millisecond)
		s.Start = next.Add(-100 * time.Millisecond)
		return s, err
	case "recovery":
		b, err := patterns.Burst(q+2, 0)
		if err != nil {
			return b, err
		}
		r, err := patterns.Recovery(max(period/10, 10*time.Millisecond), 2*period)
		if err != nil {
			return r, err
		}
		return patterns.Sequence(b, r)
	case "race":
		return patterns.Race(q+max(2, q/2), 1, patterns.Barrier)
	case "ramp":
		return patterns.Ramp(0, 3*float64(q)/period.Seconds(), 2*period)
	}
	return patterns.Schedule{}, errors.New("unknown pattern")
}
