package headers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Field names, spelled as in [Captured].
const (
	fieldRetryAfter     = "Retry-After"
	fieldRateLimit      = "RateLimit"
	fieldPolicy         = "RateLimit-Policy"
	fieldPartition      = "RateLimit-Partition"
	fieldLimit6         = "RateLimit-Limit"
	fieldRemaining6     = "RateLimit-Remaining"
	fieldReset6         = "RateLimit-Reset"
	fieldXLimit         = "X-RateLimit-Limit"
	fieldXRemaining     = "X-RateLimit-Remaining"
	fieldXReset         = "X-RateLimit-Reset"
	fieldXUsed          = "X-RateLimit-Used"
	fieldXResource      = "X-RateLimit-Resource"
	fieldXAltLimit      = "X-Rate-Limit-Limit"
	fieldXAltRemaining  = "X-Rate-Limit-Remaining"
	fieldXAltReset      = "X-Rate-Limit-Reset"
	fieldCacheControl   = "Cache-Control"
	fieldExpires        = "Expires"
	fieldDate           = "Date"
	fieldEnvoyLimited   = "X-Envoy-Ratelimited"
	defaultPolicyName   = "default"
	maxSFInteger        = 999_999_999_999_999 // RFC 9651 §3.3.1: at most 15 digits
	epochSecondsAtLeast = 1_000_000_000       // X-RateLimit-Reset heuristic: epoch seconds from here
	epochMillisAtLeast  = 1_000_000_000_000   // … and epoch milliseconds from here
)

// Quota is what a server advertises for one policy at one response. The zero
// value is a policy named "default" with a quota of 0, no window, nothing
// remaining and nothing to wait for.
type Quota struct {
	// Policy is the policy name, the draft-8/-11/-12 item String. Bytes outside
	// printable ASCII are formatted as '?'; "" is formatted as "default".
	// Only draft-8 (and x-ratelimit with several quotas, as Envoy's name
	// parameter) carries it.
	Policy string
	// Limit is the quota: q in draft-8, the Integer item of draft-6/-7
	// RateLimit-Policy, limit in draft-7, RateLimit-Limit, X-RateLimit-Limit.
	Limit int64
	// Window is the policy window w, formatted in whole seconds rounded up.
	// A zero or negative window omits w in draft-8 and drops the policy from
	// draft-6/-7 RateLimit-Policy and Envoy lists, where w is required.
	Window time.Duration
	// Remaining is r / remaining: quota units left in the current window.
	Remaining int64
	// UntilMore is draft-8's t: the delay until additional quota is
	// available (0 when some is available now).
	UntilMore time.Duration
	// UntilFull is the delay until the quota is fully restored: reset in
	// draft-6/-7 and X-RateLimit-Reset.
	UntilFull time.Duration
	// Effective is the effective window of draft-11 (t) and draft-12 (w):
	// the time within which no more than Remaining is available — until
	// Remaining would grow.
	Effective time.Duration
	// Cost is draft-12's c, the quota units the request consumed; 0 omits
	// it.
	Cost int64
	// Unit is draft-8's qu (a registered quota unit such as
	// "content-bytes"); "" omits it, meaning "requests".
	Unit string
	// PartitionKey is draft-8's pk; nil omits it.
	PartitionKey []byte
}

