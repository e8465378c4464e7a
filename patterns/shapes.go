package patterns

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// Pattern names (contract: run --pattern, plan key "pattern").
const (
	PatternSteady   = "steady"
	PatternBurst    = "burst"
	PatternEdge     = "edge"
	PatternRecovery = "recovery"
	PatternRace     = "race"
	PatternRamp     = "ramp"
	// PatternPause names the idle phases Pause makes.
	PatternPause = "pause"
)

// Patterns lists the pattern names in the contract's order.
var Patterns = []string{PatternSteady, PatternBurst, PatternEdge, PatternRecovery, PatternRace, PatternRamp}

// RaceModes lists the race modes in the contract's order.
var RaceModes = []RaceMode{Barrier, LastByte, SinglePacket}

// MaxSends bounds the size of one schedule held in memory (Schedule.Sends),
// so that a typo in a rate cannot exhaust memory: 1,000,000 sends take
// about 50 MB. A streamed schedule (Plan.Streamed) holds no sends and is
// not bound by it (see MaxStreamSends). Safety caps far below this (run's
// --max-requests) are the caller's business.
const MaxSends = 1_000_000

// ParamError reports an invalid pattern parameter. Param is spelled as the
// flag and plan key (rate, count, spread, …).
type ParamError struct {
	Pattern string // steady, burst, edge, recovery, race, ramp, pause
	Param   string // rate, duration, count, …
	Msg     string // what is wrong, e.g. "must be positive, not 0s"
}

func (e *ParamError) Error() string {
	return "patterns: " + e.Pattern + ": " + e.Param + " " + e.Msg
}

func paramErr(pattern, param, format string, a ...any) error {
	return &ParamError{Pattern: pattern, Param: param, Msg: fmt.Sprintf(format, a...)}
}

// positiveRate checks a rate parameter in requests per second.
func positiveRate(pattern, param string, r float64) error {
	if !(r > 0) || math.IsInf(r, 0) {
		return paramErr(pattern, param, "must be a positive rate, not %s", units.FormatRate(r))
	}
	return nil
}

func positiveDuration(pattern, param string, d time.Duration) error {
	if d <= 0 {
		return paramErr(pattern, param, "must be positive, not %v", d)
	}
	return nil
}

func tooMany(pattern string, n float64) error {
	return &ParamError{Pattern: pattern, Param: "requests",
		Msg: fmt.Sprintf("would be %.0f, more than the %d one schedule may hold", math.Ceil(n), MaxSends)}
}

// roundNS rounds seconds·1e9 (given in nanoseconds as a float) to the
// nearest nanosecond.
func roundNS(ns float64) time.Duration { return time.Duration(math.Round(ns)) }

// single wraps the sends of one pattern, all of client 0 and named after it.
func single(pattern string, sends []Send, d time.Duration) Schedule {
	for i := range sends {
		sends[i].Phase = pattern
	}
	return Schedule{
		Sends:    sends,
		Clients:  1,
		Duration: d,
		Phases:   []PhaseInfo{{Name: pattern, Pattern: pattern, Duration: d, Requests: len(sends)}},
	}
}

// Steady sends at a constant rate (requests per second) for d: request i is
// due at i/rate, rounded to the nanosecond, for every i whose offset is
// before d. So Steady(10, 2*time.Second) is 20 requests at 0, 100ms, …,
// 1.9s. The schedule lasts d.
func Steady(rate float64, d time.Duration) (Schedule, error) {
	if err := positiveRate(PatternSteady, "rate", rate); err != nil {
		return Schedule{}, err
	}
	if err := positiveDuration(PatternSteady, "duration", d); err != nil {
		return Schedule{}, err
	}
	if n := rate * d.Seconds(); n > MaxSends {
		return Schedule{}, tooMany(PatternSteady, n)
	}
	sh, err := steadyShape(rate, d)
	if err != nil {
		return Schedule{}, err
	}
	sends, err := sh.sends(PatternSteady)
	if err != nil {
		return Schedule{}, err
	}
	return single(PatternSteady, sends, d), nil
}

