package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of the record directory's rotation.
const (
	DefaultKeep      = 288     // a day of cycles every 5 minutes
	DefaultKeepBytes = 1 << 30 // 1 GiB
)

// recordPrefix starts the name of every cycle's record file; rotation
// removes only such files.
const recordPrefix = "rlprobe-watch-"

// Dir holds one record file per cycle and rotates them: at most Keep files
// and KeepBytes bytes are kept, the oldest removed first (never the newest
// one). Files not named by watch are never touched.
type Dir struct {
	Path      string
	Keep      int
	KeepBytes int64
}

// File returns the path of cycle n's record file, started at t.
func (d Dir) File(t time.Time, n int) string {
	return filepath.Join(d.Path, fmt.Sprintf("%s%s-c%06d.jsonl", recordPrefix, t.UTC().Format("20060102T150405.000000Z"), n))
}

// Rotate removes the oldest cycle files beyond Keep files or KeepBytes
// bytes and returns the paths it removed.
func (d Dir) Rotate() ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, fmt.Errorf("watch: rotate %s: %w", d.Path, err)
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), recordPrefix) || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), info.Size()})
	}
	// Names sort by start time, then cycle number.
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(b.name, a.name) }) // newest first
	var kept int
	var bytes int64
	var removed []string
	for i, f := range files {
		kept++
		bytes += f.size
		if i == 0 || (d.Keep <= 0 || kept <= d.Keep) && (d.KeepBytes <= 0 || bytes <= d.KeepBytes) {
			continue
		}
		p := filepath.Join(d.Path, f.name)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return removed, fmt.Errorf("watch: rotate: %w", err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
