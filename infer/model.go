package infer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/units"
)

// variant is one candidate model shape: a family with the switches that
// change its decisions (alignment, counting rejected requests) and the
// behaviour beyond the family's plain model, if any: a penalty (block,
// extend, restart) or a bucket quirk (idle eviction, whole-token refill).
type variant struct {
	fam   Family
	alg   limiter.Algorithm
	align limiter.Align
	cr    bool
	// beh is the behaviour beyond the plain model ("" for none).
	beh Behaviour
}

// windowed reports whether the variant takes (limit, window) rather than
// (capacity, rate).
func (v variant) windowed() bool { return v.fam != TokenBucket && v.fam != LeakyBucketQueue }

// aligned reports whether the variant's windows start at fixed instants
// of the clock rather than at a key's requests: epoch-aligned windows, and
// windows on a server-wide timer (at a phase of their own). Their edges
// depend on the window's length to the nanosecond, so they are fitted at
// every length of a grid, never refined around a best point.
func (v variant) aligned() bool {
	return v.windowed() && (v.align == limiter.AlignEpoch || v.align == limiter.AlignTimer)
}

// timed reports whether the variant's behaviour has a duration of its own
// (hyp.p): a block's length, or the idle time after which a key is
// forgotten.
func (v variant) timed() bool { return v.beh == BehaviourBlock || v.beh == BehaviourIdle }

func (v variant) String() string {
	s := string(v.fam)
	if v.align != "" {
		s += "/" + string(v.align)
	}
	if v.cr {
		s += "/count-rejected"
	}
	if v.beh != "" {
		s += "/" + string(v.beh)
	}
	return s
}

// plainVariants are the candidate shapes of the families' plain models,
// in the order ties are broken: the first of equally good variants wins.
var plainVariants = []variant{
	{fam: TokenBucket, alg: limiter.TokenBucket},
	{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignFirstRequest},
	{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignEpoch},
	{fam: SlidingLog, alg: limiter.SlidingLog},
	{fam: SlidingLog, alg: limiter.SlidingLog, cr: true},
	{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignEpoch},
	{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignFirstRequest},
	{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignEpoch, cr: true},
	{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignFirstRequest, cr: true},
	{fam: LeakyBucketQueue, alg: limiter.LeakyBucket},
}

// behaviourVariants are the shapes with a behaviour beyond the plain
// model. They come after every plain variant, so that a plain model that
// reproduces the outcomes as well wins: a behaviour is named only when the
// evidence needs it. Penalties apply to the window families (their plain,
// not-counting-rejected shapes: a penalty already acts on refusals), block
// also to the token bucket (which stands for gcra); the quirks to the
// token bucket. Penalties are modelled on windows started by the first
// request only: epoch-aligned windows are fitted at every length of their
// grid, which, times every penalty (and every block length), costs more
// than the search can afford — an epoch-aligned window with a penalty is
// outside the vocabulary (a known gap). Extend re-anchors the window at every request, so it has
// no aligned shape, and a sliding log under it decides as a fixed window
// (every logged time moves to the latest request): fixed-window stands for
// both.
var behaviourVariants = func() []variant {
	fw := variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignFirstRequest}
	sl := variant{fam: SlidingLog, alg: limiter.SlidingLog}
	swc := variant{fam: SlidingWindowCounter, alg: limiter.SlidingWindowCounter, align: limiter.AlignFirstRequest}
	tb := variant{fam: TokenBucket, alg: limiter.TokenBucket}
	with := func(b Behaviour, vs ...variant) []variant {
		for i := range vs {
			vs[i].beh = b
		}
		return vs
	}
	var vs []variant
	vs = append(vs, with(BehaviourExtend, fw, swc)...)
	vs = append(vs, with(BehaviourRestart, fw, sl, swc)...)
	vs = append(vs, with(BehaviourBlock, tb, fw, sl, swc)...)
	vs = append(vs, with(BehaviourIdle, tb)...)
	vs = append(vs, with(BehaviourWholeToken, tb)...)
	// A bucket refilled whole on a server-wide timer, or a fixed window on
	// the limiter's own timer: windows at a phase of their own.
	vs = append(vs, timerVariant)
	return vs
}()

