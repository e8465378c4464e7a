package verify

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A paced series as a deployment answers it: n requests 10 ms apart from
// at (ms), each answered in 1 ms; accepted[i] says whether request i was
// admitted, remaining[i] (when remaining is not nil) what it advertised;
// newConns gives each request a connection of its own.
type paced struct {
	phase     string
	at        float64
	accepted  []bool
	remaining []int
	newConns  bool
	gap       float64 // ms between sends; 0 means 10
	rtt       float64 // ms; 0 means 1
	slow      int     // a request (index + 1; 0: none) answered in 15 ms, after the next was sent
}

func (p paced) add(b *runBuilder) {
	gap, rtt := p.gap, p.rtt
	if gap == 0 {
		gap = 10
	}
	if rtt == 0 {
		rtt = 1
	}
	for i, ok := range p.accepted {
		status := 429
		if ok {
			status = 200
		}
		var hdr []string
		if p.remaining != nil {
			hdr = []string{fmt.Sprintf(`RateLimit: "default";r=%d;t=1`, p.remaining[i]), `RateLimit-Policy: "default";q=3;w=1`}
			if !ok {
				hdr = append(hdr, "Retry-After: 1")
			}
		}
		at := p.at + float64(i)*gap
		took := rtt
		if i+1 == p.slow {
			took = 15
		}
		r := b.add(at, at+took, status, hdr...)
		r.Phase, r.Src = p.phase, "127.0.0.1:40000"
		if p.newConns {
			r.Src = fmt.Sprintf("127.0.0.1:%d", 41000+i)
		}
	}
}

// admitted returns n results, the first k accepted.
func admitted(k, n int) []bool {
	out := make([]bool, n)
	for i := range k {
		out[i] = true
	}
	return out
}

// raceBatch adds n racers released together at at (ms), k accepted.
func raceBatch(b *runBuilder, at float64, k, n int) {
	for i := range n {
		status := 429
		if i < k {
			status = 200
		}
		r := b.add(at, at+2, status)
		r.Phase, r.Src = CheckRace, fmt.Sprintf("127.0.0.1:%d", 42000+i)
	}
}

// TestPerInstanceLimit: paced series that do not overlap, on new
// connections and on one kept-alive connection, tell K instances each
// enforcing the policy (per-instance-limit, certain, in place of the count
// and race findings) from a racy shared counter (race-over-admission
// stays), a limit higher than declared (possible beside the count) and an
// honest single limiter (nothing).
func TestPerInstanceLimit(t *testing.T) {
	e := Endpoint{Limit: 3, Window: time.Second, Headers: []string{"none"}}
	hdr := e
	hdr.Headers = []string{"draft-8"}
	one := func(k int) paced { return paced{phase: PhaseOneConn, at: 0, accepted: admitted(k, 8)} }
	fresh := func(k int) paced {
		return paced{phase: PhaseNewConns, at: 2000, accepted: admitted(k, 8), newConns: true}
	}
	ids := []string{IDPerInstanceLimit, IDRaceOverAdmission, IDWindowLimitExceeded, IDRateLimitHeaderInconsistent}
	for _, tt := range []struct {
		name   string
		e      Endpoint
		series []paced
		race   [2]int // accepted, released (0: no race)
		want   map[string]Certainty
	}{
		{"two instances by connection: 6 on new connections, 3 on one", e, []paced{one(3), fresh(6)}, [2]int{6, 8},
			map[string]Certainty{IDPerInstanceLimit: Certain}},
		{"three instances by connection: new connections admitted whole", e, []paced{one(3), fresh(8)}, [2]int{8, 8},
			map[string]Certainty{IDPerInstanceLimit: Certain}},
		{"two instances by request: remaining values in two countdowns", hdr, []paced{
			{phase: PhaseOneConn, accepted: admitted(6, 8), remaining: []int{2, 2, 1, 1, 0, 0, 0, 0}},
			{phase: PhaseNewConns, at: 2000, accepted: admitted(6, 8), remaining: []int{2, 2, 1, 1, 0, 0, 0, 0}, newConns: true}},
			[2]int{6, 8}, map[string]Certainty{IDPerInstanceLimit: Certain}},
		{"by request without headers: a limit of 6 explains it as well", e, []paced{
			{phase: PhaseOneConn, accepted: admitted(6, 8)}, {phase: PhaseNewConns, at: 2000, accepted: admitted(6, 8), newConns: true}},
			[2]int{0, 0}, map[string]Certainty{IDPerInstanceLimit: Possible, IDWindowLimitExceeded: Certain}},
		{"a limit of 6 with honest remaining values: one countdown", hdr, []paced{
			{phase: PhaseOneConn, accepted: admitted(6, 8), remaining: []int{5, 4, 3, 2, 1, 0, 0, 0}}},
			[2]int{0, 0}, map[string]Certainty{IDPerInstanceLimit: Possible, IDWindowLimitExceeded: Certain}},
		// One fixed window of 3 whose edge fell within the series counts
		// one countdown and then another: that is no evidence of two
		// instances (they would interleave), and the excess is the count's.
		{"one limiter, a window edge within: one countdown after another", hdr, []paced{
			{phase: PhaseOneConn, accepted: admitted(6, 8), remaining: []int{2, 1, 0, 2, 1, 0, 0, 0}}},
			[2]int{0, 0}, map[string]Certainty{IDPerInstanceLimit: Possible, IDWindowLimitExceeded: Certain}},
		{"one instance, racy counter: the race stays", e, []paced{one(3), fresh(3)}, [2]int{6, 8},
			map[string]Certainty{IDRaceOverAdmission: Certain}},
		{"one instance or a shared store, honest", e, []paced{one(3), fresh(3)}, [2]int{3, 8}, map[string]Certainty{}},
		{"overlapping requests on new connections: no pacing, no verdict on instances", e, []paced{one(3),
			{phase: PhaseNewConns, at: 2000, accepted: admitted(6, 8), newConns: true, rtt: 30}},
			[2]int{0, 0}, map[string]Certainty{IDWindowLimitExceeded: Certain}},
		// A loaded machine answers one request late: the pair it
		// overlaps could have raced for one admission, and 6 − 1 still
		// exceeds 3; with 4 admitted, 4 − 1 does not.
		{"one slow answer on new connections: the excess beyond a race is still instances", e, []paced{one(3),
			{phase: PhaseNewConns, at: 2000, accepted: admitted(6, 8), newConns: true, slow: 3}},
			[2]int{6, 8}, map[string]Certainty{IDPerInstanceLimit: Certain}},
		{"one slow answer on new connections: an excess of one is the race's", e, []paced{one(3),
			{phase: PhaseNewConns, at: 2000, accepted: admitted(4, 8), newConns: true, slow: 3}},
			[2]int{0, 0}, map[string]Certainty{IDWindowLimitExceeded: Certain}},
		{"a race alone cannot tell a race from instances", e, nil, [2]int{6, 8},
			map[string]Certainty{IDRaceOverAdmission: Possible}},
		{"new connections that shared one: nothing shows one limiter per route", e, []paced{one(3),
			{phase: PhaseNewConns, at: 2000, accepted: admitted(3, 8)}}, [2]int{6, 8},
			map[string]Certainty{IDRaceOverAdmission: Possible}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newRun("a1", 0)
			for _, s := range tt.series {
				s.add(b)
			}
			if tt.race[1] > 0 {
				raceBatch(b, 4000, tt.race[0], tt.race[1])
			}
			rep := analyze(t, tt.e, Options{}, b)
			got := map[string]Certainty{}
			for _, f := range rep.Findings {
				if slices.Contains(ids, f.ID) && got[f.ID] != Certain {
					got[f.ID] = f.Certainty
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("findings %v, want %v:%s", got, tt.want, describeFindings(rep))
			}
			for id, c := range tt.want {
				if got[id] != c {
					t.Errorf("%s %s, want %s:%s", id, got[id], c, describeFindings(rep))
				}
			}
		})
	}
}

