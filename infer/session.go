package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// errBudget ends the experiments when the time or request budget is spent.
var errBudget = errors.New("infer: budget spent")

// Tuning of the experiments.
const (
	// firstBurst is the size of the first burst from idle; each following
	// burst is burstGrowth times larger until one is refused.
	firstBurst  = 16
	burstGrowth = 4
	maxBursts   = 4
	// scanStart is the first offset of a recovery scan; offsets grow by
	// √2 per probe.
	scanStart = 20 * time.Millisecond
	// maxRounds bounds the designed experiments.
	maxRounds = 16
	// minInfo is the least expected information (bits) worth an experiment.
	minInfo = 0.02
	// budgetSlack is the constant term of the time budget 6·W + 30 s.
	budgetSlack = 30 * time.Second
	// designSlack is how many outcomes beyond the best a hypothesis may
	// miss and still be designed for (at a likelihood of 0.1 per miss).
	designSlack = 2
)

// debugf, when set (by tests), receives a trace of the experiment design.
var debugf func(format string, args ...any)

func trace(format string, args ...any) {
	if debugf != nil {
		debugf(format, args...)
	}
}

// prober is one inference run: the experiments so far and their results.
type prober struct {
	eng     Engine
	opts    *Options
	start   time.Time
	results []record.Result // opts.Prior first, then ours
	sent    int             // requests of ours that went out
	// deadline ends the experiments; set to start + budget once W is known.
	deadline  time.Time
	budgetSet bool
	// stopped reports that the budget or an error ended the experiments.
	stopped bool
	// key test.
	// keySent: requests of a second identity were sent; keyTested: the fit
	// could tell a global key from one per client, perClient the answer.
	keySent, keyTested, perClient bool
	// client is the main identity as the results name it.
	client string
	// over is set once a burst showed over-admission: from then on pace
	// spreads the sends of a burst, and only results from fitFrom on are
	// fitted; concurrent holds the separate concurrent burst's results.
	over       *overAdmission
	pace       time.Duration
	fitFrom    int
	concurrent []record.Result
	// f is the current fit (nil: none yet).
	f *fit
	// budget is 6·W + 30 s once W is known (announce), 0 before.
	budget time.Duration
	// extended: the budget was extended once for an answer not yet exact.
	extended bool
	// validations counts the validation experiments run; validated says
	// the current answer passed one, validation how.
	validations int
	validated   *variant
	validation  string
}

// Infer identifies the algorithm behind the target by experiments run
// through eng, then fits every candidate model to what it observed.
//
// It first sends bursts from idle until one is refused (the first count,
// and for a queueing limiter its latency staircase), scans the recovery
// with single probes at growing offsets, exhausts the limiter again (with,
// when Options.Clients ≥ 2, two requests of a second identity to tell a
// global key from a per-client one) and scans again. From then on it fits
// every model to everything observed and chooses, among candidate
// experiments (probes where the models disagree on recovery, bursts at
// several phases, spread-then-burst, sustained load, an edge straddle),
// the one that best splits the models still plausible, until one family
// with narrow parameters remains, no experiment can tell the rest apart,
// or the budget is spent: 6·W + 30 s (announced through Options.OnBudget
// as soon as W is known), Options.MaxDuration and Options.MaxRequests.
//
// The returned Inference is never nil unless the error is; on an engine
// error or a cancelled context Infer returns what it has concluded so far
// (Complete false) together with the error.
//
// Infer calls eng.Run, Options.Now, Options.OnPhase and Options.OnBudget
// from the calling goroutine only, one call at a time; it keeps nothing
// after it returns. Different calls may run concurrently with different
// engines.
func Infer(ctx context.Context, eng Engine, opts Options) (*Inference, error) {
	s := &prober{eng: eng, opts: &opts, start: opts.now()}
	s.results = append(s.results, opts.Prior...)
	s.deadline = s.start.Add(opts.maxDuration())
	inf, err := s.infer(ctx)
	if inf != nil {
		inf.Requests = s.sent
		for _, r := range opts.Prior {
			if r.Outcome != record.OutcomeNotSent {
				inf.Requests++
			}
		}
		inf.DurationS = math.Round(opts.now().Sub(s.start).Seconds()*1000) / 1000
		if s.stopped || err != nil {
			inf.Complete = false
		}
	}
	if errors.Is(err, errBudget) {
		err = nil
	}
	return inf, err
}

