package testenv

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
)

// ServeBinary starts `bin serve args... --listen 127.0.0.1:0` (a built
// rlprobe) and returns the URL its first line announces; the process is
// killed, by its pid, when the test ends (and with the test process, if
// that ends first: DieWithTest).
func ServeBinary(t testing.TB, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"serve"}, args...), "--listen", "127.0.0.1:0")...)
	DieWithTest(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("serve %v: no first line: %v", args, err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("serve %v: first line %q", args, line)
	}
	return url
}
