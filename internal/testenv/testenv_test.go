package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartRedisAnswersPing(t *testing.T) {
	addr := StartRedis(t)
	if !redisPing(addr) {
		t.Fatalf("redis at %s does not answer PING", addr)
	}
}

// TestStartNginxLimitReq checks that nginx answers on the substituted port,
// that its workers (nobody, when run as root) can read a file under the
// substituted prefix (its own nginx.conf), and that limit_req limits it.
func TestStartNginxLimitReq(t *testing.T) {
	const conf = `events { worker_connections 64; }
http {
    access_log off;
    limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
    server {
        listen 127.0.0.1:{{PORT}};
        root {{PREFIX}};
        location = /nginx.conf { limit_req zone=one burst=1 nodelay; }
    }
}
`
	url := StartNginx(t, conf)
	var codes []int
	for range 3 {
		resp, err := http.Get(url + "/nginx.conf")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && !strings.HasPrefix(string(body), "events {") {
			t.Errorf("GET /nginx.conf body %q, want the configuration", body)
		}
		if strings.Contains(string(body), "{{") {
			t.Errorf("placeholders left in the configuration: %q", body)
		}
		codes = append(codes, resp.StatusCode)
	}
	// rate=1r/m burst=1 nodelay is a bucket of capacity 2: then 503.
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 503 {
		t.Errorf("statuses %v, want [200 200 503]", codes)
	}
}

func TestMissingBinarySkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		lookBinary(t, "rlprobe-no-such-binary", "/nonexistent/rlprobe-no-such-binary")
		t.Error("lookBinary returned for a missing binary")
	})
	if !skipped {
		t.Error("a missing binary did not skip the test")
	}
}

func TestStartPrometheusIsReady(t *testing.T) {
	url := StartPrometheus(t, "127.0.0.1:1", time.Second)
	resp, err := http.Get(url + "/api/v1/status/buildinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"version"`) {
		t.Fatalf("buildinfo: %d %s", resp.StatusCode, b)
	}
}

func TestStartTinyproxyForwards(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello via proxy") }))
	defer srv.Close()
	proxy, logPath := StartTinyproxy(t)
	pu, _ := neturl.Parse(proxy)
	c := http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 5 * time.Second}
	resp, err := c.Get(srv.URL + "/through")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello via proxy" {
		t.Fatalf("body %q", b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		log, _ := os.ReadFile(logPath)
		if strings.Contains(string(log), "/through") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy's log does not show the request:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
