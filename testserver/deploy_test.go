package testserver

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
)

// TestDeployments: K limiter instances behind one handler admit K times
// the limit with local state and the limit with a shared one; by
// connection, one connection stays on its instance and new connections
// go round-robin; by request, every request goes to the next instance.
func TestDeployments(t *testing.T) {
	win := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 3, Window: 10 * time.Second, Align: limiter.AlignFirstRequest}
	bucket := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 0.1, Capacity: 2}
	for _, tt := range []struct {
		name     string
		cfg      limiter.Config
		d        Deployment
		newConns bool // every request on a new connection (else one kept alive)
		requests int
		want     int // admitted
	}{
		{"one instance", win, Deployment{}, true, 12, 3},
		{"3 local by request, one connection", win, Deployment{Instances: 3, Balance: BalanceRequest}, false, 12, 9},
		{"3 shared by request", win, Deployment{Instances: 3, Store: StoreShared, Balance: BalanceRequest}, false, 12, 3},
		{"3 local by connection, one connection", win, Deployment{Instances: 3}, false, 12, 3},
		{"3 local by connection, new connections", win, Deployment{Instances: 3}, true, 12, 9},
		{"4 local by connection, new connections", win, Deployment{Instances: 4}, true, 16, 12},
		{"2 local by request, a bucket", bucket, Deployment{Instances: 2, Balance: BalanceRequest}, false, 8, 4},
		{"2 shared by connection, a bucket", bucket, Deployment{Instances: 2, Store: StoreShared}, true, 8, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			h, err := NewHandler([]Route{{Policy: Policy{Limiter: tt.cfg}}}, HandlerOptions{Now: clk.Now, Deployment: tt.d})
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for i := range tt.requests {
				port := 40000
				if tt.newConns {
					port += i
				}
				if get(h, "/", "127.0.0.1:"+strconv.Itoa(port)).StatusCode == http.StatusOK {
					admitted++
				}
			}
			if admitted != tt.want {
				t.Errorf("admitted %d of %d, want %d", admitted, tt.requests, tt.want)
			}
		})
	}
}

// TestDeploymentDecisionNumbers: with a local store each instance numbers
// its own decisions, so that the numbers name no instance count.
func TestDeploymentDecisionNumbers(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 10, Window: 10 * time.Second, Align: limiter.AlignFirstRequest}
	h, err := NewHandler([]Route{{Policy: Policy{Limiter: cfg}}}, HandlerOptions{Now: clk.Now, EchoArrival: true,
		Deployment: Deployment{Instances: 3, Balance: BalanceRequest}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 6 {
		got = append(got, get(h, "/", "127.0.0.1:1").Header.Get(headers.DecisionHeader))
	}
	if want := "[1 1 1 2 2 2]"; fmt.Sprint(got) != want {
		t.Errorf("decision numbers %v, want %s", got, want)
	}
}

// TestKeyCollapse: with the collapse fault every request shares the one
// global key whatever the route's key says; the log still shows the
// configured key.
func TestKeyCollapse(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: 10 * time.Second, Align: limiter.AlignFirstRequest}
	for _, tt := range []struct {
		fault KeyFault
		want  int // admitted of 2 from A, then 2 from B
	}{{"", 4}, {KeyCollapse, 2}} {
		t.Run(fmt.Sprintf("fault %q", tt.fault), func(t *testing.T) {
			clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			var log strings.Builder
			h, err := NewHandler([]Route{{Policy: Policy{Limiter: cfg, Key: KeyIP, KeyFault: tt.fault}}}, HandlerOptions{Now: clk.Now, Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for _, remote := range []string{"10.0.0.1:1", "10.0.0.1:1", "10.0.0.2:1", "10.0.0.2:1"} {
				if get(h, "/", remote).StatusCode == http.StatusOK {
					admitted++
				}
			}
			if admitted != tt.want {
				t.Errorf("admitted %d, want %d", admitted, tt.want)
			}
			if s := log.String(); !strings.Contains(s, "10.0.0.2") {
				t.Errorf("the log does not show the configured key:\n%s", s)
			}
		})
	}
	if err := (Policy{Limiter: cfg, KeyFault: "scramble"}).Validate(); err == nil {
		t.Error("an unknown key fault validated")
	}
}

// TestDeploymentOverSockets: behind a real listener, a kept-alive
// connection stays on its instance and each new connection goes to the
// next: 3 local instances of 2 per window admit 2 on one connection and 6
// on new ones.
func TestDeploymentOverSockets(t *testing.T) {
	cfg := limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute, Align: limiter.AlignFirstRequest}
	for _, tt := range []struct {
		name      string
		keepAlive bool
		want      int
	}{{"one kept-alive connection", true, 2}, {"a connection a request", false, 6}} {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(Config{Routes: []Route{{Policy: Policy{Limiter: cfg}}}, Listen: "127.0.0.1:0",
				Handler: HandlerOptions{Deployment: Deployment{Instances: 3}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: !tt.keepAlive, MaxIdleConnsPerHost: 1}, Timeout: 5 * time.Second}
			admitted := 0
			for range 9 {
				resp, err := client.Get(srv.URL() + "/")
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					admitted++
				}
			}
			if admitted != tt.want {
				t.Errorf("admitted %d of 9, want %d", admitted, tt.want)
			}
		})
	}
}

func TestDeploymentValidate(t *testing.T) {
	for _, d := range []Deployment{{Instances: -1}, {Instances: maxInstances + 1}, {Instances: 2, Store: "both"}, {Instances: 2, Balance: "random"}} {
		if err := d.Validate(); err == nil {
			t.Errorf("%+v validated", d)
		}
	}
}