// InferRecords fits every candidate model to results already recorded (an
// offline analysis: no experiment is run). Results from several clients are
// fitted both with one global key and with a key per client, and the better
// is kept. Times count from origin.
func InferRecords(results []record.Result, origin time.Time, opts Options) (*Inference, error) {
	o := observe(results, origin, opts.RejectStatus)
	if len(o.list) == 0 {
		return nil, fmt.Errorf("infer: no accepted or rejected response among %d results", len(results))
	}
	key := KeyUnknown
	var f *fit
	if o.rejected > 0 {
		f = search(o, defaultSpace(o, opts.maxWindow(), false))
		if clientsOf(o) > 1 {
			g := search(o, defaultSpace(o, opts.maxWindow(), true))
			wf, _ := f.winner()
			wg, okg := g.winner()
			switch {
			case okg && wg.miss < wf.miss:
				f, key = g, keyName(opts.KeyName)
			case okg && wf.miss < wg.miss:
				key = KeyGlobal
			}
		}
	}
	inf := conclude(results, origin, o, f, key, &opts)
	for _, r := range results {
		if r.Outcome != record.OutcomeNotSent {
			inf.Requests++
		}
	}
	if o.last.After(o.first) {
		inf.DurationS = math.Round(o.last.Sub(o.first).Seconds()*1000) / 1000
	}
	return inf, nil
}

func clientsOf(o *observations) int {
	seen := map[string]bool{}
	for _, ob := range o.list {
		seen[ob.client] = true
	}
	return len(seen)
}

func keyName(k string) string {
	if k == "" {
		return KeyUnknown
	}
	return k
}

func (s *prober) now() time.Time { return s.opts.now() }

// run sends the sends (offsets from at) as one schedule due at at. It
// refuses, with errBudget, a schedule that would overrun the deadline or
// the request cap.
func (s *prober) run(ctx context.Context, phase string, at time.Time, sends []patterns.Send) ([]record.Result, error) {
	if len(sends) == 0 {
		return nil, nil
	}
	sends = s.paced(sends)
	if s.sent+len(sends) > s.opts.maxRequests() {
		s.stopped = true
		return nil, errBudget
	}
	// An experiment whose start has passed while it was being designed is
	// sent as soon as possible, whole.
	if soon := s.now().Add(s.opts.lead() / 2); at.Before(soon) {
		at = soon
	}
	end := at.Add(sends[len(sends)-1].At)
	if end.After(s.deadline) {
		s.stopped = true
		return nil, errBudget
	}
	if err := ctx.Err(); err != nil {
		s.stopped = true
		return nil, err
	}
	clients := 1
	for i := range sends {
		if sends[i].Phase == "" {
			sends[i].Phase = phase
		}
		clients = max(clients, sends[i].Client+1)
	}
	if s.opts.OnPhase != nil {
		s.opts.OnPhase(phase, s.sent)
	}
	sched := patterns.Schedule{Sends: sends, Clients: clients, Start: at, Duration: sends[len(sends)-1].At}
	res, err := s.eng.Run(ctx, sched)
	for _, r := range res {
		if r.Outcome != record.OutcomeNotSent {
			s.sent++
		}
	}
	s.results = append(s.results, res...)
	if err != nil {
		s.stopped = true
		return res, fmt.Errorf("infer: %s: %w", phase, err)
	}
	return res, nil
}

// burst returns n sends at offset 0 for client 0.
func burstSends(n int) []patterns.Send {
	return make([]patterns.Send, n)
}

// counts returns how many of res were accepted and rejected.
func (s *prober) counts(res []record.Result) (acc, rej int) {
	for _, r := range res {
		switch c, _ := record.Classify(r, s.opts.RejectStatus); c {
		case record.ClassAccepted:
			acc++
		case record.ClassRejected:
			rej++
		}
	}
	return acc, rej
}

// observe builds the observations of everything so far.
func (s *prober) observe() *observations {
	o := observe(s.fitted(), s.opts.Origin, s.opts.RejectStatus)
	o.pace = s.pace
	return o
}

// fitted returns the results the models are fitted to: all of them, or,
// once over-admission paced the session, those from fitFrom on.
func (s *prober) fitted() []record.Result { return s.results[s.fitFrom:] }

