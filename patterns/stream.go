package patterns

import (
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/rlprobe/rlprobe/units"
)

// MaxStreamSends bounds the sends of one streamed schedule. A streamed
// schedule holds no sends in memory, so this is no memory bound: it keeps
// every send index exact in the float arithmetic of the shapes (2^53) with
// room to spare. Safety caps far below it (run's --max-requests) are the
// caller's business.
const MaxStreamSends = 1 << 50

// shape is one pattern's sends for a single client in closed form: n
// sends, send i due at at(i), in non-decreasing order of offset.
type shape struct {
	n  int64
	at func(i int64) time.Duration
}

// countBelow returns the number of leading indexes i for which ok(i)
// holds, where ok is monotone (true, then false for good) and ok(0) holds;
// est is a guess of the answer.
func countBelow(est float64, ok func(i int64) bool) int64 {
	hi := int64(math.Min(math.Ceil(est), MaxStreamSends)) + 2
	for ok(hi) {
		hi *= 2
	}
	lo := int64(0) // ok(lo) holds, ok(hi) does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// steadyShape is Steady's closed form: send i due at i/rate, rounded to
// the nanosecond, for every i whose offset is before d.
func steadyShape(rate float64, d time.Duration) (shape, error) {
	if err := positiveRate(PatternSteady, "rate", rate); err != nil {
		return shape{}, err
	}
	if err := positiveDuration(PatternSteady, "duration", d); err != nil {
		return shape{}, err
	}
	if n := rate * d.Seconds(); n > MaxStreamSends {
		return shape{}, tooManyStream(PatternSteady, n)
	}
	at := func(i int64) time.Duration { return roundNS(float64(i) * float64(time.Second) / rate) }
	n := countBelow(rate*d.Seconds(), func(i int64) bool { return at(i) < d })
	return shape{n: n, at: at}, nil
}

// rampShape is Ramp's closed form (see Ramp).
func rampShape(from, to float64, d time.Duration) (shape, error) {
	for _, p := range []struct {
		name string
		r    float64
	}{{"from", from}, {"to", to}} {
		if p.r < 0 || math.IsInf(p.r, 0) || math.IsNaN(p.r) {
			return shape{}, paramErr(PatternRamp, p.name, "must be a rate of at least 0/s, not %s", units.FormatRate(p.r))
		}
	}
	if from == 0 && to == 0 {
		return shape{}, paramErr(PatternRamp, "to", "and from must not both be 0/s")
	}
	if err := positiveDuration(PatternRamp, "duration", d); err != nil {
		return shape{}, err
	}
	secs := d.Seconds()
	if n := (from + to) / 2 * secs; n > MaxStreamSends {
		return shape{}, tooManyStream(PatternRamp, n)
	}
	// Solve a·t² + b·t = i for t ≥ 0 with a = (to−from)/2d, b = from, in
	// the form 2i / (b + √(b² + 4ai)), stable for a = 0 and for b = 0.
	a := (to - from) / (2 * secs)
	offset := func(i int64) (time.Duration, bool) {
		disc := from*from + 4*a*float64(i)
		if disc < 0 {
			return 0, false // the rate would have reached 0 before d
		}
		t := 0.0
		if i > 0 {
			t = 2 * float64(i) / (from + math.Sqrt(disc))
		}
		return roundNS(t * float64(time.Second)), true
	}
	n := countBelow((from+to)/2*secs, func(i int64) bool {
		at, ok := offset(i)
		return ok && at < d
	})
	return shape{n: n, at: func(i int64) time.Duration { at, _ := offset(i); return at }}, nil
}

// recoveryShape is Recovery's closed form: send i due at i·every, for
// every offset before span.
func recoveryShape(every, span time.Duration) (shape, error) {
	if err := positiveDuration(PatternRecovery, "every", every); err != nil {
		return shape{}, err
	}
	if err := positiveDuration(PatternRecovery, "span", span); err != nil {
		return shape{}, err
	}
	n := int64((span + every - 1) / every)
	if n > MaxStreamSends {
		return shape{}, tooManyStream(PatternRecovery, float64(n))
	}
	return shape{n: n, at: func(i int64) time.Duration { return time.Duration(i) * every }}, nil
}

// sends materialises sh as a slice of at most MaxSends sends of client 0.
func (sh shape) sends(pattern string) ([]Send, error) {
	if sh.n > MaxSends {
		return nil, tooMany(pattern, float64(sh.n))
	}
	out := make([]Send, sh.n)
	for i := range out {
		out[i].At = sh.at(int64(i))
	}
	return out, nil
}

func tooManyStream(pattern string, n float64) error {
	return &ParamError{Pattern: pattern, Param: "requests",
		Msg: fmt.Sprintf("would be %.0f, more than the %d one streamed schedule may hold", math.Ceil(n), int64(MaxStreamSends))}
}

// segment is one phase of a streamed schedule: the shape played by
// clients 0…clients−1, each send of the shape repeated once per client in
// client order (as PerClient does), all offsets shifted by offset and
// every send named phase.
type segment struct {
	sh      shape
	clients int
	offset  time.Duration
	phase   string
}

// count returns the segment's number of sends.
func (g segment) count() int64 { return g.sh.n * int64(g.clients) }

// Streamed reports whether s produces its sends on demand (All) instead
// of holding them in Sends, which is then nil. Only Plan.Streamed makes
// such schedules.
func (s Schedule) Streamed() bool { return s.stream != nil }

// Len returns the number of sends of s: len(Sends), or for a streamed
// schedule the sum of its phases' closed-form counts. It never produces a
// send.
func (s Schedule) Len() int64 {
	if s.stream == nil {
		return int64(len(s.Sends))
	}
	var n int64
	for _, g := range s.stream {
		n += g.count()
	}
	return n
}

// All returns the sends of s in schedule order: Sends, or for a streamed
// schedule each send computed as it is asked for, so that a schedule of
// any length takes constant memory. The sends are the very ones
// Plan.Schedule would hold for the same plan.
func (s Schedule) All() iter.Seq[Send] {
	if s.stream == nil {
		return func(yield func(Send) bool) {
			for _, snd := range s.Sends {
				if !yield(snd) {
					return
				}
			}
		}
	}
	segs := s.stream
	return func(yield func(Send) bool) {
		for _, g := range segs {
			for i := range g.sh.n {
				at := g.offset + g.sh.at(i)
				for c := range g.clients {
					if !yield(Send{At: at, Client: c, Phase: g.phase}) {
						return
					}
				}
			}
		}
	}
}
