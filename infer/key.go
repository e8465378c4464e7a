package infer

import (
	"time"

	"github.com/rlprobe/rlprobe/patterns"
)

// The key test's gap after the exhausting burst: beyond the cluster gap
// (so the two are ordered), and soon enough that a global key has not
// recovered.
const (
	minKeyTestGap = 3 * time.Millisecond
	maxKeyTestGap = 50 * time.Millisecond
)

// addKeyTest appends, with several identities, two requests of the second
// identity shortly after an exhausting burst of the first: under a global
// key they are refused like the burst's last requests, under a key per
// client they are admitted.
func (s *prober) addKeyTest(sends *[]patterns.Send, after time.Duration) {
	if s.opts.Clients < 2 {
		return
	}
	gap := min(max(after, minKeyTestGap), maxKeyTestGap)
	// Paced, the burst lasts len·pace: the key test follows its end.
	gap += time.Duration(len(*sends)) * s.pace
	for range 2 {
		*sends = append(*sends, patterns.Send{At: gap, Client: 1, Phase: "key"})
	}
	s.keySent = true
}

// decideKey lets the models decide the key test: sp is fitted with one
// global state and with a state per client, and the better fit decides.
// When the best of each keying miss equally (a family that recovers fast
// enough to admit the second identity's requests under a global key fits
// as well as the truth with a key per client), each variant is compared
// with itself: a keying at least as good for every variant and better for
// one decides (see keyVerdict). Otherwise (the test could not tell: the
// first identity was not exhausted, say) the key stays unknown and the
// global fit is kept.
func (s *prober) decideKey(sp space) *fit {
	o := s.observe()
	sp.perClient = s.perClient
	f := search(o, sp)
	if !s.keySent || s.keyTested {
		return f
	}
	sp.perClient = true
	g := search(o, sp)
	fw, okf := f.winner()
	gw, okg := g.winner()
	trace("key test: global %v misses %d, per client %v misses %d", fw.h, fw.miss, gw.h, gw.miss)
	if !okf || !okg {
		return f
	}
	if decided, perClient := keyVerdict(f, g); decided {
		s.keyTested, s.perClient = true, perClient
		if perClient {
			return g
		}
	}
	return f
}

// keyVerdict compares a fit with a global key (f) and with a key per
// client (g): the keying whose winner misses fewer outcomes wins; on a tie,
// the keying that makes no variant miss more and some variant miss fewer
// (each variant's best against its own best under the other keying, over
// the variants either fit kept: a variant one keying dropped as far
// behind does worse under it). decided is false when neither holds.
func keyVerdict(f, g *fit) (decided, perClient bool) {
	fw, _ := f.winner()
	gw, _ := g.winner()
	switch {
	case gw.miss < fw.miss:
		return true, true
	case fw.miss < gw.miss:
		return true, false
	}
	better, worse := 0, 0
	for _, v := range allVariants {
		a, okf := f.best[v]
		b, okg := g.best[v]
		switch {
		case okf && okg && b.miss < a.miss, !okf && okg:
			better++
		case okf && okg && b.miss > a.miss, okf && !okg:
			worse++
		}
	}
	switch {
	case better > 0 && worse == 0:
		return true, true
	case worse > 0 && better == 0:
		return true, false
	}
	return false, false
}