// arrivalOf returns the latest send time of res as an absolute time.
func (s *prober) lastSent(res []record.Result) time.Time {
	var t int64
	for _, r := range res {
		t = max(t, r.Wrote, r.Sent)
	}
	return s.opts.Origin.Add(time.Duration(t))
}

// scan sends single probes at from + first·√2^k (those still ahead) until
// one is accepted; it returns the offsets of the last refused probe and of
// the accepted one. When the rejections before it advertised when quota
// returns (hint: Retry-After, or a rate-limit header's reset, at least
// minHint ahead), the geometric probes stop short of it and a comb of
// probes refines the second before the advertised moment instead (the
// advertisement is checked, not trusted: the geometric scan goes on beyond
// the comb when nothing there was accepted).
func (s *prober) scan(ctx context.Context, phase string, from time.Time, first time.Duration, hint time.Time) (lo, hi time.Duration, err error) {
	horizon := 2*s.opts.maxWindow() + 10*time.Second
	if !hint.IsZero() && hint.Add(2*time.Second).Before(s.deadline) {
		// An advertised return within the budget is waited for, however
		// long the window (an hour window, advertised, is seen to end).
		horizon = max(horizon, hint.Sub(from)+2*time.Second)
	}
	var combLo, combHi time.Duration
	if h := hint.Sub(from); !hint.IsZero() && h >= minHint {
		step := combStep(h)
		combLo, combHi = h-time.Second-step, h+2*step
	}
	for k := 0; ; k++ {
		off := time.Duration(float64(first) * math.Pow(math.Sqrt2, float64(k)))
		if combHi > 0 && off >= combLo {
			acc, l, h, err := s.comb(ctx, phase, from, combLo, combHi, combStep(hint.Sub(from)))
			if err != nil || acc {
				if l == 0 {
					l = lo
				}
				return l, h, err
			}
			lo, combHi = combHi, 0
			continue
		}
		if off > horizon {
			return lo, 0, nil
		}
		if off <= lo {
			continue
		}
		at := from.Add(off)
		if at.Before(s.now().Add(s.opts.lead())) {
			continue
		}
		res, err := s.run(ctx, phase, at, burstSends(1))
		if err != nil {
			return lo, 0, err
		}
		if acc, _ := s.counts(res); acc > 0 {
			return lo, off, nil
		}
		lo = off
	}
}

// minHint is the shortest advertised wait a scan refines with a comb (a
// shorter one is scanned finely enough by the geometric probes).
const minHint = 5 * time.Second

// combStep is the spacing of a comb refining an advertised wait h: a
// hundredth of it, from 20 to 100 ms.
func combStep(h time.Duration) time.Duration {
	return min(max(h/100, 20*time.Millisecond), 100*time.Millisecond)
}

// comb sends single probes every step over [lo, hi] after from (those
// still ahead), as one schedule; it reports whether one was accepted, with
// the offsets of the last refused probe before the first accepted one
// (0 when the first was accepted) and of that one.
func (s *prober) comb(ctx context.Context, phase string, from time.Time, lo, hi, step time.Duration) (accepted bool, last, first time.Duration, err error) {
	start := max(lo, s.now().Add(s.opts.lead()).Sub(from))
	var sends []patterns.Send
	for off := start; off <= hi; off += step {
		sends = append(sends, patterns.Send{At: off - start})
	}
	res, err := s.run(ctx, phase, from.Add(start), sends)
	if err != nil {
		return false, 0, 0, err
	}
	for i, r := range res {
		off := start + sends[i].At
		switch c, _ := record.Classify(r, s.opts.RejectStatus); c {
		case record.ClassAccepted:
			return true, last, off, nil
		case record.ClassRejected:
			last = off
		}
	}
	return false, last, 0, nil
}

