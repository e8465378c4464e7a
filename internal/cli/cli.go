// Package cli is rlprobe's command-line interface: cobra commands that fill
// options structs and hand them to the library packages (session for run,
// check and infer), injected I/O streams and environment so the whole CLI
// runs in-process in tests, and the one mapping of errors to the exit codes
// of the contract (ExitCode).
//
// Every verb has the same three parts, as cli/cli's commands do: an
// options struct, NewCmdX(f, g, runF) that parses the flags into it and
// calls runF (tests pass their own to check the parsing alone), and an
// unexported run function that calls the library.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlprobe/rlprobe/internal/scenario"
	"github.com/rlprobe/rlprobe/probe"
	"github.com/rlprobe/rlprobe/session"
	"github.com/rlprobe/rlprobe/testserver"
)

// Exit codes (contract.md): the classes of session errors. Precedence when
// several apply: 2, 4, 1, 3, 0.
const (
	ExitOK          = int(session.OK)       // done, nothing at or above --fail-on
	ExitFindings    = int(session.Findings) // a certain finding at or above --fail-on; selftest miss; --expect mismatch
	ExitUsage       = int(session.Usage)    // usage or input error
	ExitUnreachable = int(session.Aborted)  // unreachable, preflight failed, aborted, interrupted, budget spent
	ExitInternal    = int(session.Internal) // internal error (recovered panic)
)

// ExitError is an error with its exit class; a nil Err with a non-zero
// Class exits silently (the command already reported).
type ExitError = session.Error

// Usagef returns a usage/input error (exit 2).
func Usagef(format string, a ...any) error { return session.Errorf(session.Usage, format, a...) }

// UsageErr wraps err as a usage/input error (exit 2).
func UsageErr(err error) error { return session.WithClass(session.Usage, err) }

// Unreachablef returns an exit-3 error: target unreachable, preflight
// failed, run aborted, interrupted or budget spent.
func Unreachablef(format string, a ...any) error {
	return session.Errorf(session.Aborted, format, a...)
}

// WithCode wraps err with an exit code.
func WithCode(code int, err error) error { return &session.Error{Class: session.Class(code), Err: err} }

// ExitCode maps an error to its exit code, the one place that does: the
// class of a session error (or anything with an ExitCode method); a
// cancelled context is an interruption (3); anything else is a
// usage/input error (2), since library errors that reach here are about
// what the user gave us.
func ExitCode(err error) int { return int(session.ClassOf(err)) }

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
// version, and the seams tests use instead of package globals.
type Factory struct {
	IO IOStreams
	// Getenv reads the environment (injected so tests never touch the real one).
	Getenv func(string) string
	// Version is the tool version, e.g. "v0.1.0" or "(devel)".
	Version string
	// Now reads the clock; nil means time.Now.
	Now func() time.Time
	// ProbeOptions, when set, adjusts the probe options of run, check and
	// infer (tests: an in-memory Dial and timer pacing under synctest).
	ProbeOptions func(*probe.Options)
	// Selftest, when set, adjusts the selftest's options before it runs.
	Selftest func(*scenario.SelftestOptions)
	// ServeReady, when set, receives the reference server of serve once it
	// listens.
	ServeReady func(*testserver.Server)
	// Hangups, when set, replaces SIGHUP for serve --config's reload: each
	// value received reloads the file.
	Hangups <-chan struct{}
}

// Env returns the named environment variable.
func (f *Factory) Env(name string) string {
	if f.Getenv == nil {
		return ""
	}
	return f.Getenv(name)
}

// now reads the factory's clock.
func (f *Factory) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// tool is the "tool" member of every document.
func (f *Factory) tool() string { return "rlprobe " + f.Version }

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
		Use:           "rlprobe",
		Short:         "Test what an HTTP rate limiter really does, and whether it keeps its promise",
		Long:          helpLong("rlprobe"),
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
	root.AddCommand(NewCmdVersion(f, g, nil))
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
