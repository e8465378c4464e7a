package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlprobe/rlprobe/record"
)

// TestSecretQueryNeverWritten (issue 12, item 5): a target with
// ?api_key=S, and the same query on a target that refuses connections, go
// through run, check, analyze and report in every format; S appears in no
// file the commands wrote and on no stream — the error text of the refused
// target included — only its fingerprint does. With --no-default-secrets
// the value is written as it is.
func TestSecretQueryNeverWritten(t *testing.T) {
	t.Parallel() // real sockets and mostly waiting (under 5 % of a core): beside the long ones
	const secret = "S3cr3t-api-key-7781"
	const other = "s3ss10n-4455" // a second default name, spelled in upper case
	srv := refServer(t, "", nginxDemo(), nil)
	query := "/?api_key=" + secret + "&SESSION=" + other + "&page=1"
	good := srv.URL() + query
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + query
	l.Close()

	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	env := map[string]string{"GITHUB_STEP_SUMMARY": file("step-summary.md")}
	var streams []string
	step := func(wantCode int, args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, env, args...)
		if code != wantCode {
			t.Errorf("%s: exit %d, want %d; stderr: %s", strings.Join(args[:2], " "), code, wantCode, stderr)
		}
		streams = append(streams, fmt.Sprintf("%s stdout:\n%s", args[0], stdout), fmt.Sprintf("%s stderr:\n%s", args[0], stderr))
	}
	policy := []string{"--rate", "1r/s", "--burst", "3"}
	step(ExitOK, "run", good, "--pattern", "burst", "--count", "6", "--out", file("run.jsonl"))
	step(ExitOK, "run", good, "--pattern", "burst", "--count", "2", "--json", "--out", file("run-json.jsonl"),
		"--time-ref", refused) // a clock reference that refuses: a warning quoting its error
	step(ExitUnreachable, "run", refused, "--pattern", "burst", "--count", "2", "--out", file("refused.jsonl"))
	step(ExitUnreachable, "run", refused, "--pattern", "burst", "--count", "2", "--json", "--out", file("refused-json.jsonl"))
	step(ExitOK, append([]string{"check", good, "--only", "burst", "--out", file("check.jsonl"),
		"--html", file("check.html"), "--junit", file("check.xml"), "--markdown", file("check.md")}, policy...)...)
	step(ExitOK, append([]string{"check", good, "--only", "burst", "--json", "--out", file("check-json.jsonl")}, policy...)...)
	step(ExitUnreachable, append([]string{"check", refused, "--only", "burst", "--out", file("check-refused.jsonl")}, policy...)...)
	step(ExitUnreachable, append([]string{"check", refused, "--only", "burst", "--json", "--out", file("check-refused-json.jsonl")}, policy...)...)
	step(ExitOK, append([]string{"analyze", file("run.jsonl")}, policy...)...)
	step(ExitOK, append([]string{"analyze", file("run.jsonl"), "--json"}, policy...)...)
	inputs := []string{file("run.jsonl"), file("check.jsonl"), file("refused.jsonl")}
	for _, format := range []string{"table", "json", "junit", "markdown", "html"} {
		step(ExitOK, append(append([]string{"report"}, inputs...), "--format", format)...)
		step(ExitOK, append(append([]string{"report"}, inputs...), "--format", format, "-o", file("report."+format))...)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(file(e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		texts[e.Name()] = string(b)
	}
	if len(texts) < 15 {
		t.Errorf("only %d files written: %v", len(texts), texts)
	}
	for i, s := range streams {
		texts[fmt.Sprintf("stream %d (%s)", i, strings.SplitN(s, "\n", 2)[0])] = s
	}
	for name, text := range texts {
		for _, s := range []string{secret, other} {
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				t.Errorf("%s holds the secret %q: …%s…", name, s, text[max(0, i-120):min(len(text), i+40)])
			}
		}
	}
	// Not vacuous: the URLs are there, with fingerprints; the refused
	// target's error text is recorded.
	fp := record.Fingerprint(secret)
	for _, name := range []string{"run.jsonl", "refused.jsonl", "check.jsonl", "report.html", "report.json"} {
		if !strings.Contains(texts[name], "api_key="+fp) {
			t.Errorf("%s does not show the key's fingerprint", name)
		}
	}
	if !strings.Contains(texts["refused.jsonl"], `"err_msg"`) {
		t.Errorf("the refused run recorded no error text: %s", texts["refused.jsonl"])
	}

	// --no-default-secrets: the value is no secret to this user.
	code, _, stderr := runCLI(t, nil, "run", good, "--pattern", "burst", "--count", "1", "--no-default-secrets", "--secret-query", "session", "--out", file("plain.jsonl"))
	if code != ExitOK {
		t.Fatalf("--no-default-secrets: exit %d: %s", code, stderr)
	}
	plain, _ := os.ReadFile(file("plain.jsonl"))
	if !strings.Contains(string(plain), "api_key="+secret) || strings.Contains(string(plain), other) {
		t.Errorf("--no-default-secrets --secret-query session: want api_key written as it is and SESSION redacted: %s", plain)
	}
}