// timerVariant is a fixed window on a server-wide timer at a phase of its
// own (hyp.ph): a bucket refilled whole at each tick, or a window limiter
// that keeps its own timer.
var timerVariant = variant{fam: FixedWindow, alg: limiter.FixedWindow, align: limiter.AlignTimer, beh: BehaviourTimer}

// allVariants are every candidate shape, plain ones first (see
// behaviourVariants), in the order ties are broken.
var allVariants = append(slices.Clone(plainVariants), behaviourVariants...)

// hyp is one fully specified candidate model.
type hyp struct {
	v variant
	n int64   // limit (windows) or capacity (buckets)
	x float64 // window in seconds (windows) or rate per second (buckets)
	d int64   // leaky-bucket-queue: nginx delay= (undelayed − 1)
	p float64 // timed behaviours: the block's or the idle time's length, seconds
	// ph is a timer-aligned window's phase: windows start at ph + k·x
	// seconds since the Unix epoch, 0 ≤ ph < x.
	ph float64
}

// degenerate reports whether h is a bucket with a timed behaviour whose
// refill never shows in o: it decides there as a window model does, and
// is never a candidate — it would name a bucket for a window limiter on
// evidence that cannot tell them apart.
//   - A bucket that blocks for D and refills less than one token within D
//     is a fixed window started by the first request, with a block.
//   - A bucket forgotten after an idle time D is a window that every
//     request extends (the extend penalty) while no key of o kept sending,
//     with no pause of D, for as long as one token takes to refill: each
//     run of a key's requests then starts full and gains no token. Where
//     some key did, the bucket admits a request the window refuses, and
//     the two are told apart by the outcomes (a bucket of 1/s forgotten
//     after 400 ms is one, under a trickle of 3/s).
func (h hyp) degenerate(o *observations, perClient bool) bool {
	if h.v.windowed() || !h.v.timed() {
		return false
	}
	if h.v.beh == BehaviourIdle {
		return h.x*o.busiest(units.Seconds(h.p), perClient).Seconds() < 1
	}
	return h.x*h.p < 1
}

// config returns the limiter configuration that models h.
func (h hyp) config() limiter.Config {
	c := limiter.Config{Algorithm: h.v.alg, Align: h.v.align, CountRejected: h.v.cr}
	if h.v.windowed() {
		c.Limit = h.n
		c.Window = max(time.Duration(math.Round(h.x*1e6))*time.Microsecond, time.Microsecond)
		if h.v.align == limiter.AlignTimer {
			c.Phase = min(time.Duration(math.Round(h.ph*1e6))*time.Microsecond, c.Window-time.Microsecond)
		}
	} else {
		c.Capacity = h.n
		c.Rate = h.x
		if h.v.fam == LeakyBucketQueue {
			c.Delay = min(h.d, h.n-1)
		}
	}
	p := max(units.Seconds(h.p).Round(time.Microsecond), time.Microsecond)
	switch h.v.beh {
	case BehaviourBlock:
		c.Penalty = limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: p}
	case BehaviourExtend:
		c.Penalty = limiter.Penalty{Kind: limiter.PenaltyExtend}
	case BehaviourRestart:
		c.Penalty = limiter.Penalty{Kind: limiter.PenaltyRestart}
	case BehaviourIdle:
		c.ForgetIdle = p
	case BehaviourWholeToken:
		c.Refill = limiter.RefillWhole
	}
	return c
}

// forgets is how long after its last request h's state is whole again
// from any state: its time scale, and a block's length on top (a block
// starts at a refusal, and the window or bucket starts from zero after
// it).
func (h hyp) forgets() time.Duration {
	if h.v.beh == BehaviourBlock {
		return h.scale() + units.Seconds(h.p)
	}
	return h.scale()
}

