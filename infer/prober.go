package infer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

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
	// conn, when set, is the one kept-alive connection every send goes on
	// (a paced session); restUntil holds the opening's first burst back
	// until every instance is whole again; inst is the instance check.
	conn      int
	restUntil time.Time
	inst      instancesState
	// f is the current fit (nil: none yet).
	f *fit
	// budget is 6·W + 30 s once W is known (announce), 0 before.
	budget time.Duration
	// extended: the budget was extended once for an answer not yet exact.
	extended bool
	// rivalRounds counts the rival validations run (maxRivalRounds).
	rivalRounds int
	// precisionRounds counts the precision validations run
	// (maxPrecisionRounds).
	precisionRounds int
	// validations counts the validation experiments run; validated says
	// the current answer passed one, validation how.
	validations int
	validated   *variant
	validation  string
	// passed lists the validation kinds the validated answer passed, and
	// passedHow says how, for the document.
	passed    map[validationKind]bool
	passedHow []string
	// designCut says the design stopped (stopped) because no informative
	// experiment fitted the budget or its rounds ran out, not on an error.
	designCut bool
	// excused says why a validation kind did not run for the validated
	// answer (see validatedEnough).
	excused map[validationKind]string
	// firstSpace rebuilds the first fit's space over later observations
	// (recheck); nil before the first fit.
	firstSpace func(o *observations) space
	// rechecked: the fit was searched afresh before its validations.
	rechecked bool
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
	o.without = opts.Without
	if len(o.list) == 0 {
		return nil, fmt.Errorf("infer: no accepted or rejected response among %d results", len(results))
	}
	key := KeyUnknown
	var f *fit
	if o.rejected > 0 {
		f = search(o, defaultSpace(o, opts.maxWindow(), false))
		if clientsOf(o) > 1 {
			g := search(o, defaultSpace(o, opts.maxWindow(), true))
			if _, ok := g.winner(); ok {
				if decided, perClient := keyVerdict(f, g); decided && perClient {
					f, key = g, keyName(opts.KeyName)
				} else if decided {
					key = KeyGlobal
				}
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
		if sends[i].Conn == 0 {
			sends[i].Conn = s.conn
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
	o.without = s.opts.Without
	if in := s.inst.found; in != nil && in.By == BalanceRequest {
		o.rotate = in.Value
	}
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
	if w, ok := s.answer(); ok && inf.Fit == FitApproximate && s.validated != nil && *s.validated == w.h.v && w.miss <= s.f.slack && s.validation != "" {
		if r, tied := s.f.rival(w); tied {
			inf.Note = joinNote(inf.Note, fmt.Sprintf("%s reproduces the outcomes as well (%d missed, against %d): the validations did not tell them apart",
				r.h, r.miss, w.miss))
		} else {
			inf.Fit, inf.Validation = FitExact, s.validation
		}
	}
	s.inst.report(inf, s.opts.Origin)
	if s.opts.ServerClock != nil {
		if off, unc, ok := s.opts.ServerClock(); ok {
			serverEpoch(inf, off, unc, o.timingSlack())
		}
	}
	judgedOnExact(inf)
	return inf
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
