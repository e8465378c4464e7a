package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/report"
)

func TestOutputFlags(t *testing.T) {
	var o outputOptions
	cmd := &cobra.Command{Use: "x"}
	addOutputFlags(cmd, &o)
	if err := cmd.ParseFlags([]string{"--html", "a.html", "--junit", "b.xml", "--markdown", "c.md"}); err != nil {
		t.Fatal(err)
	}
	if o != (outputOptions{report.Files{HTML: "a.html", JUnit: "b.xml", Markdown: "c.md"}}) {
		t.Errorf("flags filled %+v", o)
	}
}

// TestOutputWrite: each requested file is written; the Markdown summary is
// appended to $GITHUB_STEP_SUMMARY, read through the injected environment,
// even without --markdown; "-" is stdout.
func TestOutputWrite(t *testing.T) {
	dir := t.TempDir()
	in, err := report.ReadFiles(writeReportRun(t, dir, "run.jsonl", true))
	if err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.md")
	if err := os.WriteFile(summary, []byte("earlier step"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, out, _ := testFactory(map[string]string{"GITHUB_STEP_SUMMARY": summary})
	o := outputOptions{report.Files{HTML: filepath.Join(dir, "r.html"), JUnit: "-"}}
	if !o.wanted(f) {
		t.Error("wanted() = false with files requested")
	}
	if err := o.write(f, in); err != nil {
		t.Fatal(err)
	}
	if in.Tool != "rlprobe v0.0.0-test" {
		t.Errorf("Tool = %q, want the factory's version", in.Tool)
	}
	html, err := os.ReadFile(o.HTML)
	if err != nil || !strings.HasPrefix(string(html), "<!DOCTYPE html>") {
		t.Errorf("--html file: %v, %.30q", err, html)
	}
	if !strings.HasPrefix(out.String(), "<?xml") {
		t.Errorf("--junit - wrote %.30q to stdout", out.String())
	}
	if err := o.write(f, in); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(summary)
	if !strings.HasPrefix(string(got), "earlier step\n### ❌ rlprobe: FAIL") || strings.Count(string(got), "### ") != 2 {
		t.Errorf("step summary not appended to, twice:\n%s", got)
	}

	// Nothing requested, no step summary: nothing written.
	f, out, _ = testFactory(nil)
	var none outputOptions
	if none.wanted(f) {
		t.Error("wanted() = true with nothing requested")
	}
	if err := none.write(f, in); err != nil || out.Len() != 0 {
		t.Errorf("write() with nothing requested: %v, %q", err, out.String())
	}
}

func TestOutputWriteErrors(t *testing.T) {
	dir := t.TempDir()
	in, err := report.ReadFiles(writeReportRun(t, dir, "run.jsonl", false))
	if err != nil {
		t.Fatal(err)
	}
	f, _, errOut := testFactory(map[string]string{"GITHUB_STEP_SUMMARY": filepath.Join(dir, "no", "such.md")})
	o := outputOptions{report.Files{Markdown: filepath.Join(dir, "ok.md")}}
	if err := o.write(f, in); err != nil {
		t.Errorf("an unwritable step summary is fatal: %v", err)
	}
	if !strings.Contains(errOut.String(), "warning: $GITHUB_STEP_SUMMARY") {
		t.Errorf("no warning about the step summary: %q", errOut.String())
	}
	o = outputOptions{report.Files{JUnit: filepath.Join(dir, "no", "such.xml")}}
	if err := o.write(f, in); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--junit") {
		t.Errorf("unwritable --junit: %v (exit %d), want exit 2 naming the flag", err, ExitCode(err))
	}
}
