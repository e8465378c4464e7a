package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// suggested reads the fixes a refusal suggests from its message, as a user
// reads them: the message ends with "; use --a 1 or --b 2" or
// "; add --x" (session.Suggestion writes them).
func suggested(t *testing.T, stderr string) [][]string {
	t.Helper()
	line := strings.TrimSpace(stderr)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	i := max(strings.LastIndex(line, "; use "), strings.LastIndex(line, "; add "))
	if i < 0 {
		t.Fatalf("the refusal suggests nothing: %q", stderr)
	}
	var fixes [][]string
	for _, alt := range strings.Split(line[i+len("; use "):], " or ") {
		f := strings.Fields(alt)
		if len(f) == 0 || len(f) > 2 || !strings.HasPrefix(f[0], "--") {
			t.Fatalf("suggestion %q is not a flag and its value: %q", alt, stderr)
		}
		fixes = append(fixes, f)
	}
	return fixes
}

// TestSuggestionsWork: each command line is refused with exit 2 and
// suggestions; each suggestion, appended to the refused command line
// alone, makes it pass (exit 0). In-process against the reference server
// on the in-memory listener, inside a synctest bubble.
func TestSuggestionsWork(t *testing.T) {
	bucket20 := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 20, Capacity: 20}, Dialects: []headers.Dialect{headers.Draft8}}
	fixed10 := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: 10 * time.Second}, Dialects: []headers.Dialect{headers.Draft8}}
	perKey := testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: 10 * time.Second},
		Key: "header:X-Api-Key", Dialects: []headers.Dialect{headers.None}}
	blocked := perKey
	blocked.Limiter.Penalty = limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 20 * time.Second}
	for _, tc := range []struct {
		name   string
		policy testserver.Policy
		args   []string // after the command and the URL
		fixes  int
	}{
		{"watch: 1% of a 20/s bucket every 1s", bucket20, []string{"--rate", "20/s", "--capacity", "20", "--budget", "1%", "--every", "1s"}, 2},
		{"watch: ten cycles share one request of 10 per 10s", fixed10, []string{"--limit", "10", "--window", "10s", "--window-type", "fixed", "--budget", "10%", "--every", "1s"}, 2},
		{"watch: exhausting needs a whole period", perKey, []string{"--limit", "10", "--window", "10s", "--window-type", "fixed", "--key", "header:X-Api-Key", "--budget", "20%", "--every", "5s"}, 1},
		{"watch: exhausting waits out a declared block", blocked, []string{"--limit", "10", "--window", "10s", "--window-type", "fixed", "--key", "header:X-Api-Key",
			"--penalty", "block:20s", "--budget", "20%", "--every", "10s"}, 1},
		{"run: an unsafe method", bucket20, []string{"-X", "POST", "--pattern", "burst", "--count", "3"}, 1},
		{"run: --out exists", bucket20, []string{"--pattern", "burst", "--count", "3", "--out", "exists"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := strings.Fields(tc.name)[0]
			cmd = strings.TrimSuffix(cmd, ":")
			args := append([]string{cmd, memURL}, tc.args...)
			if cmd == "watch" {
				args = append(args, "--once", "--dir", dir)
			}
			for i, a := range args {
				if a == "exists" {
					args[i] = filepath.Join(dir, "exists.jsonl")
					if err := os.WriteFile(args[i], []byte("keep?\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if cmd == "run" && !slices.Contains(args, "--out") {
				args = append(args, "--out", filepath.Join(dir, "r.jsonl"))
			}
			code, _, stderr := memCLI(t, tc.policy, slices.Clone(args)...)
			if code != ExitUsage {
				t.Fatalf("exit %d, want 2\n%s", code, stderr)
			}
			fixes := suggested(t, stderr)
			if len(fixes) != tc.fixes {
				t.Errorf("%d suggestions, want %d: %q", len(fixes), tc.fixes, stderr)
			}
			for _, fix := range fixes {
				fixed := append(slices.Clone(args), fix...)
				if i := slices.Index(fixed, "--dir"); i >= 0 {
					fixed[i+1] = t.TempDir()
				}
				if code, _, stderr := memCLI(t, tc.policy, fixed...); code != ExitOK {
					t.Errorf("with %v: exit %d, want 0\n%s", fix, code, stderr)
				}
			}
		})
	}
}
