package cli

import (
	"os"

	"golang.org/x/term"
)

// SystemStreams returns the process's standard streams with their terminal
// facts.
func SystemStreams() IOStreams {
	s := IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	s.OutTTY = term.IsTerminal(int(os.Stdout.Fd()))
	s.ErrTTY = term.IsTerminal(int(os.Stderr.Fd()))
	if s.ErrTTY {
		if w, _, err := term.GetSize(int(os.Stderr.Fd())); err == nil {
			s.Width = w
		}
	}
	return s
}
