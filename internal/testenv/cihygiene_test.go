package testenv

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCIInstallLeavesOthersAlone: a process named prometheus that the
// install step of .ci/run did not start (a copy of sleep, renamed) is
// still running after the step. The step runs alone (.ci/run
// --install-only) and only where it reinstalls nothing: every package it
// installs is installed already. Elsewhere (not root, not Debian, a
// package missing) the test skips, except under CI=true, where CI has just
// installed them and the test fails instead.
func TestCIInstallLeavesOthersAlone(t *testing.T) {
	skip := func(format string, a ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format+" (CI=true)", a...)
		}
		t.Skipf(format, a...)
	}
	if os.Geteuid() != 0 {
		skip("not root: .ci/run's install step is for a root CI machine")
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		skip("not Debian: no dpkg-query")
	}
	script, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*pkgs=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal(".ci/run names no pkgs=(...)")
	}
	for _, p := range strings.Fields(string(m[1])) {
		out, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if !strings.Contains(string(out), "install ok installed") {
			skip("%s is not installed: the install step would install it", p)
		}
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	decoy := filepath.Join(t.TempDir(), "prometheus")
	copyFile(t, sleep, decoy)
	cmd := exec.Command(decoy, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // ours, by pid
		<-exited
	})
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); len(comm) > 0 && strings.TrimSpace(string(comm)) != "prometheus" {
		t.Fatalf("the decoy is named %q, not prometheus", strings.TrimSpace(string(comm)))
	}
	install := exec.Command("bash", "../../.ci/run", "--install-only")
	install.Env = append(os.Environ(), "CI=true")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf(".ci/run --install-only: %v\n%s", err, out)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("the install step stopped a prometheus it did not start (pid %d): %v", cmd.Process.Pid, err)
	case <-time.After(200 * time.Millisecond):
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
