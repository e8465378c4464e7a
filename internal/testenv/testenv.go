// Package testenv starts private instances of the real servers rlprobe's
// tests run against — redis-server, nginx, Prometheus and tinyproxy from
// the system's packages —
// on free loopback ports, with every file under the test's temporary
// directory, and stops them when the test ends.
//
// A helper skips the test when the binary is missing, except under CI
// (environment CI=true), where a missing binary fails the test: CI must
// install what the tests need. The helpers are for tests only; nothing
// outside _test.go files may import this package.
package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Well-known locations of the binaries, used when they are not on PATH
// (nginx lives in /usr/sbin, which is often not on a user's PATH).
const (
	RedisServerPath = "/usr/bin/redis-server"
	NginxPath       = "/usr/sbin/nginx"
)

// startTimeout bounds how long a server may take to answer on its port.
const startTimeout = 10 * time.Second

// lookBinary finds a binary by name on PATH, then at its well-known path.
// It skips the test when the binary is missing, or fails it when CI=true.
func lookBinary(t testing.TB, name, fallback string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if st, err := os.Stat(fallback); err == nil && !st.IsDir() {
		return fallback
	}
	msg := fmt.Sprintf("testenv: %s not found on PATH nor at %s", name, fallback)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: install it)")
	}
	t.Skip(msg)
	return ""
}

// freePort returns a loopback TCP port that was free a moment ago. The port
// could be taken between this call and the server's bind; start retries.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tailBuffer keeps the last bytes a process wrote, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.buf.Len() > 8192 {
		keep := b.buf.Bytes()[b.buf.Len()-4096:]
		b.buf.Reset()
		b.buf.Write(keep)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a started server.
type process struct {
	cmd    *exec.Cmd
	output *tailBuffer
	exited chan struct{}
}