// Burst sends count requests from idle. With spread 0 they are all due at
// once (the engine sends them as fast as it can, in order); otherwise
// request i is due at i·spread/count, so the burst fills [0, spread) at
// count/spread requests per second. The schedule lasts spread.
func Burst(count int, spread time.Duration) (Schedule, error) {
	if count < 1 {
		return Schedule{}, paramErr(PatternBurst, "count", "must be at least 1, not %d", count)
	}
	if count > MaxSends {
		return Schedule{}, tooMany(PatternBurst, float64(count))
	}
	if spread < 0 {
		return Schedule{}, paramErr(PatternBurst, "spread", "must not be negative, not %v", spread)
	}
	sends := make([]Send, count)
	for i := range sends {
		sends[i].At = roundNS(float64(i) * float64(spread) / float64(count))
	}
	return single(PatternBurst, sends, spread), nil
}

// Edge straddles a window edge: count requests due gap/2 before edge and
// count due gap/2 after it (edge−gap/2 and edge−gap/2+gap exactly), each
// group all at once. edge is the offset of the window edge from the start
// of the schedule and must leave room for the first group (edge ≥ gap/2);
// to aim at an edge of the wall clock, compute it with NextEdge. The
// schedule lasts until the second group.
func Edge(count int, edge, gap time.Duration) (Schedule, error) {
	if count < 1 {
		return Schedule{}, paramErr(PatternEdge, "count", "must be at least 1, not %d", count)
	}
	if 2*count > MaxSends {
		return Schedule{}, tooMany(PatternEdge, 2*float64(count))
	}
	if err := positiveDuration(PatternEdge, "gap", gap); err != nil {
		return Schedule{}, err
	}
	before := edge - gap/2
	if before < 0 {
		return Schedule{}, paramErr(PatternEdge, "at", "must leave room for the requests due gap/2 = %v before the edge, not %v", gap/2, edge)
	}
	after := before + gap
	sends := make([]Send, 2*count)
	for i := range sends {
		sends[i].At = before
		if i >= count {
			sends[i].At = after
		}
	}
	return single(PatternEdge, sends, after), nil
}

// Recovery is a trickle that watches a limiter recover: one request every
// `every`, at 0, every, 2·every, … for every offset before span. The
// schedule lasts span.
func Recovery(every, span time.Duration) (Schedule, error) {
	if err := positiveDuration(PatternRecovery, "every", every); err != nil {
		return Schedule{}, err
	}
	if err := positiveDuration(PatternRecovery, "span", span); err != nil {
		return Schedule{}, err
	}
	n := (span + every - 1) / every
	if n > MaxSends {
		return Schedule{}, tooMany(PatternRecovery, float64(n))
	}
	sh, err := recoveryShape(every, span)
	if err != nil {
		return Schedule{}, err
	}
	sends, err := sh.sends(PatternRecovery)
	if err != nil {
		return Schedule{}, err
	}
	return single(PatternRecovery, sends, span), nil
}

// Race releases clients·count requests together at offset 0: every client
// 0…clients−1 sends count requests, all in batch 1, released in mode
// (empty means Barrier). The sends go round-robin over the clients. The
// schedule lasts 0.
func Race(clients, count int, mode RaceMode) (Schedule, error) {
	if clients < 1 {
		return Schedule{}, paramErr(PatternRace, "clients", "must be at least 1, not %d", clients)
	}
	if count < 1 {
		return Schedule{}, paramErr(PatternRace, "count", "must be at least 1, not %d", count)
	}
	if n := float64(clients) * float64(count); n > MaxSends {
		return Schedule{}, tooMany(PatternRace, n)
	}
	if mode == "" {
		mode = Barrier
	}
	if !slices.Contains(RaceModes, mode) {
		return Schedule{}, paramErr(PatternRace, "race-mode", "must be barrier, last-byte or single-packet, not %q", mode)
	}
	sends := make([]Send, 0, clients*count)
	for range count {
		for c := range clients {
			sends = append(sends, Send{Client: c, Batch: 1})
		}
	}
	s := single(PatternRace, sends, 0)
	s.Clients, s.RaceMode = clients, mode
	return s, nil
}

