package verify

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/record"
)

// obs is one result as the verifier sees it: arrival bounds on the
// reference clock, class, check, parsed headers.
type obs struct {
	res   *record.Result
	ref   string
	iv    Interval
	recv  int64 // receipt of the response on the reference clock (TTFB, else Done), 0 if none
	u     int64 // the agent's clock uncertainty
	class record.Class
	// mismatch: a rejection whose status is not the declared one.
	mismatch bool
	check    string // the check of the result's phase, "" if none
	phase    string
	group    string // the quota key the result belongs to under the rule
	cached   bool   // Age > 0: a cache hit, its rate-limit fields ignored
	ph       headers.Parsed
	// raSlack is how much longer than the server meant ph.RetryAfter may
	// be (ns): headers.DateSlack for an HTTP-date read against the
	// response's Date, 0 for delay-seconds (see parseAnswer).
	raSlack int64
	start   time.Time // the run's start, for absolute times
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

// arrival returns the bounds of the server's decision on r, widened by the
// agent's clock uncertainty u: the client's own bounds (ClientBounds); an
// arrival echo raises the lower bound to the echoed arrival and leaves the
// upper one alone — a server stamps arrival before its limiter decides.
func arrival(r *record.Result, u int64) Interval {
	lo, hi := DecisionBounds(r, u)
	return Interval{lo, hi}
}

// DecisionBounds returns the bounds of the server's decision on r in ns
// since the record's start on the reference clock, given the agent's clock
// uncertainty u: [ClientBounds lo − u, ClientBounds hi + u], the lower
// bound replaced by the arrival echo when the server sent one (the echo is
// on the reference clock already; record.Merge puts a lone run's on its
// agent's). The decision lies in [echo, TTFB]: the echo marks arrival, not
// the decision. An echo later than hi + echoSlack is on a clock the
// records do not place (a server whose clock is off, and no estimate of
// it): it is ignored, and the client's bounds stand.
func DecisionBounds(r *record.Result, u int64) (lo, hi int64) {
	lo, hi = ClientBounds(r)
	lo, hi = lo-u, hi+u
	if r.Arrival != nil && *r.Arrival <= hi+echoSlack {
		lo = *r.Arrival
		hi = max(hi, lo)
	}
	return lo, hi
}

// echoSlack is how far past the first byte of its answer an arrival echo
// may read and still be used: the two clocks' readings of one moment
// (the server's receive stamp and the client's) differ by a few
// microseconds on one machine.
const echoSlack = int64(time.Millisecond)

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
		o.class, o.mismatch = record.Classify(*r, e.Status)
		if r.Outcome == record.OutcomeResponse {
			// A cache hit never reached the limiter: Classify makes it
			// other, and its rate-limit fields are ignored.
			if o.cached = record.IsCacheHit(r.Headers); !o.cached {
				o.ph, o.raSlack = parseAnswer(r.Headers, m.Start.Add(time.Duration(o.recv)))
			}
		}
		o.group = groupOf(r, e)
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b *obs) int { return cmpInt64(a.iv.Lo, b.iv.Lo) })
	return out
}

// parseAnswer reads an answer's rate-limit fields received at the given
// moment, its absolute times (a Retry-After HTTP-date, an epoch or date
// reset) against the server's own clock, its Date header
// (headers.ServerNow): a skew between the server's clock and the client's
// must not make an honest date look early or late. It returns how much
// longer than meant the Retry-After may then read (headers.DateSlack for
// a date, 0 for delay-seconds). Without a Date, those times name moments
// on a clock the client cannot place: they are dropped (Retry-After nil,
// an epoch reset unset), and judged by nothing.
func parseAnswer(h http.Header, received time.Time) (headers.Parsed, int64) {
	now, dated := headers.ServerNow(h, received)
	ph := headers.Parse(h, now)
	var slack int64
	if ph.RetryAfter != nil && !headers.IsDelaySeconds(headers.Get(h, "Retry-After")) {
		if !dated {
			ph.RetryAfter = nil
		}
		slack = int64(headers.DateSlack)
	}
	if !dated {
		for i := range ph.Limits {
			if ph.Limits[i].ResetIsEpoch {
				ph.Limits[i].HasReset, ph.Limits[i].Reset = false, 0
			}
		}
	}
	return ph, slack
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