// start runs cmd and waits until ready reports true (polled every 10 ms),
// the process exits, or startTimeout passes. It returns false with the
// process's output when the process exited early (a port race, usually).
// The process gets death (on Linux) when the test process ends, however it
// ends: SIGKILL, or what a server that forks workers stops them on.
func start(t testing.TB, cmd *exec.Cmd, death syscall.Signal, ready func() bool) (*process, bool, string) {
	t.Helper()
	p := &process{cmd: cmd, output: &tailBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.output, p.output
	setProcessGroup(cmd)
	dieWithTestBy(cmd, death)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", cmd.Path, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.exited:
			return nil, false, p.output.String()
		default:
		}
		if ready() {
			return p, true, ""
		}
		if time.Now().After(deadline) {
			p.stop()
			t.Fatalf("testenv: %s did not answer within %v; output:\n%s", cmd.Path, startTimeout, p.output.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop asks the process group to terminate, then kills it after 5 s.
func (p *process) stop() {
	signalGroup(p.cmd, false)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		signalGroup(p.cmd, true)
		<-p.exited
	}
}

// StartRedis starts a private redis-server on a free loopback port, with
// persistence off and its working directory under t.TempDir(), waits until
// it answers PING, and stops it when the test ends. It returns the server's
// address, "127.0.0.1:PORT" (for go-redis: redis.Options{Addr: addr}).
func StartRedis(t testing.TB) (addr string) {
	t.Helper()
	bin := lookBinary(t, "redis-server", RedisServerPath)
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
		p, ok, out := start(t, cmd, syscall.SIGKILL, func() bool { return redisPing(addr) })
		if ok {
			t.Cleanup(p.stop)
			return addr
		}
		if attempt == 2 {
			t.Fatalf("testenv: redis-server exited before answering on %s; output:\n%s", addr, out)
		}
	}
}

// redisPing reports whether a Redis server answers PING at addr.
func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Placeholders StartNginx substitutes in the configuration it is given.
const (
	// PortPlaceholder becomes the free loopback port nginx must listen on:
	// write "listen 127.0.0.1:{{PORT}};".
	PortPlaceholder = "{{PORT}}"
	// PrefixPlaceholder becomes nginx's prefix directory (absolute, no
	// trailing slash), where the configuration, logs, pid file, temp
	// directories and any file the test writes live.
	PrefixPlaceholder = "{{PREFIX}}"
)

// tempPathDirectives sets every temp path under the prefix, so that nginx
// never touches its compiled-in /var/lib/nginx (unwritable when not root).
const tempPathDirectives = `
    client_body_temp_path {{PREFIX}}/tmp/body;
    proxy_temp_path {{PREFIX}}/tmp/proxy;
    fastcgi_temp_path {{PREFIX}}/tmp/fastcgi;
    uwsgi_temp_path {{PREFIX}}/tmp/uwsgi;
    scgi_temp_path {{PREFIX}}/tmp/scgi;
`

// StartNginx starts a private nginx with the configuration conf, a
// template in which StartNginx replaces {{PORT}} with a free loopback port
// and {{PREFIX}} with the prefix directory, a fresh directory under
// t.TempDir(). It waits until the port accepts connections, stops nginx
// when the test ends, and returns "http://127.0.0.1:PORT".
//
// conf is a whole nginx.conf: it needs an events block and an http block
// with a server listening on 127.0.0.1:{{PORT}}. nginx runs in the
// foreground (`-p PREFIX -c PREFIX/nginx.conf -e stderr -g 'daemon off;
// pid PREFIX/nginx.pid;'`), so conf must not set daemon or pid. Unless conf
// sets client_body_temp_path itself, the temp paths are set under the
// prefix right after "http {". Access and error logs default to
// PREFIX/logs. When the tests run as root, nginx's workers drop privileges
// to nobody, so the prefix is made world-readable; files a test adds there
// must be readable too (0644). A `user` directive is honoured by nginx only
// when running as root, so leave it out.
func StartNginx(t testing.TB, conf string) (url string) {
	t.Helper()
	url, _ = startNginx(t, conf)
	return url
}

// nginxDeathSignal is what nginx's master gets when the test process ends
// before stopping it: SIGTERM, on which it stops its workers too (a SIGKILL
// would leave them serving). TestDieWithTest's control sets SIGKILL.
var nginxDeathSignal = syscall.SIGTERM

// startNginx is StartNginx, also returning the started master process.
func startNginx(t testing.TB, conf string) (url string, master *process) {
	t.Helper()
	bin := lookBinary(t, "nginx", NginxPath)
	prefix := t.TempDir()
	// t.TempDir makes 0700 directories; workers (nobody) must traverse
	// every directory from the system temp dir down to the prefix.
	for d := prefix; d != os.TempDir() && d != filepath.Dir(d); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	for _, sub := range []string{"logs", "tmp", "html"} {
		if err := os.MkdirAll(filepath.Join(prefix, sub), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	if !strings.Contains(conf, "client_body_temp_path") {
		if i := strings.Index(conf, "http {"); i >= 0 {
			i += len("http {")
			conf = conf[:i] + tempPathDirectives + conf[i:]
		}
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		text := strings.ReplaceAll(conf, PortPlaceholder, strconv.Itoa(port))
		text = strings.ReplaceAll(text, PrefixPlaceholder, prefix)
		confPath := filepath.Join(prefix, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(text), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "-p", prefix+"/", "-c", confPath, "-e", "stderr",
			"-g", "daemon off; pid "+filepath.Join(prefix, "nginx.pid")+";")
		p, ok, out := start(t, cmd, nginxDeathSignal, func() bool { return tcpAnswers(addr) })
		if ok {
			t.Cleanup(p.stop)
			return "http://" + addr, p
		}
		if attempt == 2 || !strings.Contains(out, "Address already in use") {
			t.Fatalf("testenv: nginx exited before answering on %s; output:\n%s", addr, out)
		}
	}
}

// tcpAnswers reports whether addr accepts a TCP connection.
func tcpAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
