package testserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/rlprobe/rlprobe/headers"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/testserver"
)

// A server limiting /api to 2 requests per minute, on a free loopback port.
func ExampleServer() {
	srv, err := testserver.New(testserver.Config{
		Routes: []testserver.Route{{
			Path: "/api",
			Policy: testserver.Policy{
				Limiter:  limiter.Config{Algorithm: limiter.FixedWindow, Limit: 2, Window: time.Minute},
				Dialects: []headers.Dialect{headers.Draft8},
			},
		}},
		Listen: "127.0.0.1:0",
	})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	for range 3 {
		resp, err := http.Get(srv.URL() + "/api")
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
	}
	// Output:
	// 200 "default";r=1;t=0 "default";q=2;w=60
	// 200 "default";r=0;t=60 "default";q=2;w=60
	// 429 "default";r=0;t=60 "default";q=2;w=60
}

// An in-memory server keyed by source address: each client dials from its
// own address through the listener, as the probe engine's DialFunc does.
func ExampleMemListener() {
	srv, err := testserver.New(testserver.Config{Routes: []testserver.Route{{
		Policy: testserver.Policy{
			Limiter: limiter.Config{Algorithm: limiter.GCRA, Rate: 1, Capacity: 1},
			Key:     testserver.KeyIP,
		},
	}}})
	if err != nil {
		panic(err)
	}
	l := testserver.NewMemListener()
	if err := srv.StartListener(l); err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	for _, src := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"} {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return l.Dial(ctx, network, addr, netip.MustParseAddr(src))
		}}}
		resp, err := c.Get(srv.URL() + "/")
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
		fmt.Println(src, resp.StatusCode)
	}
	// Output:
	// 10.0.0.1 200
	// 10.0.0.1 429
	// 10.0.0.2 200
}