// scale is the hypothesis's time scale: the window, or the time an empty
// bucket takes to fill.
func (h hyp) scale() time.Duration {
	if h.v.windowed() {
		return units.Seconds(h.x)
	}
	return units.Seconds(float64(h.n) / h.x)
}

func (h hyp) String() string {
	var s string
	switch {
	case h.v.windowed():
		s = fmt.Sprintf("%v limit=%d window=%s", h.v, h.n, units.HumanDuration(units.Seconds(h.x)))
		if h.v.align == limiter.AlignTimer {
			s += fmt.Sprintf(" phase=%.6fs", h.ph)
		}
	case h.v.fam == LeakyBucketQueue:
		s = fmt.Sprintf("%v rate=%s capacity=%d undelayed=%d", h.v, units.HumanRate(h.x), h.n, h.d+1)
	default:
		s = fmt.Sprintf("%v rate=%s capacity=%d", h.v, units.HumanRate(h.x), h.n)
	}
	switch h.v.beh {
	case BehaviourBlock:
		s += " block=" + units.HumanDuration(units.Seconds(h.p))
	case BehaviourIdle:
		s += " idle=" + units.HumanDuration(units.Seconds(h.p))
	}
	return s
}

// Timing tolerance of a replay: a lone request is allowed to have arrived
// up to max(scale/timeTolDiv, minTimeTol, its own uncertainty) earlier or
// later than estimated, so that parameters are never pinned more finely
// than measurements can support.
const (
	timeTolDiv = 1000
	minTimeTol = 100 * time.Microsecond
	// coarseTolDiv is the tolerance of the coarse search pass: a fortieth
	// of the time scale, about the spacing of the coarse grid.
	coarseTolDiv = 40
)

// stateKey names one limiter state of a model: a client's (fitKey: ""
// for a global key) on one instance (0 unless a balancer rotates the
// requests over several, states.rotate).
type stateKey struct {
	client string
	inst   int
}

// keyed is one key's limiter state.
type keyed struct {
	key stateKey
	st  limiter.State
}

// states are the per-key states of one model after a replay. With a global
// key there is one entry per instance, for client "". A model of rotate ≥ 2
// instances behind a balancer that sends each request to the next (instances
// by request) keeps a state per instance and key; n counts the requests
// stepped, the balancer's position, from the first observation on (which
// instance that one reached does not matter from a whole state: the
// instances are alike).
type states struct {
	keys      []keyed
	rotate, n int
}

func (s states) get(k stateKey) limiter.State {
	for _, x := range s.keys {
		if x.key == k {
			return x.st
		}
	}
	return limiter.State{}
}

// slot returns the index of k's state in s.keys, appending a zero state
// for a key not yet seen: one search for a get and the set after it.
func (s *states) slot(k stateKey) int {
	for i := range s.keys {
		if s.keys[i].key == k {
			return i
		}
	}
	s.keys = append(s.keys, keyed{key: k})
	return len(s.keys) - 1
}

func (s states) set(k stateKey, st limiter.State) states {
	for i := range s.keys {
		if s.keys[i].key == k {
			s.keys[i].st = st
			return s
		}
	}
	s.keys = append(s.keys, keyed{k, st})
	return s
}

// clone returns a copy of s that owns its logs: stepping the copy with
// limiter.Stepper.StepOwned leaves s as it was.
func (s states) clone() states {
	// Room for a few more keys: a replay that meets a new one would
	// otherwise copy them all again at once.
	s.keys = append(make([]keyed, 0, len(s.keys)+4), s.keys...)
	for i := range s.keys {
		if l := s.keys[i].st.Log; l != nil {
			s.keys[i].st.Log = slices.Clone(l)
		}
	}
	return s
}

// keyOf returns the key of the next request of client: its fitKey, on the
// instance the balancer sends it to.
func (s states) keyOf(client string, perClient bool) stateKey {
	k := stateKey{client: fitKey(client, perClient)}
	if s.rotate > 1 {
		k.inst = s.n % s.rotate
	}
	return k
}

