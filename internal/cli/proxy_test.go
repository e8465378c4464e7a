package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/infer"
	"github.com/rlprobe/rlprobe/internal/testenv"
	"github.com/rlprobe/rlprobe/limiter"
	"github.com/rlprobe/rlprobe/record"
	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// proxyLog waits until the proxy's log holds every string of want, and
// returns its request lines.
func proxyLog(t *testing.T, path string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(string(b), w)
		}
		if ok || time.Now().After(deadline) {
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "Request (file descriptor") {
					lines = append(lines, l)
				}
			}
			if !ok {
				t.Fatalf("the proxy's log lacks some of %q:\n%s", want, b)
			}
			return strings.Join(lines, "\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProxyRunCheckInfer: run, check and infer through a real tinyproxy
// (--proxy, or HTTP_PROXY / HTTPS_PROXY from the environment), http targets
// in absolute form and an https target through a CONNECT tunnel; the
// proxy's own log shows the requests, the record header names the proxy
// (credentials redacted), and the user is warned about what a proxy hides.
func TestProxyRunCheckInfer(t *testing.T) {
	tb := limiter.Config{Algorithm: limiter.TokenBucket, Rate: 5, Capacity: 3}
	srv := refServer(t, "", tb, nil)
	tlsSrv := refServer(t, "", tb, func(c *testserver.Config, _ *testserver.Policy) { c.TLS = true })
	tlsPort := strings.TrimPrefix(tlsSrv.URL(), "https://127.0.0.1:")
	proxyURL, logPath := testenv.StartTinyproxy(t, atoi(t, tlsPort))
	withCreds := strings.Replace(proxyURL, "http://", "http://probe:s3cret@", 1)
	dir := t.TempDir()

	// run, with credentials in --proxy.
	out := filepath.Join(dir, "run.jsonl")
	code, stdout, stderr := runCLI(t, nil, "run", srv.URL()+"/run", "--pattern", "burst", "--count", "4", "--proxy", withCreds, "--out", out)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	run := readRecord(t, out)
	if got := statuses(run); got[200] != 3 || got[429] != 1 {
		t.Errorf("run through the proxy: statuses %v, want three 200 and one 429", got)
	}
	if h := run.Header.Proxy; !strings.HasPrefix(h, "http://probe:") || strings.Contains(h, "s3cret") || !strings.HasSuffix(h, strings.TrimPrefix(proxyURL, "http://")) {
		t.Errorf("record header proxy = %q, want the proxy URL with its password redacted", h)
	}
	raw, _ := os.ReadFile(out)
	for what, s := range map[string]string{"record": string(raw), "stdout": stdout, "stderr": stderr} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("the proxy's password is in the %s", what)
		}
	}
	if !strings.Contains(stderr, "warning: probing through the proxy") || !strings.Contains(stderr, "--key ip") {
		t.Errorf("no warning about what a proxy hides:\n%s", stderr)
	}

	// run to an https target, the proxy from HTTPS_PROXY.
	out = filepath.Join(dir, "tls.jsonl")
	code, _, stderr = runCLI(t, map[string]string{"HTTPS_PROXY": proxyURL}, "run", tlsSrv.URL()+"/tls", "--pattern", "burst", "--count", "2", "--insecure", "--out", out)
	if code != 0 {
		t.Fatalf("run https: exit %d\n%s", code, stderr)
	}
	if run := readRecord(t, out); statuses(run)[200] != 2 || run.Header.Proxy != proxyURL {
		t.Errorf("https through the proxy: statuses %v, header proxy %q", statuses(run), run.Header.Proxy)
	}

	// check, the proxy from HTTP_PROXY.
	code, rep, stderr := runCheckJSONEnv(t, map[string]string{"HTTP_PROXY": proxyURL}, "check", srv.URL()+"/check",
		"--rate", "5/s", "--capacity", "3", "--only", "burst", "--json", "--out", filepath.Join(dir, "check.jsonl"))
	if code != 0 || rep.Verdict != verify.VerdictPass {
		t.Errorf("check through the proxy: exit %d, verdict %s, findings %v\n%s", code, rep.Verdict, rep.Findings, stderr)
	}

	// infer, with --proxy, against a server of its own (fresh quota).
	inferSrv := refServer(t, "", tb, nil)
	code, inf, doc, stderr := inferJSON(t, inferSrv.URL()+"/infer", "--proxy", proxyURL, "--out", filepath.Join(dir, "infer.jsonl"))
	if code != 0 || inf.Algorithm != infer.TokenBucket {
		t.Errorf("infer through the proxy: exit %d, %s\n%s\n%s", code, inf.Algorithm, stderr, doc)
	}

	lines := proxyLog(t, logPath, "GET "+srv.URL()+"/run", "CONNECT 127.0.0.1:"+tlsPort, "GET "+srv.URL()+"/check", "GET "+inferSrv.URL()+"/infer")
	t.Logf("tinyproxy's request lines (first 8 of %d):\n%s", strings.Count(lines, "\n")+1, strings.Join(firstN(strings.Split(lines, "\n"), 8), "\n"))
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a port: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// runCheckJSONEnv runs the CLI with env and decodes its --json document.
func runCheckJSONEnv(t *testing.T, env map[string]string, args ...string) (int, verify.Report, string) {
	t.Helper()
	code, out, errOut := runCLI(t, env, args...)
	var rep verify.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("rlprobe %v: exit %d, stdout is not a document: %v\nstdout %q\nstderr %s", args, code, err, out, errOut)
	}
	return code, rep, errOut
}

