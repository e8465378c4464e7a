package infer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// Advertised is one disagreement between what the rate-limit headers claim
// and what the fitted answer does: headers are claims, behaviour is
// evidence. Field is "limit", "window" or "reset"; Advertised and Fitted
// are the two values as people read them.
type Advertised struct {
	Field      string `json:"field"`
	Advertised string `json:"advertised"`
	Fitted     string `json:"fitted"`
	Message    string `json:"message"`
}

// Tolerances of the claims.
const (
	// claimWindowTol: an advertised window within this share of the
	// fitted one (or within a second, its rounding) agrees.
	claimWindowTol = 0.05
	// constantResetMin is the fewest rejections whose advertised resets
	// must be seen before a reset is called constant.
	constantResetMin = 3
	// constantResetSpread: the model's true waits of those rejections
	// must spread over more than this, while the advertised resets stay
	// within a second, for the reset to be a constant.
	constantResetSpread = 2 * time.Second
	// claimResetTol: an advertised reset within this share of the
	// model's wait (or within a second, its rounding) agrees.
	claimResetTol = 0.1
	// implausibleReset: a reset delay this long is a time, not a delay.
	implausibleReset = 10 * 365 * 24 * time.Hour
)

// claims compares the headers of results with the fitted winner w: the
// advertised quota with the fitted limit (windows) or capacity (buckets),
// the advertised window with the fitted window (buckets: max(1 s, ⌈C/r⌉),
// what an honest bucket advertises), and the resets of rejections with the
// model's waits (a reset that stays the same while the true wait changes
// is a constant). It returns nil when no answer carried a rate-limit
// header, and an empty list when every claim agrees.
func claims(results []record.Result, origin time.Time, o *observations, w scored, perClient bool) []Advertised {
	var quotas, windows []int64
	type reset struct{ adv, model time.Duration }
	var resets []reset
	seen := false
	c := w.h.config()
	st := states{rotate: o.rotate}
	for _, cl := range o.clusters {
		for i := cl[0]; i < cl[1]; i++ {
			ob := o.list[i]
			key := st.next(ob.client, perClient)
			next, d := c.Step(st.get(key), ob.at)
			st = st.set(key, next)
			r := results[ob.ref]
			if len(r.Headers) == 0 {
				continue
			}
			p := headers.Parse(r.Headers, origin.Add(time.Duration(r.TTFB)))
			for _, pol := range p.Policies {
				seen = true
				if pol.Quota > 0 {
					quotas = append(quotas, pol.Quota)
				}
				if pol.HasWindow {
					windows = append(windows, int64(pol.Window/time.Second))
				}
				break
			}
			for _, l := range p.Limits {
				seen = true
				if len(p.Policies) == 0 && l.HasLimit {
					quotas = append(quotas, l.Limit)
				}
				// An epoch reset's wait depends on the two clocks agreeing:
				// only resets sent as delays are held against the model.
				// A delay of years is a Unix time from a clock before
				// 2001 (headers.Parse reads such a number as a delay):
				// not a claim about the wait either.
				if l.HasReset && !l.ResetIsEpoch && l.Reset < implausibleReset && !ob.accepted && !d.Allowed {
					// draft-8's t (and on a rejection -11's t and -12's
					// w, the effective window of r = 0) is the wait for
					// more quota; the other dialects' reset the wait until
					// it is full again.
					model := d.UntilFull
					if l.Dialect == headers.Draft8 || l.Dialect == headers.Draft12 {
						model = max(d.UntilMore, d.RetryAfter)
					}
					resets = append(resets, reset{l.Reset, model})
				}
				break
			}
		}
	}
	if !seen {
		return nil
	}
	out := []Advertised{}
	h := w.h
	count, what := h.n, "limit"
	if !h.v.windowed() {
		what = "capacity"
	}
	if q, ok := mode(quotas); ok && q != count {
		msg := fmt.Sprintf("the headers advertise a quota of %d; the target admits %d (its %s)", q, count, what)
		if !h.v.windowed() && math.Abs(float64(q)-h.x) <= math.Max(1, 0.05*h.x) {
			msg += fmt.Sprintf(": %d is the refill rate per second, not the capacity", q)
		}
		out = append(out, Advertised{Field: "limit", Advertised: fmt.Sprint(q), Fitted: fmt.Sprint(count), Message: msg})
	}
	fitted := h.x
	if !h.v.windowed() {
		fitted = math.Max(1, math.Ceil(float64(h.n)/h.x))
	}
	if ws, ok := mode(windows); ok && math.Abs(float64(ws)-fitted) > math.Max(1, claimWindowTol*fitted) {
		out = append(out, Advertised{Field: "window", Advertised: units.HumanDuration(time.Duration(ws) * time.Second),
			Fitted:  units.HumanDuration(units.Seconds(fitted)),
			Message: fmt.Sprintf("the headers advertise a window of %ds; the target behaves as %v", ws, h)})
	}
	if len(resets) >= constantResetMin {
		advs, models, off := make([]time.Duration, len(resets)), make([]time.Duration, len(resets)), make([]time.Duration, len(resets))
		for i, r := range resets {
			advs[i], models[i], off[i] = r.adv, r.model, r.adv-r.model
		}
		slices.Sort(advs)
		slices.Sort(models)
		slices.Sort(off)
		constant := advs[len(advs)-1]-advs[0] <= time.Second && models[len(models)-1]-models[0] > constantResetSpread
		medAdv, medModel := advs[len(advs)/2], models[len(models)/2]
		wrong := absDur(off[len(off)/2]) > max(time.Second, time.Duration(claimResetTol*float64(medModel)))
		switch {
		case constant:
			out = append(out, Advertised{Field: "reset",
				Advertised: "always " + units.HumanDuration(medAdv),
				Fitted:     units.HumanDuration(models[0]) + "–" + units.HumanDuration(models[len(models)-1]),
				Message: fmt.Sprintf("%d rejections advertised the same reset while the true wait ranged over %s: the reset is a constant",
					len(resets), units.HumanDuration(models[len(models)-1]-models[0]))})
		case wrong:
			out = append(out, Advertised{Field: "reset", Advertised: units.HumanDuration(medAdv), Fitted: units.HumanDuration(medModel),
				Message: fmt.Sprintf("rejections advertised a reset of %s where the fitted answer's wait is %s (medians of %d)",
					units.HumanDuration(medAdv), units.HumanDuration(medModel), len(resets))})
		}
	}
	return out
}

// mode returns the most frequent value of xs (the smallest of equally
// frequent ones); ok is false for none.
func mode(xs []int64) (int64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	n := map[int64]int{}
	for _, x := range xs {
		n[x]++
	}
	best, bestN := int64(0), 0
	for x, c := range n {
		if c > bestN || (c == bestN && x < best) {
			best, bestN = x, c
		}
	}
	return best, true
}