// Ramp changes the rate linearly from `from` to `to` requests per second
// over d: request i is due when the expected count from·t + (to−from)·t²/2d
// reaches i (rounded to the nanosecond), for every such offset before d —
// about (from+to)/2·d requests. Either rate may be 0, not both. The
// schedule lasts d.
func Ramp(from, to float64, d time.Duration) (Schedule, error) {
	for _, p := range []struct {
		name string
		r    float64
	}{{"from", from}, {"to", to}} {
		if p.r < 0 || math.IsInf(p.r, 0) || math.IsNaN(p.r) {
			return Schedule{}, paramErr(PatternRamp, p.name, "must be a rate of at least 0/s, not %s", units.FormatRate(p.r))
		}
	}
	if from == 0 && to == 0 {
		return Schedule{}, paramErr(PatternRamp, "to", "and from must not both be 0/s")
	}
	if err := positiveDuration(PatternRamp, "duration", d); err != nil {
		return Schedule{}, err
	}
	secs := d.Seconds()
	if n := (from + to) / 2 * secs; n > MaxSends {
		return Schedule{}, tooMany(PatternRamp, n)
	}
	sh, err := rampShape(from, to, d)
	if err != nil {
		return Schedule{}, err
	}
	sends, err := sh.sends(PatternRamp)
	if err != nil {
		return Schedule{}, err
	}
	return single(PatternRamp, sends, d), nil
}

// Pause is an idle phase of length d, for Sequence. It has no sends.
func Pause(d time.Duration) (Schedule, error) {
	if err := positiveDuration(PatternPause, "pause", d); err != nil {
		return Schedule{}, err
	}
	return Schedule{Duration: d, Phases: []PhaseInfo{{Name: PatternPause, Pattern: PatternPause, Duration: d}}}, nil
}

// Named returns a copy of s whose sends and phases all carry name. It is
// meant for single-phase schedules, before Sequence.
func (s Schedule) Named(name string) Schedule {
	s.Sends = slices.Clone(s.Sends)
	for i := range s.Sends {
		s.Sends[i].Phase = name
	}
	s.Phases = slices.Clone(s.Phases)
	for i := range s.Phases {
		s.Phases[i].Name = name
	}
	return s
}

// PerClient returns s played by n clients at once: every send of s is
// repeated n times, at the same offset and in the same batch, for clients
// 0…n−1 (a send of client k in s becomes clients k·n … k·n+n−1). Each client
// runs the whole pattern: a steady 5/s for 3 clients offers 15/s in total,
// 5/s per client.
func (s Schedule) PerClient(n int) (Schedule, error) {
	if n < 1 {
		return Schedule{}, paramErr(firstPattern(s), "clients", "must be at least 1, not %d", n)
	}
	if float64(len(s.Sends))*float64(n) > MaxSends {
		return Schedule{}, tooMany(firstPattern(s), float64(len(s.Sends))*float64(n))
	}
	if n == 1 {
		return s, nil
	}
	sends := make([]Send, 0, len(s.Sends)*n)
	for _, snd := range s.Sends {
		k := snd.Client
		for c := range n {
			snd.Client = k*n + c
			sends = append(sends, snd)
		}
	}
	s.Sends = sends
	s.Clients = max(s.Clients, 1) * n
	s.Phases = slices.Clone(s.Phases)
	for i := range s.Phases {
		s.Phases[i].Requests *= n
	}
	return s, nil
}

func firstPattern(s Schedule) string {
	if len(s.Phases) > 0 {
		return s.Phases[0].Pattern
	}
	return "schedule"
}

