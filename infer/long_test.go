package infer

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// TestInferLongEpochWindow: 20 requests per clock minute, entered at any
// second of the minute (0 and 41 in every run, 17 and 59 too under
// RLPROBE_SOAK=1: the search over 60 s windows is the costliest there is,
// 81 s of CI's race run for all four): window 60 s ± 2 % and alignment epoch. With
// draft-8 headers (a policy of 20 per 60 s, returns on the minute) within
// 4·W + 30 s (2·W + 30 s to the answer, up to two more W for the
// experiments that validate it); with only Retry-After (a comb refines the advertised
// return) or nothing, within 6·W + 30 s.
func TestInferLongEpochWindow(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 20, Window: time.Minute, Align: limiter.AlignEpoch}
	phases := []int{0, 41}
	if os.Getenv("RLPROBE_SOAK") != "" {
		phases = []int{0, 17, 41, 59}
	}
	for _, hd := range []string{"draft-8", "retry-after", "none"} {
		for _, phase := range phases {
			name := fmt.Sprintf("%s, at second %d", hd, phase)
			o := time.Date(2030, 1, 1, 0, 0, phase, 300e6, time.UTC)
			srv := simServer{cfg: cfg, oneWay: 2 * time.Millisecond, retry: hd != "none"}
			if hd == "draft-8" {
				srv.dialect = headers.Draft8
			}
			e := newSimEngine(srv, o)
			inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock, MaxWindow: time.Minute})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if inf.Algorithm != FixedWindow || inf.Alignment == nil || *inf.Alignment != AlignEpoch ||
				inf.Params.WindowS == nil || math.Abs(inf.Params.WindowS.Value-60) > 1.2 || inf.Params.Limit.Value != 20 {
				t.Errorf("%s: %s limit %+v window %+v alignment %v, want fixed-window 20 per 60 s ± 2 %%, epoch",
					name, inf.Algorithm, inf.Params.Limit, inf.Params.WindowS, deref(inf.Alignment))
				continue
			}
			if w := inf.Params.WindowS; w.Low > 60 || w.High < 60 {
				t.Errorf("%s: window %+v leaves out the truth", name, *w)
			}
			budget := 390.0
			if hd == "draft-8" {
				budget = 270
			}
			if inf.DurationS > budget {
				t.Errorf("%s: took %.1f s, want at most %.0f s", name, inf.DurationS, budget)
			}
			t.Logf("%s: window %+v in %.1f s, %d requests", name, *inf.Params.WindowS, inf.DurationS, inf.Requests)
		}
	}
}