// advertisedReturn returns when the rejections among res say quota
// returns: the median over them of the receipt plus the advertised wait
// (Retry-After, else the reset of a rate-limit header); zero when none
// says.
func (s *prober) advertisedReturn(res []record.Result) time.Time {
	var ts []time.Time
	for _, r := range res {
		if c, _ := record.Classify(r, s.opts.RejectStatus); c != record.ClassRejected {
			continue
		}
		received := s.opts.Origin.Add(time.Duration(r.TTFB))
		p := headers.Parse(r.Headers, received)
		switch {
		case p.RetryAfter != nil:
			ts = append(ts, received.Add(*p.RetryAfter))
		default:
			for _, l := range p.Limits {
				if l.HasReset {
					ts = append(ts, received.Add(l.Reset))
					break
				}
			}
		}
	}
	if len(ts) == 0 {
		return time.Time{}
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts[len(ts)/2]
}

// conclude builds the document from the latest fit (nil: none fitted yet,
// which concludes none when nothing was refused).
func (s *prober) conclude(f *fit) *Inference {
	o := s.observe()
	if f == nil && o.rejected > 0 {
		f = search(o, defaultSpace(o, s.opts.maxWindow(), s.perClient))
	}
	key := KeyUnknown
	if s.keyTested {
		key = KeyGlobal
		if s.perClient {
			key = keyName(s.opts.KeyName)
		}
	}
	inf := conclude(s.fitted(), s.opts.Origin, o, f, key, s.opts)
	s.over.report(inf)
	if w, ok := s.answer(); ok && inf.Fit == FitApproximate && s.validated != nil && *s.validated == w.h.v && w.miss <= s.f.slack {
		inf.Fit, inf.Validation = FitExact, s.validation
	}
	return inf
}

// opening runs the fixed first experiments and the first fit. It returns
// a nil fit when nothing was refused (no limiting observed).
func (s *prober) opening(ctx context.Context) (*fit, error) {
	refused, last, f, done, err := s.bursts(ctx)
	if done || err != nil {
		return f, err
	}
	if !refused {
		if !s.stopped {
			return nil, s.steadyCheck(ctx)
		}
		return nil, nil
	}
	o := s.observe()
	s.clientOf(last)
	if o.queueing {
		f, again, err := s.queueOpening(ctx, o, last)
		if err != nil {
			return f, err
		}
		if o = s.observe(); o.queueing {
			return f, nil
		}
		// The repeated burst held nothing: the first hold was a pause on
		// the way, not a queue. Go on as for any other limiter.
		trace("queueing not confirmed by the repeated burst")
		last = slices.DeleteFunc(again, func(r record.Result) bool { return r.Phase == "key" })
	}
	a0 := quotaEstimate(o)
	exhausted := s.lastSent(last)
	// Recovery scan.
	lo1, hi1, err := s.scan(ctx, "scan", exhausted, scanStart, s.advertisedReturn(last))
	if err != nil || hi1 == 0 {
		// No recovery within the horizon: the time scale is beyond what
		// infer looks for (or the budget ended first).
		s.stopped = true
		return s.firstFit(lo1, max(hi1, lo1), a0), err
	}
	// Exhaust again, then (with several identities) test the key. A long
	// time scale is exhausted half of it after the recovery: a window
	// aligned to the clock then recovers at its next edge, one started by
	// a request or a log of requests half a time scale later, so that the
	// second scan already tells them apart.
	x1 := s.now().Add(s.opts.lead())
	if hi1 >= minHint {
		x1 = x1.Add(hi1 / 2)
	}
	sends := burstSends(a0 + 3)
	s.addKeyTest(&sends, hi1/8)
	res, err := s.run(ctx, "exhaust", x1, sends)
	if err != nil {
		return s.firstFit(lo1, hi1, a0), err
	}
	lo2, hi2, err := s.scan(ctx, "scan2", s.lastSent(res[:a0+3]), min(scanStart, max(hi1/16, time.Millisecond)), s.advertisedReturn(res[:a0+3]))
	if err != nil || hi2 == 0 {
		s.stopped = true
		return s.firstFit(min(lo1, lo2), max(hi1, lo2), a0), err
	}
	return s.firstFit(min(lo1, lo2), max(hi1, hi2), a0), nil
}

// bursts sends the bursts from idle, growing until one is refused; it
// returns whether one was, and its results. A burst that shows lost
// updates restarts the opening paced, and one held in a staircase without
// a rejection goes to quietQueue: done then reports that the opening is
// over, with its fit (nil: none).
func (s *prober) bursts(ctx context.Context) (refused bool, last []record.Result, f *fit, done bool, err error) {
	size := firstBurst
	for i := 0; i < maxBursts && !refused; i, size = i+1, size*burstGrowth {
		size = min(size, s.opts.maxRequests()-s.sent)
		if size <= 0 {
			s.stopped = true
			break
		}
		res, err := s.run(ctx, "burst", s.now().Add(s.opts.lead()), burstSends(size))
		if err != nil {
			return false, nil, nil, true, err
		}
		last = res
		_, rej := s.counts(res)
		refused = rej > 0
		if s.over == nil {
			if ev := lostUpdates(res, s.opts.Origin, s.opts.RejectStatus); ev != "" {
				if err := s.goPaced(ctx, res, ev); err != nil || s.stopped {
					return false, nil, nil, true, err
				}
				f, err := s.opening(ctx)
				return false, nil, f, true, err
			}
		}
		if d, ok := drainOf(s.observe()); ok && !refused && d.t >= time.Duration(float64(time.Second)/min(maxQueueRate, s.maxRate()/4)) {
			// Held without a rejection: a queue, perhaps one that only
			// delays. Bursts bounded by the timeout from here on.
			trace("held %d without rejecting: drain interval %v", d.held, d.t)
			refused, res, err = s.quietQueue(ctx, d, size)
			if err != nil || !refused {
				return false, nil, nil, true, err
			}
			if res[0].Phase == phaseSteady {
				// The steady stream was rejected: a limiter after all; its
				// fit starts from the observations as they are.
				return true, res, s.firstFit(0, 0, quotaEstimate(s.observe())), true, nil
			}
			return true, res, nil, false, nil
		}
	}
	return refused, last, nil, false, nil
}

// clientOf records the main identity's name from results of client 0.
func (s *prober) clientOf(res []record.Result) {
	for _, r := range res {
		if r.Outcome == record.OutcomeResponse && r.Phase != "key" {
			s.client = r.Client
			return
		}
	}
}

// firstFit fits everything observed with windows and rates sized by the
// recovery scans: recovery took between lo and hi; a0 bounds the count.
func (s *prober) firstFit(lo, hi time.Duration, a0 int) *fit {
	o := s.observe()
	if hi <= 0 {
		return search(o, defaultSpace(o, s.opts.maxWindow(), s.perClient))
	}
	lowS := max(lo.Seconds(), hi.Seconds()/2, 0.002)
	highS := hi.Seconds()
	maxW := 2 * s.opts.maxWindow().Seconds()
	if a, ok := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus); ok {
		maxW = max(maxW, 1.1*a.window.Seconds()) // an advertised longer window is a candidate
	}
	wmin := max(lowS/3, 0.002)
	wmax := min(max(4*highS, 2*float64(a0+2)*highS), maxW)
	rmin := 1 / (3 * float64(a0+2) * highS)
	rmax := min(3/lowS, 1e4)
	f := s.decideKey(newSpace(o, wmin, wmax, rmin, rmax, s.perClient))
	s.announce(f)
	return f
}

