package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocs generates the man and Markdown pages from the command tree: a
// page per visible command, completion included, each with its flags.
func TestDocs(t *testing.T) {
	dir := t.TempDir()
	man, md := filepath.Join(dir, "man"), filepath.Join(dir, "md", "cli")
	code, out, errOut := runCLI(t, map[string]string{"SOURCE_DATE_EPOCH": "1767225600"}, "docs", "--man", man, "--markdown", md)
	if code != 0 || out != "" {
		t.Fatalf("rlprobe docs: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "man pages in "+man) || !strings.Contains(errOut, "Markdown pages in "+md) {
		t.Errorf("stderr %q does not say where the pages went", errOut)
	}
	names := func(d string) []string {
		es, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return n
	}
	gotMan, gotMD := names(man), names(md)
	for _, want := range []string{"rlprobe.1", "rlprobe-run.1", "rlprobe-check.1", "rlprobe-serve.1", "rlprobe-docs.1",
		"rlprobe-completion.1", "rlprobe-completion-bash.1", "rlprobe-completion-zsh.1", "rlprobe-completion-fish.1"} {
		if !slices.Contains(gotMan, want) {
			t.Errorf("man pages %v lack %s", gotMan, want)
		}
	}
	for _, want := range []string{"rlprobe.md", "rlprobe_run.md", "rlprobe_check.md", "rlprobe_completion_zsh.md", "rlprobe_docs.md"} {
		if !slices.Contains(gotMD, want) {
			t.Errorf("Markdown pages %v lack %s", gotMD, want)
		}
	}
	page, err := os.ReadFile(filepath.Join(man, "rlprobe-run.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "RLPROBE" "1" "Jan 2026" "rlprobe v0.0.0-test" "rlprobe manual"`, `\fB--max-requests\fP=10000`, `\fBrlprobe(1)\fP`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("rlprobe-run.1 lacks %q:\n%s", want, page)
		}
	}
	mdPage, err := os.ReadFile(filepath.Join(md, "rlprobe_run.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mdPage), "--max-requests") || strings.Contains(string(mdPage), "Auto generated") {
		t.Errorf("rlprobe_run.md: want the flags and no generation stamp:\n%s", mdPage)
	}
}

// TestDocsUsage: docs needs somewhere to write.
func TestDocsUsage(t *testing.T) {
	for _, args := range [][]string{{"docs"}, {"docs", "extra"}, {"docs", "--man", t.TempDir(), "extra"}} {
		if code, _, errOut := runCLI(t, nil, args...); code != ExitUsage {
			t.Errorf("rlprobe %v: exit %d, want %d (stderr %q)", args, code, ExitUsage, errOut)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, nil, "docs", "--man", file); code != ExitUsage || !strings.Contains(errOut, "docs:") {
		t.Errorf("rlprobe docs --man FILE: exit %d, stderr %q; want a usage error", code, errOut)
	}
	if code, _, _ := runCLI(t, map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, "docs", "--man", t.TempDir()); code != ExitUsage {
		t.Errorf("bad SOURCE_DATE_EPOCH: exit %d, want %d", code, ExitUsage)
	}
}

// TestCompletionExposed: cobra's completion command, which the README tells
// users to install, is there for bash, zsh and fish.
func TestCompletionExposed(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "bash completion V2 for rlprobe", "zsh": "#compdef rlprobe", "fish": "fish completion for rlprobe",
	} {
		code, out, errOut := runCLI(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("rlprobe completion %s: exit %d, stderr %q, script lacks %q", shell, code, errOut, want)
		}
	}
}
