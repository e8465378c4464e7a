package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/rlprobe/rlprobe/testserver"
	"github.com/rlprobe/rlprobe/verify"
)

// The docs cannot drift from the flags: every example file parses as what
// it is, and every `rlprobe …` command line found in examples/, README.md,
// the Dockerfile and docker-compose.yml goes through the CLI's own flag
// parsing and argument validation (nothing is executed).

// docRepoRoot is the module root, seen from internal/cli.
const docRepoRoot = "../.."

// docCommand is one rlprobe command line found in a document.
type docCommand struct {
	where string // file:line
	args  []string
}

func (c docCommand) String() string {
	return c.where + ": rlprobe " + strings.Join(c.args, " ")
}

// docCommandStart finds an rlprobe invocation in a line: the program (rlprobe,
// a path ending in /rlprobe, or `go run ./cmd/rlprobe`) followed by a word.
var docCommandStart = regexp.MustCompile(`(?:^|[\s;&|(` + "`" + `])(?:go run \./cmd/rlprobe|(?:[\w./-]*/)?rlprobe)\s+(\S+)`)

// docCommands extracts the rlprobe command lines of text: lines joined at
// a trailing backslash, comment markers and prompts ignored; a command runs
// from the program to the end of the line or the first unquoted shell
// operator (| ; & > <). In Markdown (name ending in .md) only fenced code
// blocks and inline code spans count, and a span may run over the lines of
// its paragraph. Only a program followed by a subcommand of root (or a
// flag) counts, so prose such as "rlprobe's tests" or `docker run rlprobe
// ...` is skipped.
func docCommands(t *testing.T, root *cobra.Command, name, text string) []docCommand {
	t.Helper()
	subs := map[string]bool{}
	for _, c := range root.Commands() {
		subs[c.Name()] = true
	}
	var out []docCommand
	scan := func(line int, span string) {
		for _, m := range docCommandStart.FindAllStringSubmatchIndex(span, -1) {
			word := span[m[2]:m[3]]
			if !subs[word] && !strings.HasPrefix(word, "-") {
				continue
			}
			args, err := docShellWords(span[m[2]:])
			if err != nil {
				t.Errorf("%s:%d: %v in %q", name, line, err, span)
				continue
			}
			out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, line), args: args})
		}
	}
	lines := strings.Split(text, "\n")
	markdown := strings.HasSuffix(name, ".md")
	fenced := false
	para, paraLine := "", 0
	flush := func() {
		parts := strings.Split(para, "`")
		for i := 1; i < len(parts); i += 2 {
			scan(paraLine, parts[i])
		}
		para = ""
	}
	for i := 0; i < len(lines); i++ {
		if markdown && strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			flush()
			fenced = !fenced
			continue
		}
		if markdown && !fenced {
			switch {
			case strings.TrimSpace(lines[i]) == "":
				flush()
			case para == "":
				para, paraLine = lines[i], i+1
			default:
				para += " " + strings.TrimSpace(lines[i])
			}
			continue
		}
		first := i
		line := docStripComment(lines[i])
		for strings.HasSuffix(strings.TrimSpace(line), `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(strings.TrimSpace(line), `\`) + " " + docStripComment(lines[i])
		}
		if markdown || !strings.Contains(line, "`") {
			scan(first+1, line)
			continue
		}
		parts := strings.Split(line, "`")
		for k := 1; k < len(parts); k += 2 {
			scan(first+1, parts[k])
		}
	}
	flush()
	return out
}

// docStripComment removes a leading comment marker (#, //) and whitespace.
func docStripComment(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{"#", "//"} {
		s = strings.TrimSpace(strings.TrimPrefix(s, p))
	}
	return s
}

// docShellWords splits a command line as a POSIX shell would (single and
// double quotes, backslash escapes), stopping at the first unquoted
// operator or comment. Variables are kept literally.
func docShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.IndexByte("|;&<>", c) >= 0, c == '#' && !inWord:
			i = len(s)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// docValidate runs args through the command tree's flag parsing and
