package cli

import (
	"io"

	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/verify"
)

// printDryRun writes a session's dry-run document: with --json the
// document, else its text.
func printDryRun(f *Factory, g *GlobalOptions, doc interface{ WriteText(io.Writer) error }) error {
	if g.JSON {
		return writeJSON(f.IO.Out, doc)
	}
	return doc.WriteText(f.IO.Out)
}

// printCheckDryRun prints the suite's plan without sending anything.
func printCheckDryRun(f *Factory, g *GlobalOptions, sess *session.Session, p *verify.Policy, only, skip []string) error {
	doc := sess.CheckDryRun(p, only, skip)
	return printDryRun(f, g, &doc)
}
