package probe

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestThreadStat: the loop's scheduler statistics come from its own
// thread and count what it ran: spinning on a locked thread moves its CPU
// time, and the report line says so.
func TestThreadStat(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st0, ok := readThreadStat()
	if !ok {
		t.Fatal("no /proc/thread-self/schedstat on Linux")
	}
	var st threadStat
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if st, _ = readThreadStat(); st.since(st0).cpu >= 5*time.Millisecond {
			break
		}
	}
	d := st.since(st0)
	// (A thread never descheduled meanwhile counts no new timeslice.)
	if d.cpu < 5*time.Millisecond || d.slices < 0 || d.runDelay < 0 || d.involuntary < 0 {
		t.Fatalf("after spinning: %v, want at least 5ms of CPU and no count going back", d)
	}
	if s := d.String(); !strings.Contains(s, "event loop thread: ran ") || !strings.Contains(s, "involuntary context switches") {
		t.Errorf("report line %q", s)
	}
}