// argument validation, as cobra would before executing, and executes
// nothing.
func docValidate(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	if cmd == root {
		cmd.InitDefaultVersionFlag()
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return err
	}
	return cmd.ValidateFlagGroups()
}

// docRoot builds a fresh command tree (flags keep their parsed values,
// so every command line gets its own).
func docRoot() *cobra.Command {
	f, _, _ := testFactory(nil)
	return NewRootCmd(f)
}

// docReadFile reads a file relative to the module root.
func docReadFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docRepoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docYAML decodes every document of a YAML stream into generic values.
func docYAML(t *testing.T, name, text string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docs = append(docs, d)
	}
}

// strings of a YAML sequence; nil when v is not one.
func docYAMLStrings(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range list {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// docExampleChecks parses each file of examples/ as what it is; a new
// file with no entry here fails the test, so it gets one.
var docExampleChecks = map[string]func(t *testing.T, name, text string) []docCommand{
	"nginx.conf": func(t *testing.T, name, text string) []docCommand {
		if n := strings.Count(text, nginxListen); n != 1 {
			t.Errorf("%s: %q appears %d times; the nginx tests template exactly one", name, nginxListen, n)
		}
		if strings.Count(text, "{") != strings.Count(text, "}") {
			t.Errorf("%s: unbalanced braces", name)
		}
		for _, loc := range []string{"location = / ", "location = /trap ", "location = /queue ", "location = /delay ", "location = /429 ", "location = /retry-after "} {
			if !strings.Contains(text, loc) {
				t.Errorf("%s: no %q (the README and the nginx tests use it)", name, strings.TrimSpace(loc))
			}
		}
		return nil
	},
	"policy.yaml": func(t *testing.T, name, text string) []docCommand {
		p, err := verify.ParsePolicyFile([]byte(text), name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if len(p.Endpoints) < 2 {
			t.Errorf("%s: %d endpoints, want several", name, len(p.Endpoints))
		}
		return nil
	},
	"serve-routes.yaml": func(t *testing.T, name, text string) []docCommand {
		routes, err := testserver.LoadConfig(name, strings.NewReader(text))
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		// The routes stand in for the policy: same paths.
		p, err := verify.ParsePolicyFile([]byte(docReadFile(t, "examples/policy.yaml")), "policy.yaml")
		if err != nil {
			return nil
		}
		var rp, pp []string
		for _, r := range routes {
			rp = append(rp, r.Path)
		}
		for _, e := range p.Endpoints {
			pp = append(pp, e.Path)
		}
		slices.Sort(rp)
		slices.Sort(pp)
		if !slices.Equal(rp, pp) {
			t.Errorf("%s serves %v, but policy.yaml declares %v", name, rp, pp)
		}
		return nil
	},
	"github-actions.yml": func(t *testing.T, name, text string) []docCommand {
		docs := docYAML(t, name, text)
		if len(docs) != 1 || docs[0]["jobs"] == nil || docs[0]["on"] == nil {
			t.Errorf("%s: not a workflow (no on: or jobs:)", name)
		}
		for _, want := range []string{"rlprobe check", "--junit", "GITHUB_STEP_SUMMARY", "actions/upload-artifact"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: no %q: the CI gate runs check, uploads JUnit and writes the step summary", name, want)
			}
		}
		return nil
	},
	"prometheus-rules.yml": func(t *testing.T, name, text string) []docCommand {
		// promtool validates the rules in the watch package's tests.
		docs := docYAML(t, name, text)
		if len(docs) != 1 || docs[0]["groups"] == nil {
			t.Errorf("%s: not a Prometheus rule file (no groups:)", name)
		}
		return nil
	},
	"k8s-watch.yaml": func(t *testing.T, name, text string) []docCommand {
		var cmds []docCommand
		for i, d := range docYAML(t, name, text) {
			if kind, _ := d["kind"].(string); kind != "Deployment" {
				t.Errorf("%s: document %d is a %v, want the Deployment", name, i+1, d["kind"])
				continue
			}
			spec, _ := d["spec"].(map[string]any)
			tmpl, _ := spec["template"].(map[string]any)
			pod, _ := tmpl["spec"].(map[string]any)
			containers, _ := pod["containers"].([]any)
			for _, c := range containers {
				cm, _ := c.(map[string]any)
				args := docYAMLStrings(cm["args"])
				if len(args) == 0 || args[0] != "watch" {
					t.Errorf("%s: container %v does not run watch", name, cm["name"])
					continue
				}
				cmds = append(cmds, docCommand{where: fmt.Sprintf("%s: container %v", name, cm["name"]), args: args})
			}
		}
		return cmds
	},
	"k8s-job.yaml": func(t *testing.T, name, text string) []docCommand {
		var cmds []docCommand
		kinds := map[string]bool{}
		for i, d := range docYAML(t, name, text) {
			kind, _ := d["kind"].(string)
			kinds[kind] = true
			if kind != "Job" {
				continue
			}
			spec, _ := d["spec"].(map[string]any)
			if spec["completionMode"] != "Indexed" {
				t.Errorf("%s: the Job is not an Indexed Job", name)
			}
			tmpl, _ := spec["template"].(map[string]any)
			pod, _ := tmpl["spec"].(map[string]any)
			containers, _ := pod["containers"].([]any)
			for _, c := range containers {
				cm, _ := c.(map[string]any)
				args := docYAMLStrings(cm["args"])
				if len(args) == 0 {
					t.Errorf("%s: container %v has no args", name, cm["name"])
					continue
				}
				if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--start-at") }) {
					t.Errorf("%s: the agents do not share a --start-at", name)
				}
				cmds = append(cmds, docCommand{where: fmt.Sprintf("%s: document %d, container %v", name, i+1, cm["name"]), args: args})
			}
		}
		if !kinds["Job"] {
			t.Errorf("%s: no Job", name)
		}
		return cmds
	},
}

// nginxListen is the listen directive of examples/nginx.conf that the
// nginx tests replace with a free port.
const nginxListen = "listen 127.0.0.1:8080;"

// docComposeCommands returns the rlprobe command of each docker-compose.yml
// service built from this repository's Dockerfile.
func docComposeCommands(t *testing.T, text string) []docCommand {
	docs := docYAML(t, "docker-compose.yml", text)
	if len(docs) != 1 {
		t.Fatalf("docker-compose.yml: %d documents", len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	var cmds []docCommand
	for name, s := range services {
		sm, _ := s.(map[string]any)
		if sm["build"] == nil {
			continue
		}
		if args := docYAMLStrings(sm["command"]); len(args) > 0 {
			cmds = append(cmds, docCommand{where: "docker-compose.yml: service " + name, args: args})
		}
	}
	return cmds
}

func TestExamplesParseAndTheirCommandsValidate(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(docRepoRoot, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []docCommand
	perFile := map[string]int{}
	for _, e := range entries {
		name := "examples/" + e.Name()
		check, ok := docExampleChecks[e.Name()]
		if !ok {
			t.Errorf("%s: no parser for this example in examples_test.go: add one", name)
			continue
		}
		text := docReadFile(t, name)
		found := append(check(t, name, text), docCommands(t, docRoot(), name, text)...)
		perFile[name] = len(found)
		cmds = append(cmds, found...)
	}
	for _, name := range []string{"README.md", "Dockerfile", "docker-compose.yml"} {
		text := docReadFile(t, name)
		found := docCommands(t, docRoot(), name, text)
		if name == "docker-compose.yml" {
			found = append(found, docComposeCommands(t, text)...)
		}
		perFile[name] = len(found)
		cmds = append(cmds, found...)
	}
	// Each of these documents shows commands; finding none would mean the
	// extraction broke, not that they are right.
	for name, least := range map[string]int{
		"README.md": 30, "docker-compose.yml": 8, "Dockerfile": 2,
		"examples/github-actions.yml": 2, "examples/k8s-job.yaml": 2, "examples/policy.yaml": 2,
	} {
		if perFile[name] < least {
			t.Errorf("%s: found %d rlprobe command lines, expected at least %d", name, perFile[name], least)
		}
	}
	for _, c := range cmds {
		if err := docValidate(docRoot(), c.args); err != nil {
			t.Errorf("%v\n\t%v", c, err)
		}
	}
	t.Logf("%d command lines validated: %v", len(cmds), perFile)
}

// TestDocCommandExtraction pins the extraction rules, and that the
// validator rejects what the CLI would.
func TestDocCommandExtraction(t *testing.T) {
	text := strings.Join([]string{
		"# rlprobe's tests start nginx",                           // prose: skipped
		"$ rlprobe run http://127.0.0.1:8080/ --pattern burst \\", // prompt, continuation
		"    --count 8 | tee out.txt",                             // pipe ends it
		"# Run `rlprobe check URL --rate 1/s --burst 3` and `rlprobe infer URL`.",
		"docker run --rm rlprobe serve --listen 0.0.0.0:8080 --public", // image named rlprobe
		"docker-compose run --rm rlprobe ...",                          // not a subcommand: skipped
		`go run ./cmd/rlprobe analyze a.jsonl --policy '"api";q=5;w=2' # comment`,
		`/usr/local/bin/rlprobe --version`,
	}, "\n")
	got := docCommands(t, docRoot(), "t.yml", text)
	want := []string{
		"t.yml:2: rlprobe run http://127.0.0.1:8080/ --pattern burst --count 8",
		"t.yml:4: rlprobe check URL --rate 1/s --burst 3",
		"t.yml:4: rlprobe infer URL",
		"t.yml:5: rlprobe serve --listen 0.0.0.0:8080 --public",
		`t.yml:7: rlprobe analyze a.jsonl --policy "api";q=5;w=2`,
		"t.yml:8: rlprobe --version",
	}
	// Markdown: fenced blocks line by line, code spans across the lines
	// of a paragraph, plain prose ignored.
	md := strings.Join([]string{
		"Plain prose: rlprobe run is not a command here.", // 1
		"",
		"Run `rlprobe check URL --limit", // 3: a span over two lines
		"5 --window 2s` to judge it.",
		"",
		"```sh",
		"rlprobe demo",      // 7
		"# rlprobe version", // 8: a shell comment, still a command line
		"```",
	}, "\n")
	got = append(got, docCommands(t, docRoot(), "t.md", md)...)
	want = append(want,
		"t.md:3: rlprobe check URL --limit 5 --window 2s",
		"t.md:7: rlprobe demo",
		"t.md:8: rlprobe version",
	)
	var gotS []string
	for _, c := range got {
		gotS = append(gotS, c.String())
	}
	if !slices.Equal(gotS, want) {
		t.Fatalf("extracted:\n  %s\nwant:\n  %s", strings.Join(gotS, "\n  "), strings.Join(want, "\n  "))
	}
	for _, c := range got {
		if err := docValidate(docRoot(), c.args); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"run", "http://x/", "--no-such-flag"}, "unknown flag"},
		{[]string{"run", "http://x/", "--count", "eight"}, "invalid argument"},
		{[]string{"serve", "--rate", "fast"}, "invalid argument"},
		{[]string{"no-such-command"}, "unknown command"},
		{[]string{"version", "extra"}, "unknown command"},
	}
	for _, b := range bad {
		err := docValidate(docRoot(), b.args)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("docValidate(%q) = %v, want an error containing %q", b.args, err, b.want)
		}
	}
}

// TestShellWords pins the quoting rules of the extraction.
func TestDocShellWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`a b  c`, []string{"a", "b", "c"}},
		{`-H "Authorization: Bearer $TOKEN" x`, []string{"-H", "Authorization: Bearer $TOKEN", "x"}},
		{`--policy '"api";q=5;w=2'`, []string{"--policy", `"api";q=5;w=2`}},
		{`a\ b c`, []string{"a b", "c"}},
		{`run x > out.txt`, []string{"run", "x"}},
		{`run x 2>&1`, []string{"run", "x", "2"}},
		{`run x & echo`, []string{"run", "x"}},
		{`run x # note`, []string{"run", "x"}},
		{`run a#b`, []string{"run", "a#b"}},
		{`"say \"hi\""`, []string{`say "hi"`}},
	}
	for _, tt := range tests {
		got, err := docShellWords(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("docShellWords(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := docShellWords(`'open`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}

// TestComposeFilePortsAndCommands guards the compose file's types: every
// command of a service is a list of strings (a bare `--flag=x:` would be a
// map) and every published port is bound to loopback.
func TestComposeFilePortsAndCommands(t *testing.T) {
	docs := docYAML(t, "docker-compose.yml", docReadFile(t, "docker-compose.yml"))
	services, _ := docs[0]["services"].(map[string]any)
	if len(services) < 6 {
		t.Fatalf("docker-compose.yml: %d services, want nginx, redis and four replicas at least", len(services))
	}
	for name, s := range services {
		sm, _ := s.(map[string]any)
		if cmd, ok := sm["command"].([]any); ok {
			for _, c := range cmd {
				if _, ok := c.(string); !ok {
					b, _ := json.Marshal(c)
					t.Errorf("service %s: command item %s is not a string (quote it)", name, b)
				}
			}
		}
		for _, p := range docYAMLStrings(sm["ports"]) {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s: port %q is not bound to 127.0.0.1", name, p)
			}
		}
	}
	if !bytes.Contains([]byte(docReadFile(t, "docker-compose.yml")), []byte("./examples/nginx.conf:")) {
		t.Error("docker-compose.yml: nginx does not mount examples/nginx.conf")
	}
}

// TestComposeConfig validates docker-compose.yml with docker-compose itself
// (Debian's 1.29: `config` needs no Docker engine). Without docker-compose
// the test is skipped, except under CI=true, where it fails: CI installs it.
func TestComposeConfig(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("docker-compose not found (CI=true: apt-get install docker-compose)")
		}
		t.Skip("docker-compose not found")
	}
	cmd := exec.Command(bin, "-f", "docker-compose.yml", "config", "-q")
	cmd.Dir = docRepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
}

