package cli

import "io"

// printDryRun writes a session's dry-run document: with --json the
// document, else its text.
func printDryRun(f *Factory, g *GlobalOptions, doc interface{ WriteText(io.Writer) error }) error {
	if g.JSON {
		return writeJSON(f.IO.Out, doc)
	}
	return doc.WriteText(f.IO.Out)
}