// instances is how many instances the states keep per key: rotate, at
// least 1.
func (s states) instances() int { return max(1, s.rotate) }

// next is keyOf, and counts the request.
func (s *states) next(client string, perClient bool) stateKey {
	k := s.keyOf(client, perClient)
	s.n++
	return k
}

// mismatch describes the worst-reproduced cluster of a replay.
type mismatch struct {
	at             time.Time
	phase          string
	size           int
	modelAccepted  int
	observedAccept int
	delays         bool // the mismatch is in delays, not in counts
	miss           int
}

// replay is the result of replaying observations through a model.
type replay struct {
	miss   int // outcomes the model does not reproduce
	pruned bool
	// reached is how many observations were replayed (all, unless pruned).
	reached int
	states  states
	worst   mismatch
	// collect asks the replay to list every mismatch (in all), up to
	// maxMissesListed of them.
	collect bool
	all     []mismatch
}

// fitKey returns the state key of a client: the client itself when the limit
// is per client, else one global key.
func fitKey(client string, perClient bool) string {
	if perClient {
		return client
	}
	return ""
}

// replayObs replays o through h from idle and counts the outcomes h does
// not reproduce. Within a cluster (arrivals too close to order) outcomes
// are compared as multisets: the number accepted, and with queueing the
// sorted delays of the accepted. It stops early once more than bound
// outcomes are missed (bound < 0: never).
func replayObs(h hyp, o *observations, perClient bool, bound int) replay {
	return replayFrom(h, o, perClient, bound, 0, replay{})
}

// replayTol is replayObs with a timing tolerance of the hypothesis's time
// scale divided by tolDiv.
func replayTol(h hyp, o *observations, perClient bool, bound int, tolDiv float64) replay {
	return replayWith(h, o, perClient, bound, 0, replay{}, tolDiv)
}

// replayFrom continues a replay r (states and misses over the clusters
// before from) over the clusters from index from on.
func replayFrom(h hyp, o *observations, perClient bool, bound, from int, r replay) replay {
	return replayWith(h, o, perClient, bound, from, r, timeTolDiv)
}

func replayWith(h hyp, o *observations, perClient bool, bound, from int, r replay, tolDiv float64) replay {
	if h.degenerate(o, perClient) {
		return replay{miss: math.MaxInt, pruned: true, reached: -1}
	}
	c := h.config().Stepper()
	tol := max(time.Duration(float64(h.scale())/tolDiv), minTimeTol)
	horizon := h.scale()
	if h.v.fam == SlidingWindowCounter {
		horizon *= 2 // the previous window still weighs
	}
	r.states = r.states.clone()
	r.states.rotate = o.rotate
	var mDel, oDel []time.Duration
	var saved []int64
	for k, cl := range o.clusters[from:] {
		accM, accO := 0, 0
		mDel, oDel = mDel[:0], oDel[:0]
		single := cl[1]-cl[0] == 1
		carry := o.carried(from+k, perClient, horizon)
		var before states
		if !single && carry > tol {
			before = r.states.clone()
		}
		for i := cl[0]; i < cl[1]; i++ {
			ob := &o.list[i]
			key := r.states.next(ob.client, perClient)
			slot := r.states.slot(key)
			st0 := r.states.keys[slot].st
			if single && st0.Log != nil {
				// st0 may be stepped again below: its log is kept aside in
				// a buffer the replay reuses, not copied anew by each step.
				saved = append(saved[:0], st0.Log...)
			}
			st, d := c.StepOwned(st0, ob.at) // r.states owns its logs
			if single && d.Allowed != ob.accepted {
				// A lone request within the timing tolerance of the model's
				// boundary is given the benefit of the doubt.
				shift := max(tol, ob.unc, carry)
				if !ob.accepted {
					shift = -shift
				}
				if st0.Log != nil {
					// A copy: what Step returns may share it, and saved is
					// overwritten at the next request.
					st0.Log = slices.Clone(saved)
				}
				if st2, d2 := c.Step(st0, ob.at.Add(shift)); d2.Allowed == ob.accepted {
					st, d = st2, d2
				}
			}
			r.states.keys[slot].st = st
			if d.Allowed {
				accM++
				if o.queueing {
					mDel = append(mDel, d.Delay)
				}
			}
			if ob.accepted {
				accO++
				if o.queueing {
					oDel = append(oDel, ob.delay)
				}
			}
		}
		if !single && accM != accO && carry > tol {
			// The model's state is uncertain by what an earlier cluster
			// of unknown order carries: a cluster whose count the model
			// misses gets the same benefit of the doubt as a lone request.
			shift := carry
			if accO < accM {
				shift = -shift
			}
			if s2, acc2, del2 := stepCluster(c, o, cl, before, shift, perClient); abs(acc2-accO) < abs(accM-accO) {
				r.states, accM, mDel = s2, acc2, append(mDel[:0], del2...)
			}
		}
		miss := abs(accM - accO)
		delayMiss := 0
		if o.queueing {
			delayMiss = delayMisses(mDel, oDel, o.tol)
		}
		miss += delayMiss
		if miss > 0 {
			r.miss += miss
			first := o.list[cl[0]]
			m := mismatch{at: first.at, phase: first.phase, size: cl[1] - cl[0],
				modelAccepted: accM, observedAccept: accO, delays: delayMiss > 0 && accM == accO, miss: miss}
			if miss > r.worst.miss {
				r.worst = m
			}
			if r.collect && len(r.all) < maxMissesListed {
				r.all = append(r.all, m)
			}
			if bound >= 0 && r.miss > bound {
				r.pruned = true
				r.reached = cl[1]
				return r
			}
		}
	}
	r.reached = len(o.list)
	return r
}

