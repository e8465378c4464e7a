package scenario

import (
	"math/rand/v2"
	"testing"
)

// TestSoundSeeds: the factor levels fit their bits, every case's seed
// decodes to the case, and the covering array covers every pair.
func TestSoundSeeds(t *testing.T) {
	prod := 1
	for _, n := range factorSizes() {
		prod *= n
	}
	if prod > 1<<seedLevelBits {
		t.Fatalf("factor levels need %d codes, seedLevelBits holds %d", prod, 1<<seedLevelBits)
	}
	cases := soundCaseList(soundRounds(soundCases), 8)
	honest := 0
	for _, c := range cases {
		d, err := decodeCase(c.seed)
		if err != nil || d.String() != c.String() {
			t.Errorf("seed %d: decodes to %v (%v), want %v", c.seed, d, err, c)
		}
		if c.fault == 0 {
			honest++
		}
	}
	if honest < soundCases {
		t.Errorf("%d honest cases, want at least %d", honest, soundCases)
	}
	sizes := factorSizes()
	rows := allPairs(sizes, rand.New(rand.NewPCG(7, 7)))
	for f := range sizes {
		for g := f + 1; g < len(sizes); g++ {
			for l := range sizes[f] {
				for m := range sizes[g] {
					found := false
					for _, r := range rows {
						if r[f] == l && r[g] == m {
							found = true
							break
						}
					}
					if !found {
						t.Errorf("pair %s=%d %s=%d not covered", soundFactors[f].name, l, soundFactors[g].name, m)
					}
				}
			}
		}
	}
	t.Logf("%d cases (%d honest); %d rows per covering array", len(cases), honest, len(rows))
}
