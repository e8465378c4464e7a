package infer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

func TestInferLongDebug(t *testing.T) {
	debugf = func(f string, a ...any) { t.Logf(f, a...) }
	defer func() { debugf = nil }()
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 20, Window: time.Minute, Align: limiter.AlignEpoch}
	o := time.Date(2030, 1, 1, 0, 0, 17, 0, time.UTC)
	e := newSimEngine(simServer{cfg: cfg, oneWay: 500 * time.Microsecond}, o)
	inf, err := Infer(context.Background(), e, Options{Origin: o, Now: e.clock, MaxWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s %+v %+v align %v complete %v dur %v req %d\n", inf.Algorithm, *inf.Params.Limit, *inf.Params.WindowS, *inf.Alignment, inf.Complete, inf.DurationS, inf.Requests)
}
