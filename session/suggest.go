package session

import (
	"errors"
	"strings"
)

// Fix is one change that makes a refused command line work: the flag Flag
// (with its dashes, "--every") given with Value, or alone when Value is ""
// (a switch such as "--force"). A flag given twice takes its last value,
// so appending Args to the refused command line applies the fix.
type Fix struct {
	Flag  string
	Value string
}

// Args is the fix as command-line arguments.
func (f Fix) Args() []string {
	if f.Value == "" {
		return []string{f.Flag}
	}
	return []string{f.Flag, f.Value}
}

// String is the fix as a user types it: "--every 1m0s", "--force".
func (f Fix) String() string { return strings.Join(f.Args(), " ") }

// Suggestion is the phrase that proposes fixes, each of which works on its
// own: "use --budget 5% or --every 1m0s", or "add --force" when every fix
// is a switch. It is the one place a message spells suggested flags; an
// error carries the fixes themselves by Suggest.
func Suggestion(fixes ...Fix) string {
	verb := "add "
	parts := make([]string, len(fixes))
	for i, f := range fixes {
		parts[i] = f.String()
		if f.Value != "" {
			verb = "use "
		}
	}
	return verb + strings.Join(parts, " or ")
}

// SuggestError is an error whose message ends with a Suggestion of its
// Fixes, each of which alone makes the refused command line work.
type SuggestError struct {
	Err   error
	Fixes []Fix
}

func (e *SuggestError) Error() string {
	return e.Err.Error() + "; " + Suggestion(e.Fixes...)
}

func (e *SuggestError) Unwrap() error { return e.Err }

// Suggest returns an error of class c saying msg, then "; " and the
// Suggestion of fixes (each alone makes the command line work); Fixes
// reads them back.
func Suggest(c Class, msg string, fixes ...Fix) error {
	return &Error{Class: c, Err: &SuggestError{Err: errors.New(msg), Fixes: fixes}}
}

// Fixes returns the fixes err suggests (Suggest), nil when it suggests
// none.
func Fixes(err error) []Fix {
	var s *SuggestError
	if errors.As(err, &s) {
		return s.Fixes
	}
	return nil
}