// addKeyTest appends, with several identities, two requests of the second
// identity shortly after an exhausting burst of the first: under a global
// key they are refused like the burst's last requests, under a key per
// client they are admitted.
func (s *prober) addKeyTest(sends *[]patterns.Send, after time.Duration) {
	if s.opts.Clients < 2 {
		return
	}
	gap := min(max(after, 3*time.Millisecond), 50*time.Millisecond)
	// Paced, the burst lasts len·pace: the key test follows its end.
	gap += time.Duration(len(*sends)) * s.pace
	for range 2 {
		*sends = append(*sends, patterns.Send{At: gap, Client: 1, Phase: "key"})
	}
	s.keySent = true
}

// decideKey lets the models decide the key test: sp is fitted with one
// global state and with a state per client, and the better fit decides.
// When the best of each keying miss equally (a family that recovers fast
// enough to admit the second identity's requests under a global key fits
// as well as the truth with a key per client), each variant is compared
// with itself: a keying at least as good for every variant and better for
// one decides (see keyVerdict). Otherwise (the test could not tell: the
// first identity was not exhausted, say) the key stays unknown and the
// global fit is kept.
func (s *prober) decideKey(sp space) *fit {
	o := s.observe()
	sp.perClient = s.perClient
	f := search(o, sp)
	if !s.keySent || s.keyTested {
		return f
	}
	sp.perClient = true
	g := search(o, sp)
	fw, okf := f.winner()
	gw, okg := g.winner()
	trace("key test: global %v misses %d, per client %v misses %d", fw.h, fw.miss, gw.h, gw.miss)
	if !okf || !okg {
		return f
	}
	if decided, perClient := keyVerdict(f, g); decided {
		s.keyTested, s.perClient = true, perClient
		if perClient {
			return g
		}
	}
	return f
}

