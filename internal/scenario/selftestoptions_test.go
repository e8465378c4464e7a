package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
)

// TestSelftestOptionsDefaults: Parallel 0 means three cases at once in
// memory and two over sockets; Describe names the transport.
func TestSelftestOptionsDefaults(t *testing.T) {
	tests := []struct {
		opt      SelftestOptions
		par      int
		describe string
	}{
		{SelftestOptions{}, DefaultSelftestParallel, "reference server × every family → infer (in-memory connections, real time)"},
		{SelftestOptions{Sockets: true, Quick: true}, DefaultSelftestSocketsParallel, "reference server × every family → infer (loopback sockets, real time)"},
		{SelftestOptions{Sockets: true, Parallel: 4}, 4, "(loopback sockets, real time)"},
		{SelftestOptions{Parallel: 2}, 2, "(in-memory connections, real time)"},
		{SelftestOptions{Parallel: -1}, DefaultSelftestParallel, "in-memory"},
	}
	for _, tc := range tests {
		if got := tc.opt.parallel(); got != tc.par {
			t.Errorf("%+v: parallel %d, want %d", tc.opt, got, tc.par)
		}
		if got := tc.opt.Describe(); !strings.Contains(got, tc.describe) {
			t.Errorf("%+v: Describe %q, want %q", tc.opt, got, tc.describe)
		}
	}
}

// TestSelftestRowString: the progress line of a right case, of a wrong
// answer and of a case that could not run, its duration rounded.
func TestSelftestRowString(t *testing.T) {
	c := SelftestCase{Name: "gcra-10/s"}
	tests := []struct {
		row  SelftestRow
		want string
	}{
		{SelftestRow{Case: c, Got: &infer.Inference{}, Duration: 1234 * time.Millisecond}, "gcra-10/s: right (1.2s)"},
		{SelftestRow{Case: c, Got: &infer.Inference{}, Problems: []string{"family none"}, Duration: 12345 * time.Millisecond}, "gcra-10/s: MISS (12s)"},
		{SelftestRow{Case: c, Err: errors.New("refused"), Duration: 300 * time.Millisecond}, "gcra-10/s: MISS (300ms)"},
		{SelftestRow{Case: c, Duration: time.Second}, "gcra-10/s: MISS (1s)"},
	}
	for _, tc := range tests {
		if got := tc.row.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
