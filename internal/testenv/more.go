package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Well-known locations of the other servers' binaries.
const (
	PrometheusPath = "/usr/bin/prometheus"
	PromtoolPath   = "/usr/bin/promtool"
	TinyproxyPath  = "/usr/bin/tinyproxy"
)

// Promtool returns the path of promtool (skipping the test when it is
// missing, failing it under CI).
func Promtool(t testing.TB) string {
	t.Helper()
	return lookBinary(t, "promtool", PromtoolPath)
}

// StartPrometheus starts a private Prometheus on a free loopback port that
// scrapes target ("127.0.0.1:PORT", path /metrics) every scrapeEvery, with
// its storage under t.TempDir(), waits until it is ready, stops it when the
// test ends, and returns its base URL "http://127.0.0.1:PORT" (the HTTP API
// is under /api/v1).
func StartPrometheus(t testing.TB, target string, scrapeEvery time.Duration) (url string) {
	t.Helper()
	bin := lookBinary(t, "prometheus", PrometheusPath)
	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: rlprobe
    scrape_interval: %s
    static_configs:
      - targets: ['%s']
`, promDuration(scrapeEvery), promDuration(scrapeEvery), promDuration(scrapeEvery), target)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr, "--log.level=warn")
		p, ok, out := start(t, cmd, syscall.SIGKILL, func() bool { return httpOK("http://" + addr + "/-/ready") })
		if ok {
			t.Cleanup(p.stop)
			return "http://" + addr
		}
		if attempt == 2 || !strings.Contains(out, "address already in use") {
			t.Fatalf("testenv: prometheus exited before answering on %s; output:\n%s", addr, out)
		}
	}
}

// promDuration spells d in Prometheus's duration syntax (whole
// milliseconds at least).
func promDuration(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

// httpOK reports whether GET url answers 200.
func httpOK(url string) bool {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// StartTinyproxy starts a private tinyproxy forward proxy on a free
// loopback port that allows CONNECT to every port listed in connectPorts
// (tinyproxy refuses CONNECT to ports it was not told of), logs every
// request at Info level to the returned log file, and stops it when the
// test ends. It returns the proxy's URL "http://127.0.0.1:PORT" and the
// path of its log.
func StartTinyproxy(t testing.TB, connectPorts ...int) (proxyURL, logPath string) {
	t.Helper()
	bin := lookBinary(t, "tinyproxy", TinyproxyPath)
	dir := t.TempDir()
	logPath = filepath.Join(dir, "tinyproxy.log")
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		var b strings.Builder
		fmt.Fprintf(&b, "Port %d\nListen 127.0.0.1\nTimeout 30\nMaxClients 1024\nLogLevel Info\nLogFile %q\nPidFile %q\nAllow 127.0.0.1\nDisableViaHeader Yes\n",
			port, logPath, filepath.Join(dir, "tinyproxy.pid"))
		for _, p := range connectPorts {
			fmt.Fprintf(&b, "ConnectPort %d\n", p)
		}
		confPath := filepath.Join(dir, "tinyproxy.conf")
		if err := os.WriteFile(confPath, []byte(b.String()), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		// tinyproxy drops privileges to nobody when run as root: its log
		// directory must be writable by that user.
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		for d := filepath.Dir(dir); d != os.TempDir() && d != filepath.Dir(d); d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o755)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "-d", "-c", confPath)
		p, ok, out := start(t, cmd, syscall.SIGKILL, func() bool { return tcpAnswers(addr) })
		if ok {
			t.Cleanup(p.stop)
			return "http://" + addr, logPath
		}
		if attempt == 2 {
			t.Fatalf("testenv: tinyproxy exited before answering on %s; output:\n%s", addr, out)
		}
	}
}
