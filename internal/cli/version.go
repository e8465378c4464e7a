package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// VersionOptions are the flags of `rlprobe version` (none of its own).
type VersionOptions struct {
	f *Factory
	g *GlobalOptions
}

// NewCmdVersion builds `rlprobe version`; runF (nil: the real one) runs it.
func NewCmdVersion(f *Factory, g *GlobalOptions, runF func(context.Context, *VersionOptions) error) *cobra.Command {
	o := &VersionOptions{f: f, g: g}
	return &cobra.Command{
		Use:   "version",
		Short: "Print rlprobe's version (from the build info)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOr(runF, versionRun)(cmd.Context(), o)
		},
	}
}

func versionRun(_ context.Context, o *VersionOptions) error {
	f := o.f
	if o.g.JSON {
		return writeJSON(f.IO.Out, map[string]string{
			"schema": "rlprobe.version/v1", "tool": f.tool(), "version": f.Version, "go": runtime.Version(),
		})
	}
	_, err := fmt.Fprintf(f.IO.Out, "rlprobe %s (%s)\n", f.Version, runtime.Version())
	return err
}

// runOr returns runF when a test gave one, else the command's own run.
func runOr[O any](runF, run func(context.Context, *O) error) func(context.Context, *O) error {
	if runF != nil {
		return runF
	}
	return run
}

// writeJSON writes v as an indented JSON document.
func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