// Set writes qs in dialect d into h, replacing the fields of d that h already
// holds under any spelling (dialects sharing field names, such as draft-7 and
// draft-8, overwrite each other; the last Set wins). Field names are written
// verbatim, as the drafts and vendors spell them ("RateLimit-Policy", not
// Go's canonical "Ratelimit-Policy"): read them back with [Values] or [Get],
// not http.Header.Get. With no quotas it only removes d's fields; None and
// unknown dialects leave h unchanged. now is the response time,
// needed for epoch resets. Durations are rounded up to whole seconds, so a
// client is never told to come back too early; negative values are formatted
// as 0 and Structured Field Integers are capped at 999,999,999,999,999.
//
// draft-8, draft-11 and draft-12 carry every quota: RateLimit's r and t
// are Remaining and UntilMore (draft-8), Remaining and Effective (draft-11);
// draft-12 writes a=Remaining, w=Effective and c=Cost when positive. draft-6, draft-7 and x-ratelimit carry one
// current state, that of the quota with the lowest Remaining (the first on a
// tie), as the drafts' "expiring limit"; their RateLimit-Policy lists every
// quota that has a Window (those drafts forbid two policies of the same
// quota; Set does not check). x-ratelimit with several quotas formats
// X-RateLimit-Limit in Envoy's form, "10, 10;w=1;name=\"a\", 1000;w=3600".
// The vendor dialects, which the reference server does not serve, are
// written for tests: github as x-ratelimit-epoch for the expiring quota,
// with X-RateLimit-Used (limit − remaining) and its Policy as
// X-RateLimit-Resource; openai with the quota whose Policy is "tokens" as
// the -tokens fields and the others as -requests (the first of each wins),
// UntilFull as the reset; shopify as "USED/SIZE" of the expiring quota.
// The delay reset of x-ratelimit is capped at 999,999,999 s so that it is
// never mistaken for a Unix time.
//
// Set is safe for concurrent use with distinct headers.
func Set(h http.Header, d Dialect, now time.Time, qs ...Quota) {
	for _, f := range dialectFields(d) {
		deleteField(h, f)
	}
	if len(qs) == 0 {
		return
	}
	pols, lims := fromQuotas(d, qs)
	writeFields(h, now, pols, lims)
}

// dialectFields lists the fields Set writes for d.
func dialectFields(d Dialect) []string {
	switch d {
	case Draft8, Draft7, Draft11, Draft12:
		return []string{fieldRateLimit, fieldPolicy}
	case Draft6:
		return []string{fieldLimit6, fieldRemaining6, fieldReset6, fieldPolicy}
	case XRateLimit, XRateLimitEpoch:
		return []string{fieldXLimit, fieldXRemaining, fieldXReset}
	case GitHub:
		return []string{fieldXLimit, fieldXRemaining, fieldXReset, fieldXUsed, fieldXResource}
	case OpenAI:
		var fs []string
		for _, q := range openAIQuotas {
			fs = append(fs, q.limit, q.remaining, q.reset)
		}
		return fs
	case Shopify:
		return []string{fieldShopify}
	}
	return nil
}

