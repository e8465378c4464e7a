package verify

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/units"
)

// The key family's deployment bug: a per-client key that collapses, so
// that every client shares one quota (typically a limiter keyed on the
// address it sees, which behind a proxy is the proxy's).

// collapsed judges a per-client rule seen from two identities or more: a
// refusal of one identity (B) while its own quota was surely left, which
// the other identities' acceptances explain when every identity is
// counted as one key, is key-collapsed — certain when the pooled count
// surely reached the quota before the refusal (for every arrival order),
// possible when it may have. It returns the findings and the refusals
// it explains when certain, which under-admission (raised per identity)
// then leaves to it. A declared penalty is left out (a refusal after one's own excess
// is expected then), and buckets are never certain (their pooled level
// is bounded one way only here).
func (r *rule) collapsed(groups map[string][]*obs, names []string) ([]Finding, map[*obs]bool) {
	e := r.e
	if !e.PerClient() || len(names) < 2 || !e.Penalty.IsZero() || e.Quota() <= 0 {
		return nil, nil
	}
	var all []*obs
	for _, g := range names {
		all = append(all, groups[g]...)
	}
	slices.SortStableFunc(all, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	pooled := r.traffic("", all)
	if len(pooled.counted) == 0 {
		return nil, nil
	}
	q := e.Quota()
	slack := max(1, (q+9)/10)
	r.wins = nil
	if e.WindowType == Fixed && !e.firstRequest() {
		r.wins = r.windowsFor(pooled)
	}
	pooledWins := r.wins
	mayLeft := r.leftOf(pooled.counted) // the least the pooled key had left
	var (
		explained     = map[*obs]bool{}
		certain       bool
		tried         int
		refused, used []*obs
	)
	for _, g := range names {
		t := r.traffic(g, groups[g])
		if e.WindowType == Fixed && !e.firstRequest() {
			r.wins = r.windowsFor(t)
		}
		ownLeft := r.leftOf(t.counted) // (fixedLeft keeps the group's windows)
		r.wins = pooledWins
		// The other identities' acceptances, by Lo: those that may come
		// before a refusal are a prefix.
		others := filter(pooled.counted, func(o *obs) bool { return o.group != g })
		prefix := 0
		for _, x := range t.judged {
			if x.class != record.ClassRejected || mayLeft(x) >= 1 {
				continue
			}
			if ownLeft(x) < slack {
				continue
			}
			n := sort.Search(len(others), func(k int) bool { return others[k].iv.Lo > x.iv.Hi })
			if n == 0 {
				continue
			}
			prefix = max(prefix, n)
			explained[x] = true
			refused = append(refused, x)
			// Sureness is asked of the first refusals only: it costs a
			// pass over the acceptances, and one sure refusal suffices.
			if !certain && tried < maxSureTries {
				tried++
				certain = r.surelyExhausted(pooled.counted, x)
			}
		}
		used = append(used, others[:prefix]...)
	}
	if len(refused) == 0 {
		return nil, nil
	}
	c := Possible
	if certain {
		c = Certain
	} else {
		// A possible cause does not take a certain under-admission's
		// place: both are reported.
		explained = nil
	}
	ev := append(slices.Clone(used), refused...)
	clients := map[string]bool{}
	for _, o := range ev {
		clients[o.group] = true
	}
	return []Finding{r.finding(IDKeyCollapsed, c, "", ev, Finding{
		Check: CheckKeySpoof,
		Message: fmt.Sprintf("refused %s of one client while its own quota of %d was left, after %s of %s: the %s key behaves as one key shared by every client",
			units.Count(len(refused), "request"), q, units.Count(len(used), "accepted request"), units.Count(len(clients)-1, "other client"), e.Key),
		Evidence: Evidence{Count: len(refused), Bound: bound(q), Refs: refsOf(ev), Headers: refused[0].res.Headers},
	})}, explained
}

// maxSureTries bounds the refusals whose sureness collapsed asks about.
const maxSureTries = 64

// leftOf returns, for a refusal x, the least quota the rule's key can have
// had left given the accepted requests acc (the count under-admission
// uses): the window that may hold the most of them, the emptiest bucket.
func (r *rule) leftOf(acc []*obs) func(*obs) int64 {
	switch {
	case r.e.IsBucket():
		return r.bucketPessimist(acc, false)
	case r.e.WindowType == Fixed && !r.e.firstRequest():
		return r.fixedLeft(acc)
	default:
		// A window started by a first request, or a sliding one: no
		// fixed window holds more than the window's length before x.
		return r.slidingLeft(acc)
	}
}

// surelyExhausted reports whether the accepted requests acc surely used
// the whole quota before the refusal x, for every arrival order: a
// sliding window's quota of them surely within the window's length
// before x, or a clock-aligned fixed window surely holding x and the
// quota of them. Buckets and windows started by a first request (whose
// start the evidence leaves open) are never sure here.
func (r *rule) surelyExhausted(acc []*obs, x *obs) bool {
	e := r.e
	q := e.Quota()
	switch {
	case e.IsBucket():
		return false
	case e.WindowType != Fixed:
		w := int64(e.Window)
		n := int64(0)
		for _, o := range acc {
			if o.iv.Hi <= x.iv.Lo && o.iv.Lo > x.iv.Hi-w {
				n++
			}
		}
		return n >= q
	case e.Align == limiter.AlignEpoch || e.Align == limiter.AlignTimer:
		for _, w := range r.wins {
			if !w.certainly(x.iv) {
				continue
			}
			n := int64(0)
			for _, o := range acc {
				if w.certainly(o.iv) && o.iv.Hi <= x.iv.Lo {
					n++
				}
			}
			if n >= q {
				return true
			}
		}
	}
	return false
}

// keyUntested returns the note for a per-client rule whose records show one
// identity only (the key-spoof probe's claimed addresses and the
// preflight, which carries no identity header, aside): a key that
// collapses every client into one quota (key-collapsed) cannot be told
// from a per-client one then. "" when the key is global or was tested.
func keyUntested(e *Endpoint, endpoint string, all []*obs) string {
	if !e.PerClient() {
		return ""
	}
	seen := map[string]bool{}
	for _, o := range all {
		if strings.HasPrefix(o.phase, CheckKeySpoof+"/") || o.phase == phasePreflight {
			continue
		}
		if seen[o.group] = true; len(seen) > 1 {
			return ""
		}
	}
	how := "let check vary the header (no fixed -H value for it; --clients 2 or more)"
	if e.Key == KeyIP {
		how = "give --source-ips two addresses or more"
	}
	return fmt.Sprintf("%s: the key (%s) was not tested: every request came from one identity, so a key that puts every client into one quota would pass; to test it, %s", endpoint, e.Key, how)
}

// phasePreflight is the phase of the request check and infer begin with
// (probe.PhasePreflight), sent with no identity header.
const phasePreflight = "preflight"
