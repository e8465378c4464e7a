package scenario

import "math/rand/v2"

// allPairs returns rows of levels, one per factor (sizes[f] levels for
// factor f), such that every pair of levels of every two factors appears
// in some row: an all-pairs (strength 2) covering array. It is built
// greedily, AETG style: each row starts from the first pair still
// uncovered and fills the other factors, in an order drawn from rng, with
// the level that covers the most new pairs; of several candidate rows the
// best is kept. The result depends only on sizes and rng's state.
func allPairs(sizes []int, rng *rand.Rand) [][]int {
	n := len(sizes)
	// need[f][g][l*sizes[g]+m], f < g: the pair (f=l, g=m) is uncovered.
	need := make([][][]bool, n)
	left := 0
	for f := range n {
		need[f] = make([][]bool, n)
		for g := f + 1; g < n; g++ {
			need[f][g] = make([]bool, sizes[f]*sizes[g])
			for i := range need[f][g] {
				need[f][g][i] = true
			}
			left += sizes[f] * sizes[g]
		}
	}
	uncovered := func(f, l, g, m int) bool {
		if f > g {
			f, l, g, m = g, m, f, l
		}
		return need[f][g][l*sizes[g]+m]
	}
	gain := func(row []int) int {
		k := 0
		for f := range n {
			for g := f + 1; g < n; g++ {
				if row[f] >= 0 && row[g] >= 0 && need[f][g][row[f]*sizes[g]+row[g]] {
					k++
				}
			}
		}
		return k
	}
	var rows [][]int
	for left > 0 {
		// The first uncovered pair, in a fixed order.
		var f0, l0, g0, m0 int
	find:
		for f := range n {
			for g := f + 1; g < n; g++ {
				for i, v := range need[f][g] {
					if v {
						f0, l0, g0, m0 = f, i/sizes[g], g, i%sizes[g]
						break find
					}
				}
			}
		}
		var best []int
		bestGain := -1
		for range 16 {
			row := make([]int, n)
			for i := range row {
				row[i] = -1
			}
			row[f0], row[g0] = l0, m0
			for _, f := range rng.Perm(n) {
				if row[f] >= 0 {
					continue
				}
				bestL, bestK := 0, -1
				for _, l := range rng.Perm(sizes[f]) {
					k := 0
					for g := range n {
						if g != f && row[g] >= 0 && uncovered(f, l, g, row[g]) {
							k++
						}
					}
					if k > bestK {
						bestL, bestK = l, k
					}
				}
				row[f] = bestL
			}
			if k := gain(row); k > bestGain {
				best, bestGain = row, k
			}
		}
		for f := range n {
			for g := f + 1; g < n; g++ {
				if i := best[f]*sizes[g] + best[g]; need[f][g][i] {
					need[f][g][i] = false
					left--
				}
			}
		}
		rows = append(rows, best)
	}
	return rows
}
