package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// The suite's probes that follow the burst: recovery (with the
// Retry-After probes), the edge straddle and key spoofing, and when a
// single identity's quota is whole again.

// freshAt returns when the (single) identity's quota is surely whole
// again: a period after the last accepted request (a fixed window holding
// it has ended by then), and past a declared penalty: a block after the
// last rejection, a window after the last request (extend) or rejection
// (restart).
func (r *suiteRun) freshAt() int64 {
	all := append(slices.Clone(r.Prior), r.results...)
	lastAcc, lastRej, lastReq := int64(-1), int64(-1), int64(-1)
	for i := range all {
		x := &all[i]
		if x.Outcome == record.OutcomeNotSent {
			continue
		}
		lastReq = max(lastReq, hiOf(x))
		switch r.classOf(x) {
		case record.ClassAccepted:
			lastAcc = max(lastAcc, hiOf(x))
		case record.ClassRejected:
			lastRej = max(lastRej, hiOf(x))
		}
	}
	at := int64(0)
	if lastAcc >= 0 {
		at = lastAcc + int64(r.p.period) + int64(r.p.poll)
	}
	pen, w := r.e.Penalty, int64(r.e.Window)
	switch {
	case pen.Kind == limiter.PenaltyBlock && lastRej >= 0:
		at = max(at, lastRej+int64(pen.Duration)+int64(r.p.poll))
	case pen.Kind == limiter.PenaltyExtend && lastReq >= 0:
		at = max(at, lastReq+w+int64(r.p.poll))
	case pen.Kind == limiter.PenaltyRestart && lastRej >= 0:
		at = max(at, lastRej+w+int64(r.p.poll))
	}
	return at
}

// poll sends one request at t (since Zero) and returns its result.
func (r *suiteRun) poll(ctx context.Context, c int, t int64, phase string) (*record.Result, error) {
	res, err := r.send(ctx, r.Engine, []patterns.Send{{At: time.Duration(t), Client: c, Phase: phase}})
	if len(res) == 0 {
		return nil, err
	}
	return &res[0], err
}

// recovery watches client c's quota come back after rejection x, the
// last of the burst's. With a Retry-After it first sends the late probe
// (well before the advertised moment), then polls through the rounding
// second before it, and retries exactly at it and just after. A declared
// block is waited out first (it began at the burst's first rejection, at
// the latest); under a declared extend or restart, where every poll would
// keep the key refused, it probes only after a quiet window
// (quietRecovery). It returns the bounds of the moment quota returned:
// after the last rejected poll's arrival, before the first accepted
// one's.
func (r *suiteRun) recovery(ctx context.Context, c int, burst []record.Result, x *record.Result) (lo, hi int64, found bool, err error) {
	if k := r.e.Penalty.Kind; k == limiter.PenaltyExtend || k == limiter.PenaltyRestart {
		return r.quietRecovery(ctx, c, burst, x)
	}
	p := int64(r.p.poll)
	lastRej := loOf(x)
	end := hiOf(x) + int64(r.p.period) + 2*p
	// from is when polls start: a declared block ends D after its start,
	// the burst's first rejection or before.
	from := int64(math.MinInt64)
	if pen := r.e.Penalty; pen.Kind == limiter.PenaltyBlock {
		first := x
		for i := range burst {
			if r.classOf(&burst[i]) == record.ClassRejected {
				first = &burst[i]
				break
			}
		}
		from = loOf(first) + int64(pen.Duration) - 2*p
		end = max(end, hiOf(first)+int64(pen.Duration)+2*p)
		r.progress("recovery: waiting out the declared block of %s", units.HumanDuration(pen.Duration))
	}
	try := func(t int64, phase string) (bool, error) {
		if phase == CheckRecovery {
			t = r.pastBands(t)
		}
		res, err := r.poll(ctx, c, t, phase)
		if err != nil || res == nil {
			return false, err
		}
		switch r.classOf(res) {
		case record.ClassAccepted:
			lo, hi, found = lastRej, hiOf(res), true
			return true, nil
		case record.ClassRejected:
			lastRej = loOf(res)
		}
		return false, nil
	}
	t := r.now()
	if m, d, ra, ok := r.hint(x); ok {
		r.progress("recovery: %s says quota returns in %s", map[bool]string{true: "Retry-After", false: "the reset header"}[ra], units.HumanDuration(time.Duration(d)))
		if ra {
			if late := m - max(int64(2*time.Second), d/2) - p; late > r.now()+p {
				if done, err := try(late, CheckRetryAfter); done || err != nil {
					return lo, hi, found, err
				}
			}
		}
		for t = max(r.now(), m-int64(time.Second)-2*p); t < m; t += p {
			if done, err := try(t, CheckRecovery); done || err != nil {
				return lo, hi, found, err
			}
		}
		if ra {
			delta := min(p, int64(100*time.Millisecond))
			for _, at := range []int64{m, m + delta} {
				if done, err := try(at, CheckRetryAfter); done || err != nil {
					return lo, hi, found, err
				}
			}
			t = m + delta + p
		} else {
			t = m
		}
		end = max(end, t)
	} else {
		r.progress("recovery: polling every %s", units.HumanDuration(time.Duration(p)))
	}
	for t = max(t, from); t <= end; t += p {
		if done, err := try(max(t, r.now()), CheckRecovery); done || err != nil {
			return lo, hi, found, err
		}
	}
	r.progress("recovery: quota did not return within %s", units.HumanDuration(r.p.period+2*time.Duration(p)))
	return 0, 0, false, nil
}