// TestPerInstanceEvidence: the finding counts the accepted requests per
// connection, the series on new connections one each, the one connection
// its quota.
func TestPerInstanceEvidence(t *testing.T) {
	b := newRun("a1", 0)
	paced{phase: PhaseOneConn, accepted: admitted(3, 8)}.add(b)
	paced{phase: PhaseNewConns, at: 2000, accepted: admitted(6, 8), newConns: true}.add(b)
	rep := analyze(t, Endpoint{Limit: 3, Window: time.Second, Headers: []string{"none"}}, Options{}, b)
	for _, f := range rep.Findings {
		if f.ID != IDPerInstanceLimit {
			continue
		}
		ev := f.Evidence
		if f.Check != CheckBurst || ev.BySrc["127.0.0.1:40000"] != 3 || ev.BySrc["127.0.0.1:41000"] != 1 || ev.BySrc["127.0.0.1:41007"] != 0 || len(ev.BySrc) != 9 {
			t.Errorf("check %s, by src %v", f.Check, ev.BySrc)
		}
		if ev.Count != 6 || ev.Bound == nil || *ev.Bound != 3 {
			t.Errorf("count %d bound %v, want 6 of 3", ev.Count, ev.Bound)
		}
		return
	}
	t.Errorf("no per-instance-limit:%s", describeFindings(rep))
}

// TestInterleavedCountdowns: K instances answering in turn count their
// remaining values down interleaved (a value repeats, or falls back to one
// countdown after another's value); one limiter whose window started
// afresh counts one down and then another, which is one at a time.
func TestInterleavedCountdowns(t *testing.T) {
	for _, tt := range []struct {
		name string
		vs   []int64
		top  int64
		want int
	}{
		{"one honest countdown", []int64{4, 3, 2, 1, 0}, 4, 1},
		{"two instances in turn", []int64{2, 2, 1, 1, 0, 0}, 2, 2},
		{"three instances, out of turn", []int64{2, 2, 1, 2, 1, 0, 1, 0, 0}, 2, 3},
		{"four instances of 2, every one answered once more", []int64{1, 1, 1, 1, 0, 0, 0, 0}, 1, 4},
		{"four instances of 2, cut short", []int64{1, 1, 1, 1, 0, 0}, 1, 4},
		{"one limiter, an edge after three", []int64{2, 1, 0, 2, 1, 0}, 2, 1},
		{"one limiter, two edges", []int64{2, 1, 2, 2, 1, 0}, 2, 1},
		{"one limiter, an edge after one", []int64{2, 2, 1, 0}, 2, 1},
		{"a limit of one: nothing interleaves", []int64{0, 0, 0}, 0, 1},
		{"a value out of place", []int64{2, 0}, 2, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := interleavedCountdowns(tt.vs, tt.top); got != tt.want {
				t.Errorf("interleavedCountdowns(%v, %d) = %d, want %d", tt.vs, tt.top, got, tt.want)
			}
		})
	}
}
