package limitconf

import (
	"fmt"
	"io"
	"os"
)

// MaxStdin is the most ConfigSource.Read takes from standard input, in
// bytes (64 MiB): anything beyond is not read, and the config is parsed
// as cut there.
const MaxStdin = 64 << 20

// ConfigSource says which config to read, how, and which part of it:
// the config flags of policy import, policy lint and check --from-config
// (--format, --server, --location, --set, --env, --root, --strict,
// --strict-includes). The zero value guesses the format, substitutes
// nothing and keeps every rule.
type ConfigSource struct {
	// Format is the config's format as a user spells it (nginx, envoy,
	// traefik, kong; any case); "" guesses it from the name and content.
	Format string
	// Server keeps the limits of one server (see Options.Server); "" all.
	Server string
	// Location keeps the limits of one location or route (see
	// Options.Location); "" all.
	Location string
	// Set are --set NAME=VALUE values and Env --env files: the template
	// names substituted (ParseVars; Options.Vars).
	Set []string
	Env []string
	// Root is prefixed to absolute nginx includes (--root DIR).
	Root string
	// Strict refuses unknown nginx directives (Options.Strict);
	// StrictIncludes refuses includes that cannot be read.
	Strict, StrictIncludes bool
}

// options turns the source into parse options.
func (s ConfigSource) options() (Options, error) {
	o := Options{Server: s.Server, Location: s.Location, Root: s.Root, Strict: s.Strict, StrictIncludes: s.StrictIncludes}
	if s.Format != "" {
		f, err := ParseFormat(s.Format)
		if err != nil {
			return o, err
		}
		o.Format = f
	}
	if len(s.Set) > 0 || len(s.Env) > 0 {
		vars, err := ParseVars(s.Set, s.Env, os.ReadFile)
		if err != nil {
			return o, err
		}
		o.Vars = vars
	}
	return o, nil
}

// Read parses the config file ("-": at most MaxStdin bytes of stdin)
// as s says, following nginx includes from disk for a file. Every error
// is about what the user gave (a front end reports it as a usage error).
func (s ConfigSource) Read(stdin io.Reader, file string) (*Import, error) {
	o, err := s.options()
	if err != nil {
		return nil, err
	}
	if file != "-" {
		return ParseFile(file, o)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, MaxStdin))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(data, file, o)
}

// Import reads the config as Read does, and refuses what cannot become a
// policy (Importable): a limit that was not read, or none at all.
func (s ConfigSource) Import(stdin io.Reader, file string) (*Import, error) {
	im, err := s.Read(stdin, file)
	if err != nil {
		return nil, err
	}
	if err := im.Importable(); err != nil {
		return nil, err
	}
	return im, nil
}

// LiveCheck reads the config as Import does and plans its live check
// (NewLiveCheck) with o, the locations' URLs taken from locationURLs,
// --location-url PATTERN=URL values (ParseLocationURL; a later value for
// the same pattern wins) added to o.URLs. The errors are Read's,
// ParseLocationURL's and NewLiveCheck's, in that order.
func (s ConfigSource) LiveCheck(stdin io.Reader, file string, locationURLs []string, o TargetOptions) (*LiveCheck, error) {
	im, err := s.Import(stdin, file)
	if err != nil {
		return nil, err
	}
	urls := make(map[string]string, len(o.URLs)+len(locationURLs))
	for pat, u := range o.URLs {
		urls[pat] = u
	}
	for _, v := range locationURLs {
		pat, u, err := ParseLocationURL(v)
		if err != nil {
			return nil, err
		}
		urls[pat] = u
	}
	o.URLs = urls
	return NewLiveCheck(im, o)
}
