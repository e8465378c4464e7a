// Package cli is rlprobe's command-line interface: cobra commands that fill
// options structs and hand them to the library packages, injected I/O streams
// and environment so the whole CLI runs in-process in tests, and the mapping
// of errors to the exit codes of the contract.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes (contract.md). Precedence when several apply: 2, 4, 1, 3, 0.
const (
	ExitOK          = 0 // done, nothing at or above --fail-on
	ExitFindings    = 1 // a certain finding at or above --fail-on; selftest miss; --expect mismatch
	ExitUsage       = 2 // usage or input error
	ExitUnreachable = 3 // unreachable, preflight failed, aborted, interrupted, budget spent
	ExitInternal    = 4 // internal error (recovered panic)
)

// ExitError carries an exit code with the error that caused it. A nil Err
// with a non-zero Code exits silently (the command already reported).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usagef returns a usage/input error (exit 2).
func Usagef(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// UsageErr wraps err as a usage/input error (exit 2).
func UsageErr(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// Unreachablef returns an exit-3 error: target unreachable, preflight
// failed, run aborted, interrupted or budget spent.
func Unreachablef(format string, a ...any) error {
	return &ExitError{Code: ExitUnreachable, Err: fmt.Errorf(format, a...)}
}

// WithCode wraps err with an exit code.
func WithCode(code int, err error) error { return &ExitError{Code: code, Err: err} }

// IOStreams are the command's standard streams and terminal facts.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer // results only
	ErrOut io.Writer // progress, warnings, errors
	// OutTTY and ErrTTY report whether Out / ErrOut are terminals.
	OutTTY, ErrTTY bool
	// Width is the terminal width in columns (0 = unknown).
	Width int
}

// Factory carries what every command needs: streams, environment, the
// signal context and the version. Tests build one with fake streams.
type Factory struct {
	IO IOStreams
	// Getenv reads the environment (injected so tests never touch the real one).
	Getenv func(string) string
	// Version is the tool version, e.g. "v0.1.0" or "(devel)".
	Version string
}

// Env returns the named environment variable.
func (f *Factory) Env(name string) string {
	if f.Getenv == nil {
		return ""
	}
	return f.Getenv(name)
}

// GlobalOptions are the flags every command shares.
type GlobalOptions struct {
	JSON  bool
	Quiet bool
	Color string // auto | always | never
}

// UseColor reports whether output to a stream that is (or is not) a
// terminal should be coloured, honouring --color, NO_COLOR and FORCE_COLOR.
func (g *GlobalOptions) UseColor(f *Factory, tty bool) bool {
	switch g.Color {
	case "always":
		return true
	case "never":
		return false
	}
	if f.Env("NO_COLOR") != "" {
		return false
	}
	if v := f.Env("FORCE_COLOR"); v != "" && v != "0" {
		return true
	}
	return tty
}

// registered holds the constructors of the subcommands; each command's file
// adds itself in an init function, so commands land without touching root.
var registered []func(*Factory, *GlobalOptions) *cobra.Command

func register(c func(*Factory, *GlobalOptions) *cobra.Command) { registered = append(registered, c) }

// NewRootCmd builds the command tree.
func NewRootCmd(f *Factory) *cobra.Command {
	g := &GlobalOptions{Color: "auto"}
	root := &cobra.Command{
		Use:   "rlprobe",
		Short: "Test what an HTTP rate limiter really does, and whether it keeps its promise",
		Long: `rlprobe fires traffic patterns at HTTP targets, records every request,
verifies the results against a declared rate-limit policy, and infers which
algorithm the target runs. It ships a reference server with every algorithm,
header dialect and classic bug, so it can test itself.`,
		Version:       f.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch g.Color {
			case "auto", "always", "never":
				return nil
			}
			return Usagef("--color must be auto, always or never, not %q", g.Color)
		},
	}
	root.SetVersionTemplate("rlprobe {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.BoolVar(&g.JSON, "json", false, "print the result as a JSON document on stdout")
	pf.BoolVarP(&g.Quiet, "quiet", "q", false, "print no progress, only results and errors")
	pf.StringVar(&g.Color, "color", "auto", "colour output: auto, always or never (honours NO_COLOR, FORCE_COLOR)")
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageErr(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(newVersionCmd(f, g))
	for _, c := range registered {
		root.AddCommand(c(f, g))
	}
	return root
}

// Run executes the CLI with args (without the program name) and returns the
// exit code. It never calls os.Exit; a panic is recovered as exit 4.
func Run(ctx context.Context, f *Factory, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(f.IO.ErrOut, "rlprobe: internal error: %v\n%s\nThis is a bug: please report it with the command line and the output above.\n", r, debug.Stack())
			code = ExitInternal
		}
	}()
	root := NewRootCmd(f)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code = ExitCode(err)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return code
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "rlprobe") {
		msg = "rlprobe: " + msg
	}
	fmt.Fprintln(f.IO.ErrOut, msg)
	return code
}

// ExitCode maps an error to its exit code: an *ExitError's code; cobra's
// own argument and flag errors are usage errors (2); a cancelled context
// is an interruption (3); anything else is a usage/input error (2), since
// library errors that reach here are about what the user gave us.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if errors.Is(err, context.Canceled) {
		return ExitUnreachable
	}
	return ExitUsage
}

// Main is what cmd/rlprobe calls: the real streams and environment, signals
// cancel the context. It returns the exit code.
func Main(ctx context.Context) int {
	f := &Factory{
		IO:      SystemStreams(),
		Getenv:  os.Getenv,
		Version: BuildVersion(),
	}
	return Run(ctx, f, os.Args[1:])
}

// BuildVersion returns the module version from the build info.
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}
