package infer

import (
	"os"
	"testing"
)

func TestTmpTrace(t *testing.T) {
	name := os.Getenv("CELL")
	for _, c := range behaviourCells() {
		if c.name != name {
			continue
		}
		debugf = t.Logf
		defer func() { debugf = nil }()
		inf := inferCell(t, c.cfg, nil)
		t.Log("note:", inf.Note)
	}
}
