package report

import (
	"bytes"
	"testing"
)

// TestGolden pins the table, JSON, JUnit and Markdown renderings of the
// scenarios (go test ./report -update rewrites them).
func TestGolden(t *testing.T) {
	formats := []struct {
		format Format
		ext    string
	}{
		{FormatTable, "txt"}, {FormatJSON, "json"}, {FormatJUnit, "xml"}, {FormatMarkdown, "md"},
	}
	for i, sc := range scenarios {
		in := loadScenario(t, i)
		for _, f := range formats {
			t.Run(sc.name+"/"+string(f.format), func(t *testing.T) {
				var b bytes.Buffer
				if err := Render(&b, f.format, in, TableOptions{Width: 100}); err != nil {
					t.Fatal(err)
				}
				golden(t, sc.name+"."+f.ext, b.Bytes())
			})
		}
	}
}

// TestGoldenHTML pins the HTML page of the merged scenario (two verdicts,
// findings, an inference, two clients, window edges and Retry-After
// claims): the template, its escaping and the SVG geometry together.
func TestGoldenHTML(t *testing.T) {
	for i, sc := range scenarios {
		if sc.name != "merged" {
			continue
		}
		var b bytes.Buffer
		if err := HTML(&b, loadScenario(t, i)); err != nil {
			t.Fatal(err)
		}
		golden(t, sc.name+".html", b.Bytes())
	}
}