// Jitter returns a copy of s with every send that is not part of a batch
// delayed by a pseudo-random amount in [0, maxDelay), drawn from a PCG
// generator seeded with seed (the same seed gives the same schedule), and
// re-sorted by offset. Batched sends (races) keep their offset. Duration
// grows if a send moves past it.
func (s Schedule) Jitter(maxDelay time.Duration, seed uint64) (Schedule, error) {
	if maxDelay < 0 {
		return Schedule{}, paramErr(firstPattern(s), "jitter", "must not be negative, not %v", maxDelay)
	}
	if maxDelay == 0 {
		return s, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x6a6974746572)) // "jitter"
	s.Sends = slices.Clone(s.Sends)
	for i := range s.Sends {
		if s.Sends[i].Batch == 0 {
			s.Sends[i].At += time.Duration(rng.Int64N(int64(maxDelay)))
		}
	}
	sortSends(s.Sends)
	if n := len(s.Sends); n > 0 && s.Sends[n-1].At > s.Duration {
		s.Duration = s.Sends[n-1].At
		if len(s.Phases) == 1 {
			s.Phases = slices.Clone(s.Phases)
			s.Phases[0].Duration = s.Duration
		}
	}
	return s, nil
}

// Sequence plays phases one after another: phase k begins when phase k−1's
// Duration has elapsed (use Pause for idle time between them). Batch
// numbers are renumbered so that batches of different phases stay apart;
// Clients is the largest of the phases'. All phases that race must use the
// same race mode, and only the first phase may be anchored to the clock
// (Start).
func Sequence(phases ...Schedule) (Schedule, error) {
	var out Schedule
	var cursor time.Duration
	batchBase := 0
	n := 0
	for _, p := range phases {
		n += len(p.Sends)
	}
	if n > MaxSends {
		return Schedule{}, tooMany("sequence", float64(n))
	}
	out.Sends = make([]Send, 0, n)
	for k, p := range phases {
		if !p.Start.IsZero() {
			if k > 0 {
				return Schedule{}, fmt.Errorf("patterns: sequence: phase %d is anchored to the clock; only the first phase may be", k+1)
			}
			out.Start = p.Start
		}
		if p.RaceMode != "" && hasBatch(p) {
			if out.RaceMode != "" && out.RaceMode != p.RaceMode {
				return Schedule{}, fmt.Errorf("patterns: sequence: phases race in modes %s and %s; one schedule has one race mode", out.RaceMode, p.RaceMode)
			}
			out.RaceMode = p.RaceMode
		}
		maxBatch := 0
		for _, snd := range p.Sends {
			snd.At += cursor
			if snd.Batch != 0 {
				maxBatch = max(maxBatch, snd.Batch)
				snd.Batch += batchBase
			}
			out.Sends = append(out.Sends, snd)
		}
		batchBase += maxBatch
		for _, ph := range p.Phases {
			ph.Offset += cursor
			out.Phases = append(out.Phases, ph)
		}
		out.Clients = max(out.Clients, p.Clients)
		cursor += p.Duration
	}
	out.Duration = cursor
	// Phases are sorted and each ends by its Duration, so out is sorted
	// unless a phase's Duration was set short by hand.
	sortSends(out.Sends)
	if n := len(out.Sends); n > 0 && out.Sends[n-1].At > out.Duration {
		out.Duration = out.Sends[n-1].At
	}
	return out, nil
}

func hasBatch(s Schedule) bool {
	return slices.ContainsFunc(s.Sends, func(snd Send) bool { return snd.Batch != 0 })
}

// Batches returns the number of distinct synchronised batches in s.
func (s Schedule) Batches() int {
	seen := map[int]bool{}
	for _, snd := range s.Sends {
		if snd.Batch != 0 {
			seen[snd.Batch] = true
		}
	}
	return len(seen)
}

// sortSends sorts sends by At, keeping the order of equal offsets (a
// stable sort, done as an index-keyed unstable sort, which is much faster
// on the large, nearly sorted slices jitter makes).
func sortSends(sends []Send) {
	if slices.IsSortedFunc(sends, func(a, b Send) int { return cmp.Compare(a.At, b.At) }) {
		return
	}
	idx := make([]int32, len(sends))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := cmp.Compare(sends[a].At, sends[b].At); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	sorted := make([]Send, len(sends))
	for i, j := range idx {
		sorted[i] = sends[j]
	}
	copy(sends, sorted)
}
