package cli

import (
	"os"
	"testing"
)

// TestMain removes the binary the tests built (buildRlprobe) after them.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