// quietRecovery is recovery under a declared extend or restart: each
// probe waits a window (and a poll interval) after the last request the
// client sent, so that an honest key has let it in again; the first is at
// the advertised moment when a Retry-After says it is later. Three
// probes at most.
func (r *suiteRun) quietRecovery(ctx context.Context, c int, burst []record.Result, x *record.Result) (lo, hi int64, found bool, err error) {
	w, p := int64(r.e.Window), int64(r.p.poll)
	last := hiOf(x)
	for i := range burst {
		if burst[i].Outcome != record.OutcomeNotSent {
			last = max(last, hiOf(&burst[i]))
		}
	}
	at, phase := last+w+p, CheckRecovery
	if m, _, ra, ok := r.hint(x); ok && ra && m >= at {
		at, phase = m, CheckRetryAfter
	}
	r.progress("recovery: the declared %s keeps a polled key refused; probing after a quiet %s", r.e.Penalty.Kind, units.HumanDuration(r.e.Window))
	lastRej := loOf(x)
	for range 3 {
		if phase == CheckRecovery {
			at = r.pastBands(at)
		}
		res, err := r.poll(ctx, c, max(at, r.now()), phase)
		if err != nil || res == nil {
			return 0, 0, false, err
		}
		switch r.classOf(res) {
		case record.ClassAccepted:
			return lastRej, hiOf(res), true, nil
		case record.ClassRejected:
			lastRej = loOf(res)
		}
		at, phase = hiOf(res)+w+p, CheckRecovery
	}
	r.progress("recovery: quota did not return after three quiet windows")
	return 0, 0, false, nil
}

// pastBands returns t, or a later moment, at which a poll admitted by an
// honest window is certainly more than a window after every accepted
// request, the preflight (Prior) included: t is moved past hi+W of each
// accepted request whose [lo+W, hi+W) holds it. A poll admitted inside
// that band may, by the bounds, be within one window of the other request
// (a possible window-limit-exceeded from an honest sliding log: seen when
// the preflight's answer took 16–22 ms under the race detector and a poll
// every 100 ms landed in it). The delay is at most one request's round
// trip per band. Policies without a window keep t.
func (r *suiteRun) pastBands(t int64) int64 {
	w := int64(r.e.Window)
	if w <= 0 {
		return t
	}
	for moved := true; moved; {
		moved = false
		for _, res := range [][]record.Result{r.Prior, r.results} {
			for i := range res {
				x := &res[i]
				if r.classOf(x) != record.ClassAccepted {
					continue
				}
				if lo, hi := loOf(x)+w, hiOf(x)+w; lo <= t && t < hi {
					t, moved = hi, true
				}
			}
		}
	}
	return t
}

// edge straddles the window edge one window (or two, when the current
// window's quota is already half used) after the observed return in
// [lo, hi]: quota requests just before it, quota just after.
func (r *suiteRun) edge(ctx context.Context, c int, lo, hi int64) error {
	w := int64(r.e.Window)
	used := int64(0)
	for i := range r.results {
		if x := &r.results[i]; x.Phase != "" && loOf(x) >= lo && r.classOf(x) == record.ClassAccepted {
			used++
		}
	}
	k := int64(1)
	if used*2 >= r.p.q {
		k = 2
	}
	for lo+k*w-int64(r.p.margin) < r.now()+int64(50*time.Millisecond) {
		k++
	}
	eLo, eHi := lo+k*w, hi+k*w
	m := int64(r.p.margin)
	sb := int64(r.p.group)
	n := r.p.q
	r.progress("edge: %d requests before the edge at %s, %d after", n, units.HumanDuration(time.Duration(eLo)), n)
	var sends []patterns.Send
	for i := range n {
		sends = append(sends, patterns.Send{At: time.Duration(eLo - m - sb + sb*i/n), Client: c, Phase: CheckEdge})
	}
	for i := range n {
		sends = append(sends, patterns.Send{At: time.Duration(eHi + m + sb*i/n), Client: c, Phase: CheckEdge})
	}
	_, err := r.send(ctx, r.Engine, sends)
	return err
}

