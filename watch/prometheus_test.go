package watch_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
	"github.com/rlprobe/rlprobe/watch"
)

// TestRealPrometheusScrapesWatch: a real Prometheus scrapes a watch's
// /metrics over loopback; after two cycles its HTTP API returns the
// verdict and parameter series.
func TestRealPrometheusScrapesWatch(t *testing.T) {
	srv, err := testserver.New(testserver.Config{Listen: "127.0.0.1:0", Routes: []testserver.Route{{Policy: window(10, time.Second, testserver.KeyGlobal, headers.Draft8)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	m := watch.NewMetrics()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go ms.Serve(l)
	defer ms.Close()
	prom := testenv.StartPrometheus(t, l.Addr().String(), 200*time.Millisecond)

	pol := verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{{Limit: 10, Window: time.Second, WindowType: verify.Fixed}}}.Normalize()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = watch.Run(ctx, watch.Config{
		Session: session.Config{Tool: "rlprobe test", Probe: probe.Options{URLs: []string{srv.URL() + "/"}}},
		Policy:  &pol, Every: time.Second, Share: 0.2, Dir: watch.Dir{Path: t.TempDir()}, MaxCycles: 2,
		Metrics: m, Tool: "rlprobe test",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Prometheus scrapes every 200 ms: poll its API until both series are
	// there (bounded).
	want := map[string]float64{`rlprobe_rule_pass`: 1, `rlprobe_limit_requests{source="headers"}`: 10, `rlprobe_cycles_total{result="ok"}`: 2}
	deadline := time.Now().Add(20 * time.Second)
	for q, v := range want {
		for {
			got, ok := query(t, prom, q)
			if ok && got == v {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus has %s = %v (found %v), want %v", q, got, ok, v)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// query asks Prometheus's HTTP API for the instant value of q.
func query(t *testing.T, prom, q string) (float64, bool) {
	resp, err := http.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" || len(body.Data.Result) == 0 {
		return 0, false
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	var v float64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return 0, false
	}
	return v, true
}
