package infer

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestInferLongEpochWindow: 20 requests per clock minute, entered at any
// second of the minute. With Retry-After on rejections infer probes a comb
// around the advertised moment and gets window 60 s ± 2 % and alignment
// epoch within 2·W + 30 s; without, within 6·W + 30 s.
func TestInferLongEpochWindow(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 20, Window: time.Minute, Align: limiter.AlignEpoch}
	for _, retry := range []bool{true, false} {
		for _, phase := range []int{0, 17, 41, 59} {
			name := fmt.Sprintf("retry-after %v, at second %d", retry, phase)
			o := time.Date(2030, 1, 1, 0, 0, phase, 300e6, time.UTC)
			e := newSimEngine(simServer{cfg: cfg, oneWay: 2 * time.Millisecond, retry: retry}, o)
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
			if retry {
				budget = 150
			}
			if inf.DurationS > budget {
				t.Errorf("%s: took %.1f s, want at most %.0f s", name, inf.DurationS, budget)
			}
			t.Logf("%s: window %+v in %.1f s, %d requests", name, *inf.Params.WindowS, inf.DurationS, inf.Requests)
		}
	}
}