// deleteField removes name from h under any spelling of its key.
func deleteField(h http.Header, name string) {
	h.Del(name)
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

// fromQuotas converts qs into the policies and current limits dialect d
// carries. Durations stay exact; writeFields rounds them.
func fromQuotas(d Dialect, qs []Quota) ([]Policy, []Limit) {
	var pols []Policy
	var lims []Limit
	switch d {
	case Draft8, Draft11, Draft12:
		for _, q := range qs {
			name := q.Policy
			if name == "" {
				name = defaultPolicyName
			}
			pols = append(pols, Policy{Name: name, Quota: q.Limit, Window: q.Window, HasWindow: q.Window > 0,
				Unit: q.Unit, PartitionKey: q.PartitionKey, Dialect: d})
			l := Limit{Name: name, Remaining: q.Remaining, HasRemaining: true,
				Reset: q.UntilMore, HasReset: true, PartitionKey: q.PartitionKey, Dialect: d}
			if d.EffectiveWindow() {
				l.Reset = q.Effective
			}
			if d == Draft12 && q.Cost > 0 {
				l.Cost, l.HasCost = q.Cost, true
			}
			lims = append(lims, l)
		}
	case Draft6, Draft7, XRateLimit, XRateLimitEpoch:
		x := d == XRateLimit || d == XRateLimitEpoch
		if !x || len(qs) > 1 {
			for _, q := range qs {
				if q.Window <= 0 {
					continue
				}
				p := Policy{Quota: q.Limit, Window: q.Window, HasWindow: true, Dialect: d}
				if x {
					p.Name = q.Policy
				}
				pols = append(pols, p)
			}
		}
		e := qs[expiring(qs)]
		lims = append(lims, Limit{Limit: e.Limit, HasLimit: true, Remaining: e.Remaining, HasRemaining: true,
			Reset: e.UntilFull, HasReset: true, ResetIsEpoch: d == XRateLimitEpoch, Dialect: d})
	case GitHub:
		e := qs[expiring(qs)]
		lims = append(lims, Limit{Name: e.Policy, Limit: e.Limit, HasLimit: true, Remaining: e.Remaining, HasRemaining: true,
			Used: max(0, e.Limit-e.Remaining), HasUsed: true, Reset: e.UntilFull, HasReset: true, ResetIsEpoch: true, Dialect: d})
	case OpenAI:
		for _, q := range qs {
			name := "requests"
			if q.Policy == "tokens" {
				name = "tokens"
			}
			pols = append(pols, Policy{Name: name, Quota: q.Limit, Unit: openAIQuotaOf(name).unit, Dialect: d})
			lims = append(lims, Limit{Name: name, Remaining: q.Remaining, HasRemaining: true,
				Reset: q.UntilFull, HasReset: true, Dialect: d})
		}
	case Shopify:
		e := qs[expiring(qs)]
		lims = append(lims, Limit{Limit: e.Limit, HasLimit: true, Remaining: e.Remaining, HasRemaining: true, Dialect: d})
	}
	return pols, lims
}

// expiring returns the index of the quota with the lowest Remaining, the
// first on a tie.
func expiring(qs []Quota) int {
	best := 0
	for i, q := range qs {
		if q.Remaining < qs[best].Remaining {
			best = i
		}
	}
	return best
}

// writeFields formats pols and lims, each in its own Dialect, into h with
// Set semantics (one field line per field). Durations are rounded up to whole
// seconds; epoch resets are now + Reset. When several limits claim one field
// (two draft-7 dictionaries, two x-ratelimit triples) the first wins, and
// draft-8 items win RateLimit over a draft-7 dictionary.
func writeFields(h http.Header, now time.Time, pols []Policy, lims []Limit) {
	var policy httpsfv.List
	var xpols []Policy
	for _, p := range pols {
		switch p.Dialect {
		case Draft8, Draft11, Draft12:
			it := httpsfv.NewItem(sfString(p.Name))
			it.Params.Add("q", sfInt(p.Quota))
			if p.Unit != "" {
				it.Params.Add("qu", sfString(p.Unit))
			}
			if p.HasWindow {
				it.Params.Add("w", sfSeconds(p.Window))
			}
			if p.PartitionKey != nil {
				it.Params.Add("pk", p.PartitionKey)
			}
			policy = append(policy, it)
		case Draft6, Draft7:
			it := httpsfv.NewItem(sfInt(p.Quota))
			if p.HasWindow {
				it.Params.Add("w", sfSeconds(p.Window))
			}
			policy = append(policy, it)
		case XRateLimit, XRateLimitEpoch, GitHub:
			xpols = append(xpols, p)
		}
	}
	setSF(h, fieldPolicy, policy)

	var list httpsfv.List
	var dict *httpsfv.Dictionary
	var x *Limit
	var six bool
	for i, l := range lims {
		switch l.Dialect {
		case Draft8, Draft11, Draft12:
			avail, window := "r", "t"
			if l.Dialect == Draft12 {
				avail, window = "a", "w"
			}
			it := httpsfv.NewItem(sfString(l.Name))
			if l.HasRemaining {
				it.Params.Add(avail, sfInt(l.Remaining))
			}
			if l.HasReset {
				it.Params.Add(window, sfSeconds(l.Reset))
			}
			if l.HasCost {
				it.Params.Add("c", sfInt(l.Cost))
			}
			if l.PartitionKey != nil {
				it.Params.Add("pk", l.PartitionKey)
			}
			list = append(list, it)
		case Draft7:
			if dict != nil {
				continue
			}
			dict = httpsfv.NewDictionary()
			if l.HasLimit {
				dict.Add("limit", httpsfv.NewItem(sfInt(l.Limit)))
			}
			if l.HasRemaining {
				dict.Add("remaining", httpsfv.NewItem(sfInt(l.Remaining)))
			}
			if l.HasReset {
				dict.Add("reset", httpsfv.NewItem(sfSeconds(l.Reset)))
			}
		case Draft6:
			if six {
				continue
			}
			six = true
			if l.HasLimit {
				setField(h, fieldLimit6, strconv.FormatInt(sfInt(l.Limit), 10))
			}
			if l.HasRemaining {
				setField(h, fieldRemaining6, strconv.FormatInt(sfInt(l.Remaining), 10))
			}
			if l.HasReset {
				setField(h, fieldReset6, strconv.FormatInt(sfSeconds(l.Reset), 10))
			}
		case XRateLimit, XRateLimitEpoch, GitHub:
			if x == nil {
				x = &lims[i]
			}
		}
	}
	switch {
	case len(list) > 0:
		setSF(h, fieldRateLimit, list)
	case dict != nil && len(dict.Names()) > 0:
		setSF(h, fieldRateLimit, dict)
	}
	if x != nil || len(xpols) > 0 {
		writeX(h, now, x, xpols)
	}
	writeOpenAI(h, pols, lims)
	writeShopify(h, lims)
}

// writeX formats the legacy triple. x may be nil when only Envoy policies
// are known.
func writeX(h http.Header, now time.Time, x *Limit, pols []Policy) {
	if len(pols) == 0 {
		if x.HasLimit {
			setField(h, fieldXLimit, strconv.FormatInt(max(0, x.Limit), 10))
		}
	} else {
		var l httpsfv.List
		if x != nil && x.HasLimit {
			l = append(l, httpsfv.NewItem(sfInt(x.Limit)))
		}
		for _, p := range pols {
			it := httpsfv.NewItem(sfInt(p.Quota))
			if p.HasWindow {
				it.Params.Add("w", sfSeconds(p.Window))
			}
			if p.Name != "" {
				it.Params.Add("name", sfString(p.Name))
			}
			l = append(l, it)
		}
		setSF(h, fieldXLimit, l)
	}
	if x == nil {
		return
	}
	if x.HasRemaining {
		setField(h, fieldXRemaining, strconv.FormatInt(max(0, x.Remaining), 10))
	}
	if x.HasReset {
		var v int64
		if x.ResetIsEpoch {
			v = ceilUnix(now.Add(max(0, x.Reset)))
		} else {
			v = min(ceilSeconds(x.Reset), epochSecondsAtLeast-1)
		}
		setField(h, fieldXReset, strconv.FormatInt(v, 10))
	}
	if x.Name != "" {
		setField(h, fieldXResource, x.Name)
	}
	if x.HasUsed {
		setField(h, fieldXUsed, strconv.FormatInt(max(0, x.Used), 10))
	}
}

// setSF marshals v into field name; an empty list is not written. Marshal
// cannot fail on the sanitised values built here; if it ever did, the field
// is left out rather than written malformed.
func setSF(h http.Header, name string, v httpsfv.StructuredFieldValue) {
	if l, ok := v.(httpsfv.List); ok && len(l) == 0 {
		return
	}
	s, err := httpsfv.Marshal(v)
	if err != nil {
		return
	}
	setField(h, name, s)
}

// sfInt clamps n into the non-negative Structured Field Integer range.
func sfInt(n int64) int64 {
	return min(max(n, 0), maxSFInteger)
}

// sfSeconds is d in whole seconds, rounded up, as an sfInt.
func sfSeconds(d time.Duration) int64 {
	return sfInt(ceilSeconds(d))
}

// sfString replaces the bytes a Structured Field String cannot hold
// (outside printable ASCII) by '?'.
func sfString(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] < 0x20 || b[j] > 0x7e {
					b[j] = '?'
				}
			}
			return string(b)
		}
	}
	return s
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// ceilUnix is t as Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 {
		s++
	}
	return s
}

// secondsDuration converts whole seconds to a Duration, saturating instead
// of overflowing.
func secondsDuration(n int64) time.Duration {
	const maxSeconds = int64(1<<63-1) / int64(time.Second)
	switch {
	case n > maxSeconds:
		return time.Duration(1<<63 - 1)
	case n < -maxSeconds:
		return time.Duration(-1 << 63)
	}
	return time.Duration(n) * time.Second
}
