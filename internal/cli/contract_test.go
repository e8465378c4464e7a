package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limitconf"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// contractText reads docs/contract.md, the project's contract.
func contractText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "contract.md"))
	if err != nil {
		t.Fatalf("the contract: %v", err)
	}
	return string(b)
}

// codeSpans returns the backquoted names of s in order, first occurrence
// only, leaving out what stands in parentheses ("`a`, `b` (like `c`)" →
// a, b).
func codeSpans(s string) []string {
	paren := regexp.MustCompile(`\([^()]*\)`)
	for paren.MatchString(s) {
		s = paren.ReplaceAllString(s, "")
	}
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(s, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// namesRow returns the names in the values cell of the contract's Names
// table row whose list cell is list.
func namesRow(t *testing.T, doc, list string) []string {
	t.Helper()
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) >= 4 && strings.TrimSpace(cells[1]) == list {
			return codeSpans(strings.Join(cells[2:len(cells)-1], "|"))
		}
	}
	t.Fatalf("the contract's Names table has no row %q", list)
	return nil
}

// tableIDs returns the first cell's backquoted names of every row of the
// table that follows the line starting with heading.
func tableIDs(t *testing.T, doc, heading string) []string {
	t.Helper()
	i := strings.Index(doc, heading)
	if i < 0 {
		t.Fatalf("the contract has no %q", heading)
	}
	var out []string
	inTable := false
	for _, line := range strings.Split(doc[i:], "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(line, "|")
		out = append(out, codeSpans(cells[1])...)
	}
	return out
}

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// TestContractNames: every list of names the contract fixes is the code's
// list, in the same order, and the other way round.
func TestContractNames(t *testing.T) {
	doc := contractText(t)
	for _, c := range []struct {
		what     string
		contract []string
		code     []string
	}{
		{"server algorithm", namesRow(t, doc, "server algorithm (`serve --algorithm`)"), strs(limiter.Algorithms)},
		{"server penalty", namesRow(t, doc, "server penalty (`serve --penalty`)"), strs(limiter.PenaltyKinds)},
		{"server refill", namesRow(t, doc, "server refill (`serve --refill`, token-bucket and gcra)"), strs(limiter.Refills)},
		{"server fault", namesRow(t, doc, "server fault (`serve --fault`)"), strs(testserver.Faults)},
		{"inferred family", namesRow(t, doc, "inferred family (`infer`)"), infer.FamilyNames()},
		{"header dialect", namesRow(t, doc, "header dialect"), strs(headers.Dialects)},
		{"race mode", namesRow(t, doc, "race mode"), strs(patterns.RaceModes)},
		{"check names", namesRow(t, doc, "check names (`--only`, `--skip`, JUnit)"), verify.Checks},
		{"finding ids", tableIDs(t, doc, "## Findings"), verify.FindingIDs},
		{"lint ids", append([]string{verify.IDConfigNotEnforced}, tableIDs(t, doc, "**Lint-only findings**")...), limitconf.LintIDs},
	} {
		if !slices.Equal(c.contract, c.code) {
			t.Errorf("%s:\ncontract %v\ncode     %v", c.what, c.contract, c.code)
		}
	}
}
