package problem

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Message: "m"}, "m"},
		{Problem{Field: "rate", Message: "m"}, "rate: m"},
		{Problem{Line: 3, Field: "endpoints[0].window", Message: "m"}, "line 3: endpoints[0].window: m"},
		{Problem{File: "plan.yaml", Line: 3, Message: "m"}, "plan.yaml:3: m"},
		{Problem{File: "plan.yaml", Message: "m"}, "plan.yaml: m"},
		{Problem{File: "plan.yaml", Line: 2, Field: "phase 1 (steady)", Message: "m"}, "plan.yaml:2: phase 1 (steady): m"},
		{Problem{Line: -1, Message: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	one := []Problem{{Field: "a", Message: "x"}}
	two := []Problem{{Field: "a", Message: "x"}, {Line: 4, Message: "y"}}
	tests := []struct {
		e    Error
		want string
	}{
		{Error{What: "limiter", Problems: one}, "limiter: a: x"},
		{Error{What: "limiter", Problems: two}, "limiter (2 problems):\n  a: x\n  line 4: y"},
		{Error{What: "verify: invalid policy", Source: "p.yaml", Problems: one}, "verify: invalid policy in p.yaml: a: x"},
		{Error{What: "verify: invalid policy", Source: "p.yaml", Problems: two}, "verify: invalid policy in p.yaml (2 problems):\n  a: x\n  line 4: y"},
		{Error{Problems: one}, "a: x"},
		{Error{Problems: two}, "2 problems:\n  a: x\n  line 4: y"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestJoinNew(t *testing.T) {
	if err := Join("x", nil); err != nil {
		t.Errorf("Join of no problems = %v, want nil", err)
	}
	ps := []Problem{{Message: "m"}}
	var e *Error
	if err := Join("x", ps); !errors.As(err, &e) || e.What != "x" || !slices.Equal(e.Problems, ps) {
		t.Errorf("Join = %#v, want an *Error of x and %v", err, ps)
	}
	if got, want := New("record", "", "agent %q is bad", "a b").Error(), `record: agent "a b" is bad`; got != want {
		t.Errorf("New = %q, want %q", got, want)
	}
}

func TestFromUnder(t *testing.T) {
	wrapped := fmt.Errorf("context: %w", &Error{What: "verify", Problems: []Problem{{Message: "unknown check"}, {Field: "q", Line: 2, Message: "bad"}}})
	tests := []struct {
		name      string
		err       error
		from      []Problem
		underFlag []Problem
	}{
		{"nil", nil, nil, nil},
		{"plain error", errors.New("record: bad"), []Problem{{Message: "record: bad"}}, []Problem{{Field: "--f", Message: "record: bad"}}},
		{"wrapped Error", wrapped,
			[]Problem{{Message: "unknown check"}, {Field: "q", Line: 2, Message: "bad"}},
			[]Problem{{Field: "--f", Message: "unknown check"}, {Field: "--f: q", Line: 2, Message: "bad"}}},
	}
	for _, tt := range tests {
		if got := From(tt.err); !slices.Equal(got, tt.from) {
			t.Errorf("%s: From = %v, want %v", tt.name, got, tt.from)
		}
		if got := Under("--f", tt.err); !slices.Equal(got, tt.underFlag) {
			t.Errorf("%s: Under = %v, want %v", tt.name, got, tt.underFlag)
		}
	}
	// From copies: changing its result leaves the error alone.
	ps := From(wrapped)
	ps[0].Field = "changed"
	if got := From(wrapped)[0].Field; got != "" {
		t.Errorf("From shares the error's slice: its field became %q", got)
	}
}
