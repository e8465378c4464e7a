package cli

import (
	"embed"
	"strings"
)

// help holds the long help and the examples of each command, as text
// (help/NAME.txt: the long help, then the examples after a line
// "-- examples --"); TestHelpGolden pins what --help prints.
//
//go:embed help/*.txt
var help embed.FS

// helpParts returns the long help and the examples of command name.
func helpParts(name string) (long, example string) {
	b, err := help.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic("cli: no help for " + name) // a bug every --help test finds
	}
	long, example, _ = strings.Cut(string(b), "\n-- examples --\n")
	return strings.TrimRight(long, "\n"), strings.TrimRight(example, "\n")
}

func helpLong(name string) string    { l, _ := helpParts(name); return l }
func helpExample(name string) string { _, e := helpParts(name); return e }