// TestReadmeTestCommand: CI runs the README's test command, so the README
// states it verbatim under its Tests heading, and the two commands of a
// fresh machine are there.
func TestReadmeTestCommand(t *testing.T) {
	readme := docReadFile(t, "README.md")
	_, tests, ok := strings.Cut(readme, "\n## Tests\n")
	if !ok {
		t.Fatal("README.md has no \"## Tests\" section")
	}
	if next := strings.Index(tests, "\n## "); next >= 0 {
		tests = tests[:next]
	}
	// The command .ci/run runs is the one the README states.
	var ciCmd string
	for _, line := range strings.Split(docReadFile(t, ".ci/run"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "go test ") {
			ciCmd = strings.TrimSpace(line)
		}
	}
	if ciCmd == "" {
		t.Fatal(".ci/run has no `go test` line")
	}
	if !strings.Contains(tests, "```sh\n"+ciCmd+"\n```") {
		t.Errorf("README.md's Tests section does not state .ci/run's `%s` in a sh block:\n%s", ciCmd, tests)
	}
	if !strings.Contains(readme, "<!-- ci -->\n```sh\ngo run ./cmd/rlprobe demo\n```") {
		t.Error("README.md does not show `go run ./cmd/rlprobe demo` as a CI-run block")
	}
}
