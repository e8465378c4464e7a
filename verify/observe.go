package verify

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// class is how a result counts under a rule.
type class int

const (
	classAccepted class = iota // 2xx
	classRejected              // the declared reject status, else 429 or 503
	classOther                 // any other status
	classFailed                // no HTTP answer
	classNotSent               // never sent
)

// obs is one result as the verifier sees it: arrival bounds on the
// reference clock, class, check, parsed headers.
type obs struct {
	res   *record.Result
	ref   string
	iv    Interval
	recv  int64 // receipt of the response on the reference clock (TTFB, else Done), 0 if none
	u     int64 // the agent's clock uncertainty
	class class
	// mismatch: a rejection whose status is not the declared one.
	mismatch bool
	check    string // the check of the result's phase, "" if none
	phase    string
	group    string // the quota key the result belongs to under the rule
	cached   bool   // Age > 0: a cache hit, its rate-limit fields ignored
	ph       headers.Parsed
	start    time.Time // the run's start, for absolute times
}

// checkOf maps a phase ("race", "key-spoof/X-Forwarded-For", "burst") to
// its check name, "" when it is not one.
func checkOf(phase string) string {
	name, _, _ := strings.Cut(phase, "/")
	if slices.Contains(Checks, name) {
		return name
	}
	return ""
}

// arrival returns r's server arrival bounds: the echo when the server sent
// one; else [Wrote, TTFB] (falling back to Sent/Sched and Done), widened by
// the agent's clock uncertainty u.
func arrival(r *record.Result, u int64) Interval {
	if r.Arrival != nil {
		return Interval{*r.Arrival, *r.Arrival}
	}
	lo, hi := ClientBounds(r)
	return Interval{lo - u, hi + u}
}

// ClientBounds returns the bounds of r's server arrival that the client's
// own stamps give, in ns since the record's start: from the last byte
// written (Wrote, else Sent, else Sched) to the first byte of the answer
// (TTFB, else Done), never inverted.
func ClientBounds(r *record.Result) (lo, hi int64) {
	lo = r.Wrote
	if lo == 0 {
		lo = r.Sent
	}
	if lo == 0 {
		lo = r.Sched
	}
	hi = r.TTFB
	if hi == 0 {
		hi = r.Done
	}
	return lo, max(hi, lo)
}

// observe turns the merged results that fall under rule e into
// observations.
func observe(m *record.Merged, e *Endpoint) []*obs {
	var out []*obs
	for i := range m.Results {
		r := &m.Results[i]
		if !e.covers(r) {
			continue
		}
		o := &obs{res: r, ref: record.Ref(*r), u: m.Uncertainty[r.Agent], phase: r.Phase, check: checkOf(r.Phase), start: m.Start}
		o.iv = arrival(r, o.u)
		o.recv = r.TTFB
		if o.recv == 0 {
			o.recv = r.Done
		}
		switch {
		case r.Outcome == record.OutcomeNotSent:
			o.class = classNotSent
		case r.Outcome != record.OutcomeResponse:
			o.class = classFailed
		case r.Status >= 200 && r.Status <= 299:
			o.class = classAccepted
		case slices.Contains(e.RejectStatuses(), r.Status):
			o.class = classRejected
		case r.Status == http.StatusTooManyRequests || r.Status == http.StatusServiceUnavailable:
			o.class, o.mismatch = classRejected, true
		default:
			o.class = classOther
		}
		if o.class == classAccepted || o.class == classRejected || o.class == classOther {
			if o.cached = isCacheHit(r.Headers); o.cached {
				// A cache hit never reached the limiter: it counts as
				// neither accepted nor rejected, and its rate-limit
				// fields are ignored.
				o.class = classOther
			} else {
				o.ph = headers.Parse(r.Headers, m.Start.Add(time.Duration(o.recv)))
			}
		}
		o.group = groupOf(r, e)
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	return out
}

// isCacheHit reports a positive Age (RFC 9111 §5.1).
func isCacheHit(h http.Header) bool {
	v := strings.TrimSpace(h.Get("Age"))
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n > 0
}

// covers reports whether the rule applies to r.
func (e *Endpoint) covers(r *record.Result) bool {
	if e.Method != "" && !strings.EqualFold(e.Method, r.Method) {
		return false
	}
	if e.Path != "" && urlPath(r.URL) != e.Path {
		return false
	}
	return true
}

func urlPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

// groupOf returns the quota key of r under e: "" for a global key, the
// source IP for ip, the client identity for header keys.
func groupOf(r *record.Result, e *Endpoint) string {
	switch {
	case e.Key == "" || e.Key == KeyGlobal:
		return ""
	case e.Key == KeyIP:
		if host, _, err := net.SplitHostPort(r.Src); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				return a.Unmap().String()
			}
		}
		if a, err := netip.ParseAddr(r.Client); err == nil {
			return a.Unmap().String()
		}
		return ""
	}
	return r.Client
}

func ivsOf(os []*obs) []Interval {
	out := make([]Interval, len(os))
	for i, o := range os {
		out[i] = o.iv
	}
	return out
}

func filter(os []*obs, keep func(*obs) bool) []*obs {
	var out []*obs
	for _, o := range os {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

func refsOf(os []*obs) []string {
	out := make([]string, 0, min(len(os), MaxRefs))
	for _, o := range os {
		if len(out) == MaxRefs {
			break
		}
		out = append(out, o.ref)
	}
	return out
}

func pick(os []*obs, idx []int) []*obs {
	out := make([]*obs, len(idx))
	for i, k := range idx {
		out[i] = os[k]
	}
	return out
}

// limitsFor returns a response's current states that belong to rule e:
// those with e's name, e's quota as limit, or a policy of e's quota; when
// nothing names a quota, all of them.
func limitsFor(ph *headers.Parsed, e *Endpoint) []headers.Limit {
	var named, all []headers.Limit
	for _, l := range ph.Limits {
		if !l.HasRemaining {
			continue
		}
		all = append(all, l)
		switch {
		case e.Name != "" && l.Name == e.Name:
			named = append(named, l)
		case l.HasLimit && l.Limit == e.Quota():
			named = append(named, l)
		case !l.HasLimit && slices.ContainsFunc(ph.Policies, func(p headers.Policy) bool { return p.Name == l.Name && p.Quota == e.Quota() }):
			named = append(named, l)
		}
	}
	if len(named) > 0 {
		return named
	}
	if len(all) > 0 && allSame(all) {
		return all
	}
	// Several states that disagree and none is e's: a multi-policy server
	// whose policy for e cannot be told apart; when every state advertises
	// a limit, none is e's.
	return nil
}

// limitFor picks the state of rule e on a response (see limitsFor).
func limitFor(ph *headers.Parsed, e *Endpoint) (headers.Limit, bool) {
	ls := limitsFor(ph, e)
	if len(ls) == 0 {
		return headers.Limit{}, false
	}
	return ls[0], true
}

func allSame(ls []headers.Limit) bool {
	for _, l := range ls[1:] {
		if l.Remaining != ls[0].Remaining {
			return false
		}
	}
	return true
}