// keyVerdict compares a fit with a global key (f) and with a key per
// client (g): the keying whose winner misses fewer outcomes wins; on a tie,
// the keying that makes no variant miss more and some variant miss fewer
// (each variant's best against its own best under the other keying, over
// the variants either fit kept: a variant one keying dropped as far
// behind does worse under it). decided is false when neither holds.
func keyVerdict(f, g *fit) (decided, perClient bool) {
	fw, _ := f.winner()
	gw, _ := g.winner()
	switch {
	case gw.miss < fw.miss:
		return true, true
	case fw.miss < gw.miss:
		return true, false
	}
	better, worse := 0, 0
	for _, v := range allVariants {
		a, okf := f.best[v]
		b, okg := g.best[v]
		switch {
		case okf && okg && b.miss < a.miss, !okf && okg:
			better++
		case okf && okg && b.miss > a.miss, okf && !okg:
			worse++
		}
	}
	switch {
	case better > 0 && worse == 0:
		return true, true
	case worse > 0 && better == 0:
		return true, false
	}
	return false, false
}

// announce reports the budget once the time scale is known.
func (s *prober) announce(f *fit) {
	if s.budgetSet || f == nil {
		return
	}
	w, ok := f.winner()
	if !ok {
		return
	}
	s.budgetSet = true
	// W is the longest time scale still plausible: the first fit rests on
	// a scan whose gaps may hide the true edge, and a budget sized by the
	// shortest candidate would end before the truth is found.
	W := w.h.scale()
	for _, p := range f.plausible(designSlack) {
		W = max(W, p.h.scale())
	}
	maxW := s.opts.maxWindow()
	if a, ok := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus); ok {
		maxW = max(maxW, a.window)
	}
	W = min(W, maxW)
	s.budget = 6*W + budgetSlack
	budget := min(s.budget, s.opts.maxDuration())
	if d := s.start.Add(budget); d.Before(s.deadline) {
		s.deadline = d
	}
	if s.opts.OnBudget != nil {
		s.opts.OnBudget(W, budget)
	}
}

// queueOpening handles a queueing limiter: the first burst showed the
// latency staircase. One more burst once the queue has drained confirms
// the queue (or, holding nothing, shows the first hold was noise) and the
// rate; then the fit. It returns the fit and the second burst's results.
func (s *prober) queueOpening(ctx context.Context, o *observations, last []record.Result) (*fit, []record.Result, error) {
	// The step between delays is one drain interval T.
	var delays []time.Duration
	for _, ob := range o.list {
		if ob.held {
			delays = append(delays, ob.delay)
		}
	}
	slices.Sort(delays)
	T := delays[0]
	if len(delays) > 1 {
		var steps []time.Duration
		for i := 1; i < len(delays); i++ {
			if d := delays[i] - delays[i-1]; d > o.tol {
				steps = append(steps, d)
			}
		}
		if len(steps) > 0 {
			slices.Sort(steps)
			T = steps[len(steps)/2]
		}
		// An answer can come back late (a timer fired late under load),
		// never early, so the k-th held answer's delay is at least k·T:
		// the smallest delay/k bounds T, and a stall that stretched a
		// step cannot stretch it.
		for k, d := range delays {
			T = min(T, d/time.Duration(k+1))
		}
	}
	acc, _ := s.counts(last)
	// Wait for the bucket to drain completely, then burst again (with the
	// key test when there are several identities).
	at := s.now().Add(time.Duration(acc+1) * T)
	sp := func() space {
		wmax := float64(4*(acc+1)) * T.Seconds()
		return newSpace(s.observe(), T.Seconds()/4, wmax, 0.5/T.Seconds(), 2/T.Seconds(), s.perClient)
	}
	f := search(s.observe(), sp())
	s.announce(f)
	sends := burstSends(acc + 3)
	s.addKeyTest(&sends, T/8)
	again, err := s.run(ctx, "burst", at, sends)
	if err != nil {
		return f, again, err
	}
	return s.decideKey(sp()), again, nil
}