// TestNoProxyBypasses: NO_PROXY names a target that HTTP_PROXY would
// otherwise carry: the proxy never sees it, and the header names no proxy.
func TestNoProxyBypasses(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), nil)
	proxyURL, logPath := testenv.StartTinyproxy(t)
	out := filepath.Join(t.TempDir(), "direct.jsonl")
	env := map[string]string{"HTTP_PROXY": proxyURL, "NO_PROXY": "localhost,127.0.0.1"}
	code, _, stderr := runCLI(t, env, "run", srv.URL()+"/bypassed", "--pattern", "burst", "--count", "2", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if run := readRecord(t, out); statuses(run)[200] != 2 || run.Header.Proxy != "" {
		t.Errorf("statuses %v, header proxy %q; want two 200 and no proxy", statuses(run), run.Header.Proxy)
	}
	if strings.Contains(stderr, "through the proxy") {
		t.Errorf("warned about a proxy that was not used:\n%s", stderr)
	}
	// The same run without NO_PROXY goes through it: the log is live.
	delete(env, "NO_PROXY")
	out2 := filepath.Join(t.TempDir(), "proxied.jsonl")
	if code, _, stderr := runCLI(t, env, "run", srv.URL()+"/proxied", "--pattern", "burst", "--count", "1", "--out", out2); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	log := proxyLog(t, logPath, "/proxied")
	if strings.Contains(log, "/bypassed") {
		t.Errorf("the proxy saw the target NO_PROXY names:\n%s", log)
	}
}

// TestProxyUsageErrors: --source-ips cannot go through a proxy, and a
// proxy URL rlprobe cannot use is refused before anything is sent.
func TestProxyUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.jsonl")
	tests := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--proxy", "http://127.0.0.1:9", "--source-ips", "127.0.0.2,127.0.0.3"}, "--source-ips cannot be kept through a proxy: the target sees the proxy's address"},
		{map[string]string{"http_proxy": "http://127.0.0.1:9"}, []string{"--source-ips", "127.0.0.2"}, "--source-ips cannot be kept through a proxy"},
		{nil, []string{"--proxy", "https://user:pw@127.0.0.1:9"}, "https:// proxies are not supported"},
		{nil, []string{"--proxy", "ftp://127.0.0.1:9"}, "http, socks5 or socks5h"},
	}
	for _, tt := range tests {
		args := append([]string{"run", "http://127.0.0.1:1/", "--pattern", "burst", "--count", "1", "--out", out}, tt.args...)
		code, _, stderr := runCLI(t, tt.env, args...)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %s; want 2 and %q", tt.args, code, stderr, tt.want)
		}
		if strings.Contains(stderr, ":pw@") {
			t.Errorf("%v: the proxy password is in the error:\n%s", tt.args, stderr)
		}
	}
	// With NO_PROXY naming the target, --source-ips is fine.
	env := map[string]string{"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
	if code, _, stderr := runCLI(t, env, "run", "http://127.0.0.1:1/", "--pattern", "burst", "--count", "1", "--source-ips", "127.0.0.2", "--dry-run"); code != 0 {
		t.Errorf("NO_PROXY target with --source-ips: exit %d\n%s", code, stderr)
	}
}

// TestAgentFlag: --agent names the agent in the header and every result;
// without it the name is the host and pid; a name with a space is a usage
// error.
func TestAgentFlag(t *testing.T) {
	srv := refServer(t, "", nginxDemo(), nil)
	dir := t.TempDir()
	out := filepath.Join(dir, "west.jsonl")
	if code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "2", "--agent", "west-1", "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	run := readRecord(t, out)
	if run.Header.Agent != "west-1" {
		t.Errorf("header agent %q, want west-1", run.Header.Agent)
	}
	for _, r := range run.Results {
		if r.Agent != "west-1" {
			t.Errorf("result %d agent %q, want west-1", r.Seq, r.Agent)
		}
	}
	out = filepath.Join(dir, "default.jsonl")
	if code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "1", "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got, want := readRecord(t, out).Header.Agent, record.DefaultAgent(); got != want {
		t.Errorf("default agent %q, want %q (host and pid)", got, want)
	}
	code, _, stderr := runCLI(t, nil, "run", srv.URL()+"/", "--pattern", "burst", "--count", "1", "--agent", "a b", "--out", filepath.Join(dir, "x.jsonl"))
	if code != ExitUsage || !strings.Contains(stderr, "--agent") {
		t.Errorf("--agent 'a b': exit %d, stderr %s; want 2 naming --agent", code, stderr)
	}
}

// TestProxyRefusedAtPreflight: a proxy that refuses the tunnel stops check
// at the preflight (exit 3) with the proxy's answer and a hint about it.
func TestProxyRefusedAtPreflight(t *testing.T) {
	tlsSrv := refServer(t, "", nginxDemo(), func(c *testserver.Config, _ *testserver.Policy) { c.TLS = true })
	proxyURL, _ := testenv.StartTinyproxy(t, 1) // CONNECT to port 1 only
	code, _, stderr := runCLI(t, map[string]string{"https_proxy": proxyURL}, "check", tlsSrv.URL()+"/", "--insecure",
		"--rate", "1/s", "--burst", "3", "--out", filepath.Join(t.TempDir(), "r.jsonl"))
	if code != ExitUnreachable || !strings.Contains(stderr, "the proxy answered 403") || !strings.Contains(stderr, "(proxy)") || !strings.Contains(stderr, "NO_PROXY") {
		t.Errorf("exit %d, stderr %s; want 3, the proxy's 403 and a hint about the proxy", code, stderr)
	}
}
