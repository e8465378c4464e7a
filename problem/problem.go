// Package problem is the one shape of a validation problem — something
// wrong with what a user gave (a policy, a plan, a limiter config, a
// limiter configuration file, flags) — and of the error that reports all
// of them at once.
//
// Every package that validates input (limiter, patterns, record, verify,
// limitconf, session) reports through [*Error], so a caller that puts a
// problem in its own words (a flag name, a field path) takes the
// [Problem]s out with [From] and sets their Field, instead of cutting a
// package prefix off the error text.
//
// It imports nothing of the module: a leaf every validating package may
// use.
package problem

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Problem is one thing wrong with an input: where it is (File, Line,
// Field, each optional) and what is wrong (Message). The zero Problem is
// an empty message.
type Problem struct {
	// File is the input's name when each problem names it ("plan.yaml",
	// "nginx.conf"); "" when the Error's Source names it, or there is none.
	File string
	// Line is the 1-based line in the file; 0 when unknown or not from a
	// file.
	Line int
	// Field is what is at fault: a field path ("endpoints[0].window"), a
	// flag ("--only"), a config field ("rate"), a plan's phase ("phase 1
	// (steady)"); "" when the message says it all.
	Field string
	// Message says what is wrong and, where it can, how to fix it.
	Message string
}

// String formats the problem as "FILE:LINE: FIELD: MESSAGE", leaving out
// what is unknown: "FILE: ..." without a line, "line N: ..." with a line
// but no file, no "FIELD: " without a field.
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		b.WriteString(p.File + ":" + strconv.Itoa(p.Line) + ": ")
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error reports every problem of one input at once. It is the one joined
// error of the module's validation: its text is
//
//	WHAT[ in SOURCE]: PROBLEM                     (one problem)
//	WHAT[ in SOURCE] (N problems):\n  PROBLEM...  (several, one a line)
//
// and without What and Source just the problem, or "N problems:" and one
// indented line each.
type Error struct {
	// What names what is invalid, with its package: "verify: invalid
	// policy", "patterns: invalid plan", "limiter"; "" for none (a
	// front end's usage error).
	What string
	// Source is the file every problem is in, shown as " in SOURCE"; ""
	// when the problems name their files, or there is none.
	Source string
	// Problems are the problems, in the order found; an Error holds at
	// least one.
	Problems []Problem
}

func (e *Error) Error() string {
	head := e.What
	if e.Source != "" {
		if head != "" {
			head += " "
		}
		head += "in " + e.Source
	}
	if len(e.Problems) == 1 {
		if head == "" {
			return e.Problems[0].String()
		}
		return head + ": " + e.Problems[0].String()
	}
	var b strings.Builder
	if head == "" {
		fmt.Fprintf(&b, "%d problems:", len(e.Problems))
	} else {
		fmt.Fprintf(&b, "%s (%d problems):", head, len(e.Problems))
	}
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// Join returns an *Error of what and problems, or nil when there are no
// problems.
func Join(what string, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &Error{What: what, Problems: problems}
}

// New returns an *Error of what holding one problem, the message
// formatted as fmt.Sprintf does: the error of a parser that finds one
// thing wrong.
func New(what, field, format string, a ...any) error {
	return &Error{What: what, Problems: []Problem{{Field: field, Message: fmt.Sprintf(format, a...)}}}
}

// From returns the problems err reports: those of the first *Error in its
// chain, or else one Problem whose Message is err's text; nil for a nil
// err. The slice is a copy the caller may change (to set Field, say).
func From(err error) []Problem {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return append([]Problem(nil), e.Problems...)
	}
	return []Problem{{Message: err.Error()}}
}

// Under returns the problems err reports (see From), each with field as
// its Field where it has none, else as "FIELD: its field" folded into the
// field; nil for a nil err. It is how a caller names the flag or field a
// parser's problems belong to.
func Under(field string, err error) []Problem {
	ps := From(err)
	for i := range ps {
		if ps[i].Field == "" {
			ps[i].Field = field
		} else {
			ps[i].Field = field + ": " + ps[i].Field
		}
	}
	return ps
}
