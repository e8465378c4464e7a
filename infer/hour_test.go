package infer

import (
	"context"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// TestInferHourWindowAdvertised: 20 per clock hour with draft-8 headers,
// started 5 minutes before the hour: infer waits for the advertised
// return (inside the 10 min budget), sees the edge there, and reports the
// advertised hour, epoch-aligned.
func TestInferHourWindowAdvertised(t *testing.T) {
	t.Parallel()
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 20, Window: time.Hour, Align: limiter.AlignEpoch}
	o := time.Date(2030, 1, 1, 0, 55, 0, 300e6, time.UTC)
	e := newSimEngine(simServer{cfg: cfg, oneWay: 2 * time.Millisecond, retry: true, dialect: headers.Draft8}, o)
	inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	w := inf.Params.WindowS
	if inf.Algorithm != FixedWindow || w == nil || w.Value != 3600 || w.Low > 3600 || w.High < 3600 ||
		inf.Alignment == nil || *inf.Alignment != AlignEpoch || inf.Params.Limit.Value != 20 {
		t.Fatalf("%s limit %+v window %+v alignment %v (complete %v), want fixed-window 20 per 3600 s, epoch",
			inf.Algorithm, inf.Params.Limit, w, deref(inf.Alignment), inf.Complete)
	}
	t.Logf("window %+v in %.1f s, %d requests, complete %v", *w, inf.DurationS, inf.Requests, inf.Complete)
}
