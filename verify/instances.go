package verify

import (
	"fmt"
	"math"
	"slices"

	"github.com/rlprobe/rlprobe/record"
)

// The deployment family's other bug: a limit enforced per instance behind
// a balancer, so that K instances admit K times the policy. Its evidence
// is two paced series of the check suite (suiteprobes.go): requests each
// on a new connection (PhaseNewConns) and requests on one kept-alive
// connection (PhaseOneConn). Neither overlaps itself, so no
// check-then-increment race can explain an excess in it.

// The phases of the paced series (check burst).
const (
	// PhaseNewConns: paced requests of one client, each on a new
	// connection (Send.Conn 2, 3, …).
	PhaseNewConns = CheckBurst + "/new-conns"
	// PhaseOneConn: paced requests of one client on one kept-alive
	// connection (Send.Conn 1).
	PhaseOneConn = CheckBurst + "/one-conn"
)

// series is one paced series as the verifier sees it.
type series struct {
	g     string // the quota key
	phase string
	os    []*obs // the requests that reached the limiter (accepted or rejected), by Lo
	acc   []*obs
	rej   int
	// sequential: each request surely arrived after the one before was
	// answered (by time alone: decision numbers are per instance).
	sequential bool
	// raced is the most a check-then-increment race among the requests
	// that overlap can have admitted beyond a serial decision: for each
	// run of requests chained by overlap, its length − 1 (0 when
	// sequential). A slow answer on a loaded machine makes one run of two.
	raced int
	// srcs counts the distinct connections (record src) that carried it.
	srcs int
	ex   seriesExcess
}

// seriesExcess is how far a series' acceptances exceed the policy.
type seriesExcess struct {
	certain, possible bool  // more accepted than the bound, for every / some arrival order
	count             int   // accepted requests counted against the bound (the certain set, else the possible one)
	bound             int64 // what the policy allows them
	ev                []*obs
}

// seriesOf returns the series of phase among t's requests, nil when none
// reached the limiter.
func (r *rule) seriesOf(t *traffic, phase string) *series {
	s := &series{phase: phase, sequential: true}
	srcs := map[string]bool{}
	var runHi int64 // the latest answer of the run of overlapping requests so far
	for _, o := range t.os {
		if o.phase != phase || !o.class.Counts() {
			continue
		}
		if len(s.os) > 0 && o.iv.Lo <= runHi {
			s.sequential = false
			s.raced++
		} else {
			runHi = o.iv.Hi
		}
		runHi = max(runHi, o.iv.Hi)
		s.os = append(s.os, o)
		srcs[o.res.Src] = true
		switch o.class {
		case record.ClassAccepted:
			s.acc = append(s.acc, o)
		case record.ClassRejected:
			s.rej++
		}
	}
	if len(s.os) == 0 {
		return nil
	}
	s.srcs = len(srcs)
	s.ex = r.seriesExcess(t, s.acc)
	return s
}

// newConns reports whether every request of s had a connection of its
// own (two requests at least).
func (s *series) newConns() bool { return s != nil && len(s.os) >= 2 && s.srcs == len(s.os) }

// oneConn reports whether one connection carried all of s.
func (s *series) oneConn() bool { return s != nil && len(s.os) >= 2 && s.srcs == 1 }

// withinQuota reports whether s was refused and admitted no more than
// the policy allows for any arrival order.
func (s *series) withinQuota() bool { return s != nil && s.rej > 0 && !s.ex.possible }

// seriesExcess counts acc (a series' acceptances) against the policy:
// the most in one window (fixed windows: the group's), or a bucket's
// capacity + rate·span over any span. Windows started by a first request
// under a declared penalty are never certain here (a refusal restarts
// them where the evidence cannot say).
func (r *rule) seriesExcess(t *traffic, acc []*obs) seriesExcess {
	e := r.e
	if len(acc) == 0 {
		return seriesExcess{}
	}
	iv := ivsOf(acc)
	if e.IsBucket() {
		capF := float64(e.Capacity) + msRefill(e.Rate) + 1e-6
		c, p := MaxBucketExcess(iv, e.Rate, 0)
		ex := seriesExcess{certain: c.Excess > capF, possible: p.Excess > capF}
		s := c
		if !ex.certain {
			s = p
		}
		ex.count, ex.bound, ex.ev = s.Count, s.Bound(e.Capacity, e.Rate), pick(acc, s.Members)
		return ex
	}
	var c, p Span
	if e.WindowType == Fixed {
		c, p = MaxInFixedWindows(iv, r.windowsFor(t))
		if e.firstRequest() && !e.Penalty.IsZero() {
			c = Span{}
		}
	} else {
		c, p = MaxInWindow(iv, int64(e.Window))
	}
	n := int(e.Limit)
	ex := seriesExcess{certain: c.Count > n, possible: p.Count > n, bound: e.Limit}
	s := c
	if !ex.certain {
		s = p
	}
	ex.count, ex.ev = s.Count, pick(acc, s.Members)
	return ex
}

