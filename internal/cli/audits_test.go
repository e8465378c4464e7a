package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// TestHeaderAuditsRealSockets: for every header audit of servers in the
// wild, `check` over loopback sockets against the reference server with
// the audit's fault raises the audit's id, and against the same server
// without the fault (the honest one) raises no finding of that id, of any
// certainty. Windows of 2 s and 4 s and checks limited to those the audit
// needs keep each run to a few seconds; all run in parallel.
func TestHeaderAuditsRealSockets(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	if testing.Short() {
		t.Skip("real sockets, ~20 s")
	}
	slog := func(n int64, w time.Duration) limiter.Config {
		return limiter.Config{Algorithm: limiter.SlidingLog, Limit: n, Window: w}
	}
	fw := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 4 * time.Second, Align: limiter.AlignEpoch}
	fw2 := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 5, Window: 2 * time.Second, Align: limiter.AlignEpoch}
	faults := func(f ...testserver.Fault) []testserver.Fault { return f }
	d := func(ds ...headers.Dialect) []headers.Dialect { return ds }
	sliding2 := []string{"--limit", "5", "--window", "2s"}
	sliding4 := []string{"--limit", "5", "--window", "4s"}
	fixed4 := []string{"--limit", "5", "--window", "4s", "--window-type", "fixed", "--align", "epoch"}
	fixed2 := []string{"--limit", "5", "--window", "2s", "--window-type", "fixed", "--align", "epoch"}
	rows := []struct {
		name    string
		id      string
		faulty  testserver.Policy
		honest  testserver.Policy
		args    []string
		message string // a word the finding's message must hold; "" none
	}{
		{"retry-after-ms", verify.IDRetryAfterImplausible,
			testserver.Policy{Limiter: slog(5, 2*time.Second), Faults: faults(testserver.FaultRetryAfterMs)},
			testserver.Policy{Limiter: slog(5, 2*time.Second)}, append(sliding2, "--only", "burst,recovery"), "milliseconds"},
		{"retry-after-unix", verify.IDRetryAfterImplausible,
			testserver.Policy{Limiter: slog(5, 2*time.Second), Faults: faults(testserver.FaultRetryAfterUnix)},
			testserver.Policy{Limiter: slog(5, 2*time.Second)}, append(sliding2, "--only", "burst,recovery"), "Unix time"},
		{"retry-after-zero", verify.IDRetryAfterEarly,
			testserver.Policy{Limiter: slog(5, 4*time.Second), Faults: faults(testserver.FaultRetryAfterZero)},
			testserver.Policy{Limiter: slog(5, 4*time.Second)}, append(sliding4, "--only", "retry-after"), ""},
		{"retry-after-window", verify.IDRetryAfterConstant,
			testserver.Policy{Limiter: fw, Faults: faults(testserver.FaultRetryAfterWindow)},
			testserver.Policy{Limiter: fw}, append(fixed4, "--only", "burst,sustained"), "window length"},
		{"retry-after-on-success", verify.IDRetryAfterOnSuccess,
			testserver.Policy{Limiter: slog(5, 2*time.Second), Faults: faults(testserver.FaultRetryAfterOnSuccess)},
			testserver.Policy{Limiter: slog(5, 2*time.Second)}, append(sliding2, "--only", "burst"), ""},
		{"draft-11 early Retry-After", verify.IDRetryAfterBeforeWindow,
			testserver.Policy{Limiter: slog(5, 4*time.Second), Dialects: d(headers.Draft11), RetryAfter: testserver.RetryEarly},
			testserver.Policy{Limiter: slog(5, 4*time.Second), Dialects: d(headers.Draft11)},
			append(sliding4, "--headers", "draft-11", "--only", "burst,retry-after"), "effective window"},
		{"remaining-off-by-one", verify.IDRateLimitHeaderInconsistent,
			testserver.Policy{Limiter: fw2, Faults: faults(testserver.FaultRemainingOffByOne)},
			testserver.Policy{Limiter: fw2}, append(fixed2, "--only", "burst"), ""},
		{"remaining-random", verify.IDRateLimitHeaderInconsistent,
			testserver.Policy{Limiter: fw2, Faults: faults(testserver.FaultRemainingRandom)},
			testserver.Policy{Limiter: fw2}, append(fixed2, "--only", "burst,recovery"), ""},
		{"reset-epoch", verify.IDRateLimitHeaderMalformed,
			testserver.Policy{Limiter: slog(5, 2*time.Second), Faults: faults(testserver.FaultResetEpoch)},
			testserver.Policy{Limiter: slog(5, 2*time.Second)}, append(sliding2, "--only", "burst"), "Unix time"},
		{"reset-delta", verify.IDRateLimitHeaderMalformed,
			testserver.Policy{Limiter: slog(5, 2*time.Second), Dialects: d(headers.XRateLimitEpoch), Faults: faults(testserver.FaultResetDelta)},
			testserver.Policy{Limiter: slog(5, 2*time.Second), Dialects: d(headers.XRateLimitEpoch)},
			append(sliding2, "--headers", "x-ratelimit-epoch", "--only", "burst"), "Unix time"},
		{"advertise-rate", verify.IDRateLimitPolicyMismatch,
			testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 5}, Faults: faults(testserver.FaultAdvertiseRate)},
			testserver.Policy{Limiter: limiter.Config{Algorithm: limiter.TokenBucket, Rate: 2, Capacity: 5}},
			[]string{"--rate", "2/s", "--capacity", "5", "--only", "burst"}, "rate"},
	}
	for _, row := range rows {
		for _, faulty := range []bool{true, false} {
			name := row.name + "/honest"
			p := row.honest
			if faulty {
				name, p = row.name+"/fault", row.faulty
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// An epoch-aligned server echoes arrivals, which place
				// its clock to a round trip: from Date alone its edges
				// are known to the estimate's ±3–50 ms, and the
				// recovery's polls, which hug an edge, judge nothing
				// certain there (TestCheckOnTheServersClockSockets runs
				// on Date alone).
				url := startServerWith(t, testserver.HandlerOptions{EchoArrival: p.Limiter.Align == limiter.AlignEpoch}, p)
				args := append([]string{"check", url, "--json", "-q", "--out", filepath.Join(t.TempDir(), "r.jsonl")}, row.args...)
				_, rep, errOut := runCheckJSON(t, args...)
				i := slices.IndexFunc(rep.Findings, func(f verify.Finding) bool { return f.ID == row.id })
				switch {
				case faulty && i < 0:
					t.Errorf("no %s; findings:%s\n%s", row.id, findingList(rep), errOut)
				case faulty && !strings.Contains(rep.Findings[i].Message, row.message):
					t.Errorf("%s says %q, want %q in it", row.id, rep.Findings[i].Message, row.message)
				case !faulty && i >= 0:
					t.Errorf("the honest server raised %s:%s", row.id, findingList(rep))
				}
			})
		}
	}
}

func findingList(rep verify.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("\n  " + string(f.Severity) + " " + string(f.Certainty) + " " + f.ID + ": " + f.Message)
	}
	return b.String()
}
