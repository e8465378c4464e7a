package probe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// LoopStatEnv names the environment variable that makes the event loop
// report, when it ends, what the operating system's scheduler did to its
// thread (a diagnostic for pacing tails; scripts/bench-engine.sh sets it):
// the CPU time the thread ran, the time it waited runnable for a CPU, its
// timeslices and its involuntary context switches — a pacing error of a
// millisecond or more with as many involuntary switches is the scheduler
// preempting the loop, not the loop's own work.
const LoopStatEnv = "RLPROBE_LOOPSTAT"

// threadStat is a thread's scheduler statistics (Linux
// /proc/thread-self/schedstat and status).
type threadStat struct {
	cpu, runDelay time.Duration
	slices        int64
	involuntary   int64
}

// readThreadStat reads the calling thread's statistics; the caller has
// locked its goroutine to the thread. ok is false when /proc lacks them.
func readThreadStat() (st threadStat, ok bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return st, false
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return st, false
	}
	cpu, err1 := strconv.ParseInt(f[0], 10, 64)
	delay, err2 := strconv.ParseInt(f[1], 10, 64)
	slices, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return st, false
	}
	st = threadStat{cpu: time.Duration(cpu), runDelay: time.Duration(delay), slices: slices}
	if b, err := os.ReadFile("/proc/thread-self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				st.involuntary, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return st, true
}

// since returns the statistics accumulated from st0 to st.
func (st threadStat) since(st0 threadStat) threadStat {
	return threadStat{st.cpu - st0.cpu, st.runDelay - st0.runDelay, st.slices - st0.slices, st.involuntary - st0.involuntary}
}

// String is the one line LoopStatEnv prints.
func (st threadStat) String() string {
	return fmt.Sprintf("rlprobe: event loop thread: ran %s, waited runnable %s over %d timeslices, %d involuntary context switches",
		st.cpu.Round(time.Microsecond), st.runDelay.Round(time.Microsecond), st.slices, st.involuntary)
}

// loopStat starts the loop thread's report when LoopStatEnv is set: it
// returns the function that prints the statistics since (on the same
// thread), or a no-op.
func loopStat() func() {
	if os.Getenv(LoopStatEnv) == "" {
		return func() {}
	}
	st0, ok := readThreadStat()
	if !ok {
		return func() {}
	}
	return func() {
		if st, ok := readThreadStat(); ok {
			fmt.Fprintln(os.Stderr, st.since(st0))
		}
	}
}
