package watch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/session"
)

// ParseShare reads a budget such as "2%" or "0.5%" as a share (0.02) —
// the --budget flag's grammar.
func ParseShare(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok {
		return 0, fmt.Errorf("--budget %q: write a percentage such as 2%%", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0 && v <= 100) {
		return 0, fmt.Errorf("--budget %q: a percentage above 0 and at most 100, such as 2%%", s)
	}
	return v / 100, nil
}

// MetricsAddr checks a metrics address (--metrics-listen): host:port,
// loopback unless public; a missing host means 127.0.0.1.
func MetricsAddr(addr string, public bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-listen %q: want host:port such as 127.0.0.1:9464", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !public && host != "localhost" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.IsLoopback() {
			return "", session.Suggest(session.Usage, fmt.Sprintf("--metrics-listen %q is not loopback: metrics show your limits and findings (to serve them to the network)", addr),
				session.Fix{Flag: "--public"})
		}
	}
	return net.JoinHostPort(host, port), nil
}

// ServeMetrics serves the metrics on addr (port 0 picks one) until stop
// is called, and returns the address bound.
func ServeMetrics(addr string, m *Metrics) (bound string, stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener closed under us: nothing to report
		}
	}()
	return l.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
