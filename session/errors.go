package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlprobe/rlprobe/problem"
)

// Class is the exit class of an error: what a front end should make of it.
// Its values are the exit codes of contract.md, so a command line may exit
// with int(class) directly.
type Class int

// The exit classes. Precedence when several apply: Usage, Internal,
// Findings, Aborted, OK (see Worse).
const (
	OK       Class = 0 // done, nothing at or above the fail level
	Findings Class = 1 // a certain finding at or above the fail level; an expectation missed
	Usage    Class = 2 // usage or input error: bad options, plan or policy; a cap exceeded; nothing sent
	Aborted  Class = 3 // unreachable, preflight failed, aborted, interrupted or budget spent
	Internal Class = 4 // a bug
)

// rank orders the classes by precedence (higher wins).
var rank = map[Class]int{OK: 0, Aborted: 1, Findings: 2, Internal: 3, Usage: 4}

// Worse reports whether c takes precedence over d when both apply.
func (c Class) Worse(d Class) bool { return rank[c] > rank[d] }

// Error is an error with its exit class, in the manner of k6's
// errext.HasExitCode: a front end maps every error of this package to an
// exit code in one place, by ExitCode. A nil Err with a non-zero Class
// stands for an outcome already reported (a failing verdict, an incomplete
// run): it has nothing more to say.
type Error struct {
	Class Class
	Err   error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Class)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns the class as an exit code.
func (e *Error) ExitCode() int { return int(e.Class) }

// Errorf returns an error of class c.
func Errorf(c Class, format string, a ...any) error {
	return &Error{Class: c, Err: fmt.Errorf(format, a...)}
}

// WithClass wraps err with class c; nil stays nil.
func WithClass(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Err: err}
}

// ClassOf returns the class of err: OK for nil; the ExitCode of the first
// error in its chain that has one; Aborted for a cancelled context; else
// Usage, since an unclassified error that reaches a front end is about what
// the user gave it.
func ClassOf(err error) Class {
	if err == nil {
		return OK
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return Class(ec.ExitCode())
	}
	if errors.Is(err, context.Canceled) {
		return Aborted
	}
	return Usage
}

// problems is the Usage error listing every problem at once: a
// *problem.Error without What, so the one problem as it is, or "N
// problems:" and one indented line each; nil for none.
func problems(probs []problem.Problem) error { return WithClass(Usage, problem.Join("", probs)) }

// msgf is a problem that its message says all of.
func msgf(format string, a ...any) problem.Problem {
	return problem.Problem{Message: fmt.Sprintf(format, a...)}
}