// stepCluster replays cluster cl from states with every arrival moved by
// shift; it returns the states after it, the number the model accepts and,
// when queueing, their delays.
func stepCluster(c limiter.Stepper, o *observations, cl [2]int, from states, shift time.Duration, perClient bool) (states, int, []time.Duration) {
	s := from // owned (a clone): stepped in place
	accM := 0
	var mDel []time.Duration
	for i := cl[0]; i < cl[1]; i++ {
		ob := &o.list[i]
		key := s.next(ob.client, perClient)
		st, d := c.StepOwned(s.get(key), ob.at.Add(shift))
		s = s.set(key, st)
		if d.Allowed {
			accM++
			if o.queueing {
				mDel = append(mDel, d.Delay)
			}
		}
	}
	return s, accM, mDel
}

// delayMisses compares the delays a queueing model gives the accepted
// requests of a cluster with the observed ones, both sorted (in place), in
// pairs. An answer can come back later than its queue delay (the server's
// timer fired late, the handler ran late under load), never earlier: an
// observed delay shorter than the model's by more than tol is a miss; a
// longer one is a stall, unless more than half of the pairs are that late,
// which is systematic (the model drains too fast), and then each is a miss.
func delayMisses(mDel, oDel []time.Duration, tol time.Duration) int {
	slices.Sort(mDel)
	slices.Sort(oDel)
	n := min(len(mDel), len(oDel))
	early, late := 0, 0
	for i := range n {
		switch d := oDel[i] - mDel[i]; {
		case d < -tol:
			early++
		case d > tol:
			late++
		}
	}
	if 2*late > n {
		return early + late
	}
	return early
}

// predict runs sends of one client (absolute arrival times, each moved by
// shift, those at the first send's instant by lead instead) through h from
// the given states (left as they are) and calls each with every decision,
// in order.
func predict(h hyp, from states, at []time.Time, lead, shift time.Duration, client string, perClient bool, each func(i int, d limiter.Decision)) {
	c := h.config().Stepper()
	s := from.clone()
	for i, t := range at {
		key := s.next(client, perClient)
		by := shift
		if t.Equal(at[0]) {
			by = lead
		}
		st, d := c.StepOwned(s.get(key), t.Add(by))
		s = s.set(key, st)
		each(i, d)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
