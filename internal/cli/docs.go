package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func init() {
	register(func(f *Factory, g *GlobalOptions) *cobra.Command { return NewCmdDocs(f, g, nil) })
}

// DocsOptions are the flags of `rlprobe docs`.
type DocsOptions struct {
	f           *Factory
	g           *GlobalOptions
	root        *cobra.Command
	ManDir      string
	MarkdownDir string
}

// NewCmdDocs builds `rlprobe docs`; runF (nil: the real one) runs it.
func NewCmdDocs(f *Factory, g *GlobalOptions, runF func(context.Context, *DocsOptions) error) *cobra.Command {
	o := &DocsOptions{f: f, g: g}
	cmd := &cobra.Command{
		Use:     "docs",
		Short:   "Write man pages or Markdown pages for every command, from the command tree",
		Long:    helpLong("docs"),
		Example: helpExample("docs"),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.ManDir == "" && o.MarkdownDir == "" {
				return Usagef("docs: say where: --man DIR, --markdown DIR or both")
			}
			o.root = cmd.Root()
			return runOr(runF, docsRun)(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.ManDir, "man", "", "write man pages (section 1) into `DIR`")
	fl.StringVar(&o.MarkdownDir, "markdown", "", "write Markdown pages into `DIR`")
	return cmd
}

// docsRun writes the pages of root's tree.
func docsRun(_ context.Context, o *DocsOptions) error {
	f, g, root := o.f, o.g, o.root
	date := time.Now()
	if s := f.Env("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Usagef("docs: SOURCE_DATE_EPOCH %q is not a Unix time in seconds", s)
		}
		date = time.Unix(sec, 0).UTC()
	}
	// Pages differ only when the commands do: no generation stamp.
	var quiet func(*cobra.Command)
	quiet = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, s := range c.Commands() {
			quiet(s)
		}
	}
	quiet(root)
	var written []string
	if o.ManDir != "" {
		if err := os.MkdirAll(o.ManDir, 0o755); err != nil {
			return UsageErr(fmt.Errorf("docs: %w", err))
		}
		hdr := &doc.GenManHeader{Title: "RLPROBE", Section: "1", Date: &date,
			Source: "rlprobe " + f.Version, Manual: "rlprobe manual"}
		if err := doc.GenManTree(root, hdr, o.ManDir); err != nil {
			return UsageErr(fmt.Errorf("docs: man pages: %w", err))
		}
		written = append(written, "man pages in "+o.ManDir)
	}
	if o.MarkdownDir != "" {
		if err := os.MkdirAll(o.MarkdownDir, 0o755); err != nil {
			return UsageErr(fmt.Errorf("docs: %w", err))
		}
		if err := doc.GenMarkdownTree(root, o.MarkdownDir); err != nil {
			return UsageErr(fmt.Errorf("docs: Markdown pages: %w", err))
		}
		written = append(written, "Markdown pages in "+o.MarkdownDir)
	}
	if !g.Quiet {
		for _, w := range written {
			fmt.Fprintf(f.IO.ErrOut, "wrote %s\n", w)
		}
	}
	return nil
}