// design runs designed experiments until the plausible models agree, no
// experiment can split them, or the budget ends.
func (s *prober) design(ctx context.Context, f *fit) (*fit, error) {
	for range maxRounds {
		p := f.plausible(designSlack)
		if a, ok := advertOf(s.fitted(), s.opts.Origin, s.opts.RejectStatus); ok && a.settles(p) {
			trace("settled by the advertised %d per %v, epoch-aligned", a.quota, a.window)
			return f, nil
		}
		if resolved(p) {
			trace("resolved: %d plausible, first %v: %s", len(p), p[0].h, summarize(p))
			return f, nil
		}
		dz := &designer{ws: weigh(p, maxDesignHyps), perClient: s.perClient, client: s.client}
		s0 := s.now().Add(s.opts.lead())
		margin := max(s.opts.lead(), 2*clusterGap)
		overhead := max(dz.scale()/4, 50*time.Millisecond)
		var best *experiment
		score := 0.0
		for _, e := range dz.candidates(s0, margin) {
			if e.end().After(s.deadline) || s.sent+len(e.at) > s.opts.maxRequests() {
				continue
			}
			e.info = dz.information(&e)
			e.cost = e.end().Sub(s.now()) + overhead
			trace("  candidate %s %d sends ending %v: %.3f bits", e.phase, len(e.at), e.end().Sub(s.start), e.info)
			if e.info < minInfo {
				continue
			}
			if sc := e.info / e.cost.Seconds(); best == nil || sc > score {
				ee := e
				best, score = &ee, sc
			}
		}
		trace("round: %d plausible (%d designed) %s", len(p), len(dz.ws), summarize(p))
		if debugf != nil {
			mass := map[answer]float64{}
			for i, x := range dz.ws {
				mass[dz.answerOf(i)] += x.w
			}
			for a, m := range mass {
				if m > 0.01 {
					trace("   answer %+v mass %.3f", a, m)
				}
			}
		}
		if best != nil {
			trace("chose %s (%d sends, %.3f bits over %v)", best.phase, len(best.at), best.info, best.cost)
		}
		if best == nil {
			// Nothing tells the plausible models apart (or nothing fits the
			// budget): the latter is an incomplete inference.
			if !s.anyFeasible(dz, s0, margin) {
				s.stopped = true
			}
			return f, nil
		}
		start := best.at[0]
		if _, err := s.run(ctx, best.phase, start, best.sends(start)); err != nil {
			return s.refit(f), err
		}
		f = s.refit(f)
	}
	// The rounds ran out before the models were told apart.
	s.stopped = true
	return f, nil
}

// anyFeasible reports whether some informative experiment exists at all,
// ignoring the budget: when one does, the budget is what stopped us.
func (s *prober) anyFeasible(dz *designer, s0 time.Time, margin time.Duration) bool {
	for _, e := range dz.candidates(s0, margin) {
		if dz.information(&e) >= minInfo {
			return true
		}
	}
	return false
}

// refit fits everything observed within the space of the previous fit's
// pool. While the key test is undecided, the same space is fitted with a
// key per client too, and keyVerdict decides as soon as the observations
// since tell the keyings apart.
func (s *prober) refit(prev *fit) *fit {
	o := s.observe()
	f := prev.extend(o)
	if f == nil {
		f = search(o, prev.narrowed())
	}
	if s.keySent && !s.keyTested {
		sp := prev.narrowed()
		sp.perClient = true
		g := search(o, sp)
		if decided, perClient := keyVerdict(f, g); decided {
			trace("key test decided later: per client %v", perClient)
			s.keyTested, s.perClient = true, perClient
			if perClient {
				return g
			}
		}
	}
	return f
}

// summarize lists the variants of p with their counts and ranges (for
// traces).
func summarize(p []scored) string {
	type agg struct {
		lo, hi float64
		ns     map[int64]bool
		best   int
	}
	m := map[variant]*agg{}
	for _, s := range p {
		a := m[s.h.v]
		if a == nil {
			a = &agg{lo: s.h.x, hi: s.h.x, ns: map[int64]bool{}, best: s.miss}
			m[s.h.v] = a
		}
		a.lo, a.hi = math.Min(a.lo, s.h.x), math.Max(a.hi, s.h.x)
		a.ns[s.h.n] = true
		a.best = min(a.best, s.miss)
	}
	out := ""
	for _, v := range allVariants {
		if a := m[v]; a != nil {
			out += fmt.Sprintf("[%v miss=%d n=%d x=%.4g..%.4g] ", v, a.best, len(a.ns), a.lo, a.hi)
		}
	}
	return out
}
