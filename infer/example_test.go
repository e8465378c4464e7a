package infer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/record"
)

// modelEngine answers schedules on a virtual clock with a limiter model:
// every request arrives when it is due and is answered at once. (The CLI
// hands Infer the probe engine instead.)
type modelEngine struct {
	cfg    limiter.Config
	st     limiter.State
	origin time.Time
	now    time.Time
	seq    int64
}

func (m *modelEngine) Run(_ context.Context, s patterns.Schedule) ([]record.Result, error) {
	start := m.now
	if !s.Start.IsZero() && s.Start.After(m.now) {
		start = s.Start
	}
	var out []record.Result
	for _, sd := range s.Sends {
		at := start.Add(sd.At)
		var d limiter.Decision
		m.st, d = m.cfg.Step(m.st, at)
		status := 200
		if !d.Allowed {
			status = 429
		}
		t := int64(at.Sub(m.origin))
		out = append(out, record.Result{Seq: m.seq, Client: "k1", Phase: sd.Phase, Outcome: record.OutcomeResponse,
			Status: status, Sched: t, Sent: t, Wrote: t, TTFB: t + 1000, Done: t + 1000})
		m.seq++
		m.now = at
	}
	return out, nil
}

// Infer tells a token bucket (nginx rate=2r/s burst=4 nodelay) from every
// other family and recovers its rate and capacity.
func ExampleInfer() {
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	eng := &modelEngine{
		cfg:    limiter.Config{Algorithm: limiter.GCRA, Rate: 2, Capacity: 5},
		origin: origin, now: origin,
	}
	inf, err := infer.Infer(context.Background(), eng, infer.Options{
		Origin: origin,
		Now:    func() time.Time { return eng.now },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(inf.Algorithm)
	fmt.Printf("rate %.1f/s, capacity %.0f\n", inf.Params.RatePerS.Value, inf.Params.Capacity.Value)
	fmt.Println("confidence", inf.Reproduced)
	// Output:
	// token-bucket
	// rate 2.0/s, capacity 5
	// confidence 1
}
