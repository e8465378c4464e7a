package verify

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlprobe/rlprobe/record"
)

// The race and key-spoof family: batches released together
// (race-over-admission) and one address claiming others
// (key-spoofable), each judged against the most quota that can have been
// available. Both are certain only when the group's traffic proves that a
// limit exists (a rejection, or an advertised remaining value): without
// that, a probe whose requests were all admitted may meet no limit at all.

// batches returns the synchronised releases among os with the given
// check: results of one agent, phase and scheduled time, at least two.
func batches(os []*obs, check string) [][]*obs {
	type key struct {
		agent, phase string
		sched        int64
	}
	m := map[key][]*obs{}
	var keys []key
	for _, o := range os {
		if o.check != check || o.class == record.ClassNotSent {
			continue
		}
		k := key{o.res.Agent, o.phase, o.res.Sched}
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
		m[k] = append(m[k], o)
	}
	var out [][]*obs
	for _, k := range keys {
		if len(m[k]) >= 2 {
			out = append(out, m[k])
		}
	}
	return out
}

// span returns the least Lo and the largest Hi of os (MaxInt64 and
// MinInt64 when os is empty).
func span(os []*obs) (int64, int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, o := range os {
		lo, hi = min(lo, o.iv.Lo), max(hi, o.iv.Hi)
	}
	return lo, hi
}

// overAdmitted returns the accepted requests of set, its span and the most
// quota that can have been available to it, and whether more were
// accepted than that.
func (r *rule) overAdmitted(t *traffic, set []*obs) (a []*obs, lo, hi, avail int64, over bool) {
	in := map[*obs]bool{}
	for _, o := range set {
		in[o] = true
	}
	a = filter(set, func(o *obs) bool { return o.class == record.ClassAccepted })
	lo, hi = span(set)
	// A spoofed request outside the set may have counted against another
	// quota: it is not subtracted.
	prior := filter(t.acc, func(o *obs) bool { return !in[o] && !slices.Contains(t.spoofed, o) })
	wins := r.wins
	if r.sp != nil {
		// The count starts afresh after each refusal: the set must lie in
		// one stretch (with known windows), and only that stretch's
		// acceptances count before it.
		s := r.sp.sameStretch(a)
		if s == nil || r.e.firstRequest() && !s.clean() {
			return a, lo, hi, int64(len(a)), false
		}
		prior = r.sp.inStretch(prior, s)
		if r.e.firstRequest() {
			wins = s.wins
		}
	}
	avail = r.availMax(lo, hi, prior, wins)
	return a, lo, hi, avail, int64(len(a)) > avail
}

// limitCertainty is Certain when the group's traffic proves that a limit
// exists, else Possible.
func (t *traffic) limitCertainty() Certainty {
	if t.limited {
		return Certain
	}
	return Possible
}

// race raises race-over-admission for each batch of the race check that
// had more accepted than the quota available at its release. It is
// certain only when a limit surely exists and a paced series on new
// connections was refused within the quota (instances.oneRoute): a batch
// goes out on a connection per request, and instances that each enforce
// the whole quota behind a balancer admit as much with no race at all.
func (r *rule) race(t *traffic) []Finding {
	var out []Finding
	for _, b := range batches(t.os, CheckRace) {
		a, lo, hi, avail, over := r.overAdmitted(t, b)
		if !over {
			continue
		}
		msg := fmt.Sprintf("a batch of %d requests released together had %d accepted, but at most %d were available", len(b), len(a), avail)
		c := t.limitCertainty()
		switch {
		case !t.limited:
			msg += "; nothing rejected or advertised proves a limit, so it may also be no limiting at all"
		case !r.inst.oneRoute:
			msg += "; nothing shows one limiter deciding every connection (paced requests on new connections refused within the quota), so instances that each enforce the whole quota may explain it as well"
			c = Possible
		}
		out = append(out, r.finding(IDRaceOverAdmission, c, t.g, a, Finding{
			Message: msg,
			Evidence: Evidence{StartNS: lo, EndNS: hi, Count: len(a), Bound: bound(avail), Refs: refsOf(b),
				Headers: a[len(a)-1].res.Headers},
		}))
	}
	return out
}

// keySpoof judges the key-spoof check's requests under a per-IP policy:
// each phase "key-spoof/HEADER" varies one header from one IP. As the
// race, it is certain only with one limiter per connection route shown
// (instances.oneRoute): the spoofed requests go out on new connections.
func (r *rule) keySpoof(t *traffic) []Finding {
	if r.e.Key != KeyIP {
		return nil
	}
	phases := map[string][]*obs{}
	var names []string
	for _, o := range t.spoofed {
		if _, ok := phases[o.phase]; !ok {
			names = append(names, o.phase)
		}
		phases[o.phase] = append(phases[o.phase], o)
	}
	var out []Finding
	for _, ph := range names {
		set := phases[ph]
		a, lo, hi, avail, over := r.overAdmitted(t, set)
		if !over {
			continue
		}
		_, hdr, _ := strings.Cut(ph, "/")
		msg := fmt.Sprintf("%d of %d requests from %s with a different %s each were accepted, but that address had at most %d left", len(a), len(set), cmp(t.g, "one address"), hdr, avail)
		c := t.limitCertainty()
		if c == Certain && !r.inst.oneRoute {
			msg += "; nothing shows one limiter deciding every connection (paced requests on new connections refused within the quota), and the spoofed requests came on connections of their own, which instances that each enforce the whole quota admit as well"
			c = Possible
		}
		out = append(out, r.finding(IDKeySpoofable, c, t.g, a, Finding{
			Message: msg,
			Evidence: Evidence{StartNS: lo, EndNS: hi, Count: len(a), Bound: bound(avail), Refs: refsOf(set),
				Headers: a[0].res.Headers},
		}))
	}
	return out
}