// countdowns returns into how many interleaved countdowns the remaining
// values of s's acceptances split (interleavedCountdowns), each starting
// at the declared limit − 1 and falling by one, in the order they were
// answered: K instances of the declared window each count their own share
// down. 0 when the values do not split so (a value missing or out of
// place) or when s is not sequential; 1 is one honest countdown, or one
// after another (one limiter's window started afresh). Buckets, whose
// remaining values also refill, are not read so.
func (r *rule) countdowns(s *series) int {
	if s == nil || !s.sequential || r.e.IsBucket() || len(s.acc) == 0 {
		return 0
	}
	vs := make([]int64, 0, len(s.acc))
	for _, o := range s.acc {
		l, ok := limitFor(&o.ph, r.e)
		if !ok || o.cached {
			return 0
		}
		vs = append(vs, l.Remaining)
	}
	return interleavedCountdowns(vs, r.e.Limit-1)
}

// Countdowns splits remaining values vs, in the order they were answered,
// into countdowns that each start at top and fall by one (a value joins
// the countdown whose last value is one more, else starts a new one at
// top): what K limiter instances, each counting its own share of the
// requests down from a whole quota, advertise. It returns each
// countdown's last value, one countdown per instance, or nil when the
// values do not split so (a value that neither continues a countdown nor
// is top). One honest limiter is one countdown.
func Countdowns(vs []int64, top int64) []int64 {
	var last []int64
	for _, v := range vs {
		if k := slices.Index(last, v+1); k >= 0 {
			last[k] = v
			continue
		}
		if v != top {
			return nil
		}
		last = append(last, v)
	}
	return last
}

// interleavedCountdowns returns into how many countdowns vs split
// (Countdowns) when two of them went on at once: some value is neither
// top nor one less than the value before it, as K instances answering in
// turn show from their (K+2)-th answer on. One limiter whose window
// started afresh within the values counts one countdown down and then
// another (every value top or one less than the one before): 1. 0 when
// the values do not split.
func interleavedCountdowns(vs []int64, top int64) int {
	last := Countdowns(vs, top)
	for i := 1; i < len(vs) && len(last) >= 2; i++ {
		if vs[i] != top && vs[i] != vs[i-1]-1 {
			return len(last)
		}
	}
	return min(len(last), 1)
}

// instances is what the paced series say about the deployment, over
// every quota key of the rule.
type instances struct {
	// finding is the per-instance-limit finding ("" ID: none).
	finding Finding
	// certain: K instances each enforcing the policy surely explain the
	// excess; kMax bounds K from above (0: no bound, the series was
	// admitted whole).
	certain bool
	kMax    int64
	// oneRoute: a series on new connections was refused within the
	// quota — one limiter decided every connection route it took.
	oneRoute bool
}

// perInstance judges the paced series of every group (see instances).
// Per-instance-limit is certain when a series certainly exceeds the
// policy by more than a race among its overlapping requests could have
// admitted (series.raced: none in a sequential series) and either (by
// connection) the new-connections series exceeded it while a
// one-connection series was refused within it, or (whatever the balancing) the series' remaining values split
// into K ≥ 2 countdowns of the declared limit (a sequential series: the
// order of answers must be the order of decisions); such an excess
// without either is possible (a limit higher than declared explains it
// as well, and the count findings stay). The series may come from
// different quota keys (fresh identities): the deployment is the rule's.
func (r *rule) perInstance(groups map[string][]*obs, names []string) instances {
	var in instances
	var ncs, ocs []*series
	for _, g := range names {
		t := r.traffic(g, groups[g])
		if s := r.seriesOf(t, PhaseNewConns); s != nil {
			s.g = g
			ncs = append(ncs, s)
			in.oneRoute = in.oneRoute || s.newConns() && s.sequential && s.withinQuota()
		}
		if s := r.seriesOf(t, PhaseOneConn); s != nil {
			s.g = g
			ocs = append(ocs, s)
		}
	}
	// The one-connection series that shows the limit per route.
	var oc *series
	for _, s := range ocs {
		if s.sequential && s.oneConn() && s.withinQuota() {
			oc = s
			break
		}
	}
	for _, s := range append(slices.Clone(ncs), ocs...) {
		// What a race among overlapping requests may have admitted is
		// no evidence of instances.
		if !s.ex.certain || int64(s.ex.count-s.raced) <= s.ex.bound {
			continue
		}
		byConn := s.phase == PhaseNewConns && s.newConns() && oc != nil
		k := r.countdowns(s)
		f := r.instancesOf(s, oc, byConn, k)
		if in.finding.ID == "" || f.certain && !in.certain {
			in.finding, in.certain, in.kMax = f.finding, f.certain, f.kMax
		}
	}
	return in
}

