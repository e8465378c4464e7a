package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/units"
	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testFactory returns a Factory over buffers and a fixed environment.
func testFactory(env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	f := &Factory{
		IO:      IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		Getenv:  func(k string) string { return env[k] },
		Version: "v0.0.0-test",
	}
	return f, &out, &errOut
}

// runCLI runs the CLI in-process and returns exit code, stdout and stderr.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runCLIWith(t, func(f *Factory) { f.Getenv = func(k string) string { return env[k] } }, args...)
}

// runCLIWith runs the CLI in-process with a factory that hook adjusts
// (test seams such as ProbeOptions), without environment.
func runCLIWith(t *testing.T, hook func(*Factory), args ...string) (int, string, string) {
	t.Helper()
	f, out, errOut := testFactory(nil)
	if hook != nil {
		hook(f)
	}
	code := Run(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

// TestHelpGolden pins the command surface: the --help of every command.
func TestHelpGolden(t *testing.T) {
	f, _, _ := testFactory(nil)
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "completion" || c.Name() == "help" {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRootCmd(f))
	for _, p := range paths {
		name := "help/" + strings.Join(append([]string{"rlprobe"}, p...), "_") + ".golden"
		code, out, errOut := runCLI(t, nil, append(p, "--help")...)
		if code != 0 {
			t.Errorf("rlprobe %s --help: exit %d, stderr %q", strings.Join(p, " "), code, errOut)
		}
		golden(t, name, out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCLI(t, nil, args...)
		if code != 0 || !strings.Contains(out, "v0.0.0-test") {
			t.Errorf("rlprobe %v = %d, %q; want 0 and the version", args, code, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown flag", []string{"--bogus"}, ExitUsage},
		{"unknown command", []string{"frobnicate"}, ExitUsage},
		{"bad color", []string{"--color", "purple", "version"}, ExitUsage},
		{"extra arg", []string{"version", "x"}, ExitUsage},
		{"ok", []string{"version"}, ExitOK},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, nil, tt.args...)
		if code != tt.want {
			t.Errorf("%s: rlprobe %v = exit %d, want %d (stderr %q)", tt.name, tt.args, code, tt.want, errOut)
		}
		if code != 0 && !strings.HasPrefix(errOut, "rlprobe") {
			t.Errorf("%s: error message %q does not start with rlprobe", tt.name, errOut)
		}
	}
}

func TestPanicIsExit4(t *testing.T) {
	register(func(*Factory, *GlobalOptions) *cobra.Command {
		return &cobra.Command{Use: "boom", Hidden: true, RunE: func(*cobra.Command, []string) error { panic("kaboom") }}
	})
	defer func() { registered = registered[:len(registered)-1] }()
	code, _, errOut := runCLI(t, nil, "boom")
	if code != ExitInternal || !strings.Contains(errOut, "kaboom") || !strings.Contains(errOut, "report") {
		t.Errorf("panic: exit %d, stderr %q; want 4 and a request to report", code, errOut)
	}
}

func TestUseColor(t *testing.T) {
	tests := []struct {
		color string
		env   map[string]string
		tty   bool
		want  bool
	}{
		{"auto", nil, true, true},
		{"auto", nil, false, false},
		{"auto", map[string]string{"NO_COLOR": "1"}, true, false},
		{"auto", map[string]string{"FORCE_COLOR": "1"}, false, true},
		{"always", map[string]string{"NO_COLOR": "1"}, false, true},
		{"never", map[string]string{"FORCE_COLOR": "1"}, true, false},
	}
	for _, tt := range tests {
		f, _, _ := testFactory(tt.env)
		g := &GlobalOptions{Color: tt.color}
		if got := g.UseColor(f, tt.tty); got != tt.want {
			t.Errorf("UseColor(color=%s env=%v tty=%v) = %v, want %v", tt.color, tt.env, tt.tty, got, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"1.5s", "1.5s", ""},
		{"2m", "2m0s", ""},
		{"60", "", "no unit"},
		{"abc", "", "Go syntax"},
	}
	for _, tt := range tests {
		d, err := units.ParseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || d.String() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %s", tt.in, d, err, tt.want)
		}
	}
}
