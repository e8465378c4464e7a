package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeGoSnippet: the Go block of the README's "As a Go library"
// section compiles against the library as it is. The block goes, wrapped
// in a function, into a test file of package session_test that exists only
// in a go vet overlay, so nothing is written into the tree.
func TestReadmeGoSnippet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	readme := docReadFile(t, "README.md")
	_, section, ok := strings.Cut(readme, "\n## As a Go library\n")
	if !ok {
		t.Fatal(`README.md has no "## As a Go library" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the library section has no ```go block")
	}
	block, _, _ = strings.Cut(block, "```")
	src := `package session_test

import (
	"context"
	"os"
	"time"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

var _, _, _ = os.Getenv, time.Now, verify.SeverityError

func readmeSnippet(ctx context.Context) error {
` + block + `	_, _ = rep, err
	return nil
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "snippet.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(docRepoRoot)
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{
		filepath.Join(root, "session", "zz_readme_snippet_test.go"): file}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "-overlay", ov, "./session")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the README's Go snippet does not compile (%v):\n%s\n--- snippet ---\n%s", err, out, src)
	}
}