// instancesOf returns the finding of over, a sequential series whose
// acceptances certainly exceed the policy: by connection against oc, by
// k ≥ 2 countdowns, else possible.
func (r *rule) instancesOf(over, oc *series, byConn bool, k int) instances {
	in := instances{certain: byConn || k >= 2}
	a := int64(len(over.acc))
	per := max(1, over.ex.bound)
	kLo := max(2, (a-int64(over.raced)+per-1)/per) // what a race may have admitted counts for no instance
	if over.rej > 0 {
		in.kMax = max(kLo, a/max(1, r.e.Quota())) + 1
	}
	var how string
	switch {
	case byConn:
		how = fmt.Sprintf("%d paced requests each on a new connection (%s) had %d accepted, while %d on one kept-alive connection had %d accepted and the rest refused: the limit holds per connection route, as at least %d instances behind a balancer that keeps each connection on one instance would enforce it",
			len(over.os), overlapText(over), a, len(oc.os), len(oc.acc), kLo)
	case k >= 2:
		how = fmt.Sprintf("%d paced requests, none overlapping another, had %d accepted, and their remaining values count down from %d in %d interleaved sequences: %d instances each enforce the policy",
			len(over.os), a, r.e.Limit-1, k, k)
	default:
		how = fmt.Sprintf("%d paced requests, %s, had %d accepted; no race explains that, but nothing tells several instances each enforcing the policy from one limit higher than declared",
			len(over.os), overlapText(over), a)
	}
	c := Possible
	if in.certain {
		c = Certain
	}
	ev := slices.Clone(over.os)
	if byConn {
		ev = append(ev, oc.os...)
	}
	in.finding = r.finding(IDPerInstanceLimit, c, over.g, ev, Finding{
		Message: fmt.Sprintf("%s (the policy allows %d)", how, over.ex.bound),
		Evidence: Evidence{Count: over.ex.count, Bound: bound(over.ex.bound), Refs: refsOf(ev), BySrc: acceptedBySrc(ev),
			Headers: over.acc[len(over.acc)-1].res.Headers},
	})
	return in
}

// overlapText says how much of s overlaps, for messages.
func overlapText(s *series) string {
	if s.raced == 0 {
		return "none overlapping another"
	}
	return fmt.Sprintf("%d of them sent before an earlier one was answered (a race among those admits at most %d more)", s.raced, s.raced)
}

// acceptedBySrc counts the accepted requests of os per connection (record
// src), every connection of os listed.
func acceptedBySrc(os []*obs) map[string]int {
	out := map[string]int{}
	for _, o := range os {
		n := out[o.res.Src]
		if o.class == record.ClassAccepted {
			n++
		}
		out[o.res.Src] = n
	}
	return out
}

// instanceExplained lists the findings a certain per-instance-limit takes
// the place of, when their count is within what its instances admit.
var instanceExplained = []string{IDWindowLimitExceeded, IDBurstLimitExceeded, IDRateLimitExceeded, IDNoLimitingObserved, IDRaceOverAdmission}

// absorb returns fs without the findings a certain per-instance-limit
// explains: a count at most kMax times its bound (every count when kMax
// is 0), and every ratelimit-header-inconsistent (each instance
// advertises its own state, and the probe cannot tell which answered).
func (in *instances) absorb(fs []Finding) []Finding {
	if in == nil || !in.certain {
		return fs
	}
	return slices.DeleteFunc(fs, func(f Finding) bool {
		if f.ID == IDRateLimitHeaderInconsistent {
			return true
		}
		if !slices.Contains(instanceExplained, f.ID) {
			return false
		}
		return in.kMax == 0 || f.Evidence.Bound == nil || int64(f.Evidence.Count) <= satMul(in.kMax, *f.Evidence.Bound)
	})
}

// satMul is a·b, saturated at MaxInt64.
func satMul(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