// keySpoof exhausts client 0's address, then sends requests from it that
// each claim another address in one spoofable header.
func (r *suiteRun) keySpoof(ctx context.Context) error {
	r.progress("key-spoof: exhaust one address, then vary %s", strings.Join(SpoofHeaders, ", "))
	if _, err := r.send(ctx, r.Engine, r.burstSends(0, time.Duration(r.now())+10*time.Millisecond, CheckKeySpoof)); err != nil {
		return err
	}
	for _, h := range SpoofHeaders {
		eng, err := r.Spoof(h)
		if err != nil {
			return fmt.Errorf("verify: key-spoof engine for %s: %w", h, err)
		}
		at := time.Duration(r.now()) + 10*time.Millisecond
		var sends []patterns.Send
		for i := range 3 {
			sends = append(sends, patterns.Send{At: at + time.Duration(i)*20*time.Millisecond, Client: i + 1, Phase: CheckKeySpoof + "/" + h})
		}
		if _, err := r.send(ctx, eng, sends); err != nil {
			return err
		}
	}
	return nil
}

// seriesStep names the plan's step of the paced series.
const seriesStep = "paced requests on one kept-alive connection, then each on a new connection"

// series sends the paced series (instances.go judges them): twice the
// quota and more, spaced so that none overlaps another, first on one
// kept-alive connection (Send.Conn 1), then, at fresh quota, each on a
// connection of its own (Conn 2, 3, …). Behind a balancer that keeps a
// connection on one of K instances each enforcing the policy, the first
// is admitted the quota and the second K times it; a racy shared counter
// admits the quota to both.
func (r *suiteRun) series(ctx context.Context) error {
	n, gap := r.seriesGap()
	for _, s := range []struct {
		phase string
		conn  func(i int64) int
	}{
		{PhaseOneConn, func(int64) int { return 1 }},
		{PhaseNewConns, func(i int64) int { return int(i) + 2 }},
	} {
		c := r.fresh()
		at := r.seriesStart(time.Duration(n) * gap)
		r.progress("%s: %d requests %s apart at %s", s.phase, n, units.HumanDuration(gap), units.HumanDuration(at))
		sends := make([]patterns.Send, n)
		for i := range n {
			sends[i] = patterns.Send{At: at + time.Duration(i)*gap, Client: c, Phase: s.phase, Conn: s.conn(i)}
		}
		if _, err := r.send(ctx, r.Engine, sends); err != nil {
			return err
		}
	}
	return nil
}

// seriesGap returns the paced series' length and spacing: seriesSize's,
// widened to twice the slowest answer seen so far (its time from the
// request written to the first byte back), so that none overlaps the
// one before on a slow target, up to gapMax.
func (r *suiteRun) seriesGap() (int64, time.Duration) {
	n, gap, gapMax, _ := r.p.seriesSize()
	var rtt int64
	for _, res := range [][]record.Result{r.Prior, r.results} {
		for i := range res {
			if x := &res[i]; x.Outcome == record.OutcomeResponse && x.Wrote > 0 && x.TTFB > x.Wrote {
				rtt = max(rtt, x.TTFB-x.Wrote)
			}
		}
	}
	return n, min(max(gap, 2*time.Duration(rtt)), gapMax)
}

// seriesStart returns when a paced series of length span starts: soon,
// after the identity's quota is whole again when there is only one, and
// for a clock-aligned fixed window where the series fits in one window
// with a margin on each side.
func (r *suiteRun) seriesStart(span time.Duration) time.Duration {
	at := time.Duration(r.now()) + 20*time.Millisecond
	if !r.par {
		at = max(at, time.Duration(r.freshAt()))
	}
	e := r.e
	if e.WindowType != Fixed || e.Align == limiter.AlignFirstRequest {
		return at
	}
	w, m := e.Window, r.p.margin
	origin := time.Duration(r.Zero.UnixNano()) - e.Phase
	off := (origin + at) % w
	if off < m || off+span > w-m {
		at += w - off + m
	}
	return at
}

// secondIdentity sends, right after the burst exhausted client 0, one
// request from client 1 when the rule is per client and its identities
// are used one after another (two or three of them): a per-client key
// admits it, a key that puts every client into one quota (key-collapsed)
// refuses it. With four or more identities the race beside the burst
// already runs on another one.
func (r *suiteRun) secondIdentity(ctx context.Context) error {
	if !r.tryKey() {
		return nil
	}
	r.progress("burst: then 1 request from a second identity")
	_, err := r.send(ctx, r.Engine, []patterns.Send{{At: time.Duration(r.now()) + 10*time.Millisecond, Client: 1, Phase: CheckBurst}})
	return err
}

// tryKey reports whether the suite tests the key with a second identity
// after the burst (see secondIdentity).
func (r *suiteRun) tryKey() bool {
	return !r.par && r.Options.forRule(&r.Rule).Identities >= 2
}
