package scenario

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/patterns"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/record"
)

// sinkFunc adapts a function to probe.Sink.
type sinkFunc func(record.Result) error

func (f sinkFunc) WriteResult(r record.Result) error { return f(r) }

func TestEngineRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p, err := probe.New(probe.Options{URLs: []string{srv.URL}, RaceMode: probe.RaceLastByte})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var sunk []int64
	zero := time.Now()
	var begins []time.Time
	var counts [][2]int
	e, err := NewEngine(EngineConfig{Probe: p, Zero: zero, RaceMode: patterns.LastByte,
		Sink:     sinkFunc(func(r record.Result) error { sunk = append(sunk, r.Seq); return nil }),
		OnBegin:  func(b time.Time, _ patterns.Schedule) { begins = append(begins, b) },
		OnResult: func(done, total int) { counts = append(counts, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	burst, _ := patterns.Burst(3, 0)
	race, _ := patterns.Race(2, 1, patterns.LastByte)
	for _, s := range []patterns.Schedule{burst, race} {
		res, err := e.Run(context.Background(), s)
		if err != nil || len(res) != len(s.Sends) {
			t.Fatalf("Run = %d results, %v; want %d", len(res), err, len(s.Sends))
		}
	}
	if sc, sent := e.Counts(); sc != 5 || sent != 5 || len(sunk) != 5 {
		t.Errorf("Counts = %d, %d; sink saw %v; want 5 each", sc, sent, sunk)
	}
	if len(begins) != 2 || begins[0].Before(zero) {
		t.Errorf("OnBegin calls %v", begins)
	}
	// OnResult counts each Run's results against its sends: 1/3 2/3 3/3, then 1/2 2/2.
	if want := [][2]int{{1, 3}, {2, 3}, {3, 3}, {1, 2}, {2, 2}}; !slices.Equal(counts, want) {
		t.Errorf("OnResult calls %v, want %v", counts, want)
	}

	// A schedule racing in another mode is refused.
	single, _ := patterns.Race(1, 2, patterns.SinglePacket)
	if _, err := e.Run(context.Background(), single); !errors.Is(err, ErrRaceMode) {
		t.Errorf("Run(single-packet race) on a last-byte engine = %v, want ErrRaceMode", err)
	}
	// A start in the past is refused; nothing is sent.
	late := burst
	late.Start = time.Now().Add(-time.Second)
	if res, err := e.Run(context.Background(), late); err == nil || !strings.Contains(err.Error(), "ago") || res != nil {
		t.Errorf("Run(start 1s ago) = %v, %v; want an error", res, err)
	}
	// An anchored start is honoured: every sched is relative to zero.
	anchored := burst
	anchored.Start = time.Now().Add(150 * time.Millisecond)
	res, err := e.Run(context.Background(), anchored)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if want := anchored.Start.Sub(zero); time.Duration(r.Sched) != want {
			t.Errorf("sched %v, want %v", time.Duration(r.Sched), want)
		}
	}
}

func TestNewEngineRequires(t *testing.T) {
	if _, err := NewEngine(EngineConfig{Zero: time.Now()}); err == nil {
		t.Errorf("NewEngine without Probe succeeded")
	}
	p, _ := probe.New(probe.Options{URLs: []string{"http://127.0.0.1:1/"}})
	if _, err := NewEngine(EngineConfig{Probe: p}); err == nil {
		t.Errorf("NewEngine without Zero succeeded")
	}
}
