package cli

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCmd(f *Factory, g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rlprobe's version (from the build info)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.JSON {
				enc := json.NewEncoder(f.IO.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]string{
					"schema": "rlprobe.version/v1", "tool": "rlprobe " + f.Version,
					"version": f.Version, "go": runtime.Version(),
				})
			}
			_, err := fmt.Fprintf(f.IO.Out, "rlprobe %s (%s)\n", f.Version, runtime.Version())
			return err
		},
	}
}
