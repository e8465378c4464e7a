package units

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Rate is a rate in requests per second that reads and writes the grammar
// of ParseRate in flags (it is a pflag.Value), YAML, JSON and text. The zero
// value means "not set"; String of the zero value is "".
type Rate float64

// String formats the rate with FormatRate ("" when unset).
func (r Rate) String() string {
	if r == 0 {
		return ""
	}
	return FormatRate(float64(r))
}

// Set parses s with ParseRate (the flag.Value interface).
func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	if err != nil {
		return err
	}
	*r = Rate(v)
	return nil
}

// Type names the flag's value in help text.
func (r *Rate) Type() string { return "rate" }

// MarshalText formats the rate with FormatRate.
func (r Rate) MarshalText() ([]byte, error) { return []byte(FormatRate(float64(r))), nil }

// UnmarshalText parses the rate with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error { return r.Set(string(b)) }

// UnmarshalYAML parses a scalar with ParseRate. Its error is a
// *yaml.TypeError naming the line, so a decoder goes on and reports every
// problem of a file at once.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return LineError(n, "a rate must be a string such as 5/s")
	}
	if err := r.Set(n.Value); err != nil {
		return LineError(n, err.Error())
	}
	return nil
}

// Duration is a time.Duration that reads and writes Go syntax in flags (it
// is a pflag.Value), YAML, JSON and text, refusing bare numbers. The zero
// value means "not set" (or zero, where zero is allowed); String of the
// zero value is "".
type Duration time.Duration

// String formats the duration in Go syntax ("" when zero).
func (d Duration) String() string {
	if d == 0 {
		return ""
	}
	return time.Duration(d).String()
}

// Set parses s with ParseDuration (the flag.Value interface).
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Type names the flag's value in help text.
func (d *Duration) Type() string { return "duration" }

// MarshalText formats the duration in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses the duration with ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error { return d.Set(string(b)) }

// UnmarshalYAML parses a scalar with ParseDuration; its error names the
// line, as Rate's does.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return LineError(n, "a duration must be a string such as 1.5s")
	}
	if err := d.Set(n.Value); err != nil {
		return LineError(n, err.Error())
	}
	return nil
}

// LineError is a YAML type error naming n's line: yaml.v3's decoder
// collects such errors and goes on, so every problem of a file is reported
// at once.
func LineError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}
