package cli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/internal/testenv"
)

// TestSelftestQuick runs the built binary's `rlprobe selftest --quick`, as a
// user does: a handful of cases over loopback sockets, every one right, with
// the table and the confusion matrix on stdout.
func TestSelftestQuick(t *testing.T) {
	t.Parallel() // long, real time and mostly waiting: it overlaps the other long ones
	if testing.Short() {
		t.Skip("real-time inference over sockets")
	}
	cmd := exec.Command(testenv.BuildRlprobe(t), "selftest", "--quick")
	testenv.DieWithTest(cmd)
	cmd.Dir = t.TempDir()
	var outBuf, errBuf strings.Builder
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	err := cmd.Run()
	stdout, stderr := outBuf.String(), errBuf.String()
	if err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, stdout, stderr)
	}
	quick := 0
	for _, c := range scenario.SelftestCases() {
		if c.Quick {
			quick++
			if !strings.Contains(stdout, c.Name) {
				t.Errorf("the table lacks case %s", c.Name)
			}
		}
	}
	for _, w := range []string{"confusion matrix", "served \\ inferred", "leaky-bucket-queue   0   0    0   0    1     0", "right"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	if !strings.Contains(stdout, fmt.Sprintf("%d of %d cases right: pass", quick, quick)) || !strings.Contains(stderr, "loopback sockets") {
		t.Errorf("want %d of %d right over loopback sockets:\n%s\n%s", quick, quick, stdout, stderr)
	}
}

// TestSelftestMissExits1: one wrong answer makes the selftest fail with
// exit 1, and the JSON document says which case missed and how.
func TestSelftestMissExits1(t *testing.T) {
	hook := func(f *Factory) {
		f.Selftest = func(o *scenario.SelftestOptions) {
			o.Cases = []scenario.SelftestCase{{Name: "none-wanted-as-token-bucket", Want: scenario.SelftestWant{Family: infer.TokenBucket}}}
		}
	}
	code, stdout, stderr := runCLIWith(t, hook, "selftest", "--json")
	if code != ExitFindings || !strings.Contains(stderr, "1 of 1 cases missed") {
		t.Errorf("exit %d, stderr %q; want 1 and the count of misses", code, stderr)
	}
	var doc scenario.SelftestDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not a document: %v\n%s", err, stdout)
	}
	if doc.Schema != "rlprobe.selftest/v1" || doc.Pass || len(doc.Cases) != 1 || doc.Cases[0].Right ||
		len(doc.Cases[0].Problems) != 1 || doc.Cases[0].Problems[0] != "family none, want token-bucket" ||
		doc.Matrix[3][5] != 1 || doc.Families[3] != "token-bucket" {
		t.Errorf("document %s", stdout)
	}
	// The text form shows the miss in the table and the matrix.
	code, stdout, _ = runCLIWith(t, hook, "selftest", "-q")
	if code != ExitFindings || !strings.Contains(stdout, "MISS: family none, want token-bucket") || !strings.Contains(stdout, "0 of 1 cases right: FAIL") {
		t.Errorf("text: exit %d\n%s", code, stdout)
	}
}
