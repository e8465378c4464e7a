package limitconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlprobe/rlprobe/verify"
)

// ErrNoLimits is returned (wrapped) by Parse when a config declares no
// limit at all, and by Importable when an import has no rule to write.
var ErrNoLimits = errors.New("limitconf: the configuration declares no rate limit")

// Options select what an import keeps.
type Options struct {
	// Format is the config's format; "" detects it (DetectFormat).
	Format Format
	// Server keeps the rules of one nginx server_name (or Envoy virtual
	// host, Traefik router, Kong service or route name); "" keeps all.
	Server string
	// Location keeps the rules whose location or path is this; "" all.
	Location string
	// ReadFile reads an nginx include; nil means includes are reported as
	// not interpreted.
	ReadFile func(name string) ([]byte, error)
	// Glob expands an nginx include pattern; nil treats it as one name.
	Glob func(pattern string) ([]string, error)
	// Root is prefixed to absolute nginx includes ("" reads them where
	// they are); relative ones are read from the main file's directory.
	Root string
	// StrictIncludes makes an include that cannot be read an error
	// (listing every one) instead of include-missing.
	StrictIncludes bool
	// Strict refuses an nginx directive that is neither nginx's own nor
	// a known module's, as nginx without that module does, instead of
	// reporting it not-interpreted.
	Strict bool
	// Vars are the template names substituted before reading, $NAME and
	// ${NAME}, in every file (see ParseVars); other "$" are left alone.
	Vars map[string]string
}

// Parse reads a configuration (data, named name in messages) and returns
// what it declares, with the static findings. A malformed config is a
// *problem.Error with the file and line; Parse never panics.
//
// A config that declares limits none of which can be imported (nginx
// zones no limit_req uses, limits whose numbers are placeholders left
// unset) is returned with no rules and the findings that say why: lint
// reports them, Importable refuses them. One that declares no limit at
// all is ErrNoLimits.
func Parse(data []byte, name string, o Options) (im *Import, err error) {
	defer func() {
		if p := recover(); p != nil {
			im, err = nil, errAt(name, 0, "internal error reading the configuration (please report it): %v", p)
		}
	}()
	return parse(data, name, o)
}

// ParseFile reads and parses the configuration file at path, following
// nginx includes from disk unless o says how to read them.
func ParseFile(path string, o Options) (*Import, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("limitconf: %w", err)
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.Glob == nil {
		o.Glob = filepath.Glob
	}
	return Parse(data, path, o)
}

// parse is Parse without the recovery (fuzz targets call it, so that a
// panic is found rather than hidden).
func parse(data []byte, name string, o Options) (im *Import, err error) {
	f := o.Format
	if f == "" {
		if f, err = DetectFormat(name, data); err != nil {
			return nil, err
		}
	}
	if f != Nginx {
		// nginx substitutes file by file, includes too.
		data = substitute(data, o.Vars)
	}
	switch f {
	case Nginx:
		im, err = parseNginx(data, name, o)
	case Envoy:
		im, err = parseEnvoy(data, name)
	case Traefik:
		im, err = parseTraefik(data, name)
	case Kong:
		im, err = parseKong(data, name)
	default:
		return nil, fmt.Errorf("limitconf: unknown format %q", f)
	}
	if err != nil {
		return nil, err
	}
	im.Format, im.File = f, name
	im.filter(o)
	markBinding(im.Rules)
	type place struct {
		server   int
		name, at string
	}
	seen := map[place]bool{}
	for i := range im.Rules {
		r := &im.Rules[i]
		if k := (place{r.server, r.Server, r.Location}); !r.Covered() && !seen[k] {
			seen[k] = true
			f := finding(IDLimitUntestable, verify.SeverityInfo, verify.Certain, r.Source, r.Location,
				fmt.Sprintf("%s is not one URL: check needs a URL for it", r.Location),
				"give one with --location-url PATTERN=URL, e.g. "+exampleURL(r))
			f.server = r.server
			im.add(f)
		}
	}
	sortFindings(im.Findings)
	if len(im.Rules) == 0 {
		if o.Server != "" || o.Location != "" {
			return nil, fmt.Errorf("%w matching --server %q --location %q", ErrNoLimits, o.Server, o.Location)
		}
		if !im.declaresLimits() {
			return nil, fmt.Errorf("%w (%s)%s", ErrNoLimits, name, im.missingIncludes())
		}
	}
	return im, nil
}

// declaresLimits reports whether the findings show limits that were
// declared but cannot be imported.
func (im *Import) declaresLimits() bool {
	for _, f := range im.Findings {
		if f.ID == IDZoneUnused || f.ID == verify.IDConfigNotEnforced || f.unread() {
			return true
		}
	}
	return false
}

// missingIncludes lists the includes that could not be read, for an
// error message.
func (im *Import) missingIncludes() string {
	var out []string
	for _, f := range im.Findings {
		if f.ID == IDIncludeMissing {
			out = append(out, f.Source.String())
		}
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d includes could not be read (%s)", len(out), strings.Join(out, ", "))
}

// unread reports whether the finding says a limit was not read.
func (f *Finding) unread() bool {
	return f.ID == IDPlaceholderUnset || (f.ID == IDNotInterpreted && f.Severity == verify.SeverityError)
}

// Importable says why the import cannot become a policy file (policy
// import's and check --from-config's exit 2), or returns nil: a limit
// that was not read (placeholder-unset, or not-interpreted on a
// directive that holds a limit — the policy would silently miss it), or
// no rule at all (nginx zones that no limit_req uses, named).
func (im *Import) Importable() error {
	var unread []string
	for _, f := range im.Findings {
		if f.unread() {
			unread = append(unread, f.Message)
		}
	}
	if len(unread) > 0 {
		what := fmt.Sprintf("%d limits were", len(unread))
		if len(unread) == 1 {
			what = "1 limit was"
		}
		return fmt.Errorf("limitconf: %s: %s not read, so a policy would miss them:\n  %s", im.File, what, strings.Join(unread, "\n  "))
	}
	if len(im.Rules) > 0 {
		return nil
	}
	var zones []string
	for _, f := range im.Findings {
		if f.ID == IDZoneUnused {
			zones = append(zones, f.zones...)
		}
	}
	if len(zones) > 0 {
		return fmt.Errorf("%w: nothing to import from %s: no limit_req uses zone %s", ErrNoLimits, im.File, strings.Join(zones, ", "))
	}
	return fmt.Errorf("%w: nothing to import from %s", ErrNoLimits, im.File)
}

// urlPath returns p when it is a URL path a probe can request (it starts
// with "/" and holds no space or control character), else "".
func urlPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return ""
		}
	}
	return p
}

func exampleURL(r *Rule) string {
	p := r.Prefix
	if p == "" {
		p = "/some/path"
	}
	return fmt.Sprintf("'%s=%s'", strings.TrimSpace(r.Location), p)
}

// filter keeps the rules of the server and location asked for, and the
// findings about them: those of the same nginx server block (not of
// another that shares its name or a location's text), of the zones they
// use, or about the file as a whole.
func (im *Import) filter(o Options) {
	if o.Server == "" && o.Location == "" {
		return
	}
	keep := im.Rules[:0]
	for _, r := range im.Rules {
		if o.Server != "" && !matchServer(r.Server, o.Server) {
			continue
		}
		if o.Location != "" && !matchLocation(r, o.Location) {
			continue
		}
		keep = append(keep, r)
	}
	im.Rules = keep
	type place struct {
		server int
		loc    string
	}
	places, servers, zones, locs := map[place]bool{}, map[int]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range keep {
		places[place{r.server, r.Location}] = true
		servers[r.server] = true
		zones[r.Zone] = true
		locs[r.Location] = true
	}
	fs := im.Findings[:0]
	for _, f := range im.Findings {
		var ok bool
		switch {
		case len(f.zones) > 0:
			ok = slices.ContainsFunc(f.zones, func(z string) bool { return zones[z] })
		case f.server != 0 && f.Endpoint != "":
			ok = places[place{f.server, f.Endpoint}]
		case f.server != 0:
			ok = servers[f.server]
		case f.Endpoint != "":
			ok = locs[f.Endpoint]
		default:
			ok = true
		}
		if ok {
			fs = append(fs, f)
		}
	}
	im.Findings = fs
}

func matchServer(have, want string) bool {
	for _, n := range strings.Fields(have) {
		if n == want {
			return true
		}
	}
	return have == want
}

func matchLocation(r Rule, want string) bool {
	loc := strings.TrimSpace(r.Location)
	if loc == want || r.Path == want {
		return true
	}
	f := strings.Fields(loc)
	return len(f) > 0 && f[len(f)-1] == want
}

// markBinding marks, among rules of one server and location, the one that
// rejects first from idle.
func markBinding(rs []Rule) {
	type group struct {
		server    int
		name, loc string
	}
	best := map[group]int{}
	count := map[group]int{}
	var order []group
	for i := range rs {
		g := group{rs[i].server, rs[i].Server, rs[i].Location}
		if count[g] == 0 {
			order = append(order, g)
		}
		count[g]++
		j, ok := best[g]
		if !ok || tighter(&rs[i], &rs[j]) {
			best[g] = i
		}
	}
	for _, g := range order {
		if count[g] < 2 {
			continue
		}
		i := best[g]
		rs[i].Binding = true
		rs[i].Notes = append(rs[i].Notes, fmt.Sprintf("binding: of the %d limits on %s, this one rejects first from idle", count[g], g.loc))
	}
}

func tighter(a, b *Rule) bool {
	qa, qb := a.Endpoint.Quota(), b.Endpoint.Quota()
	if qa != qb {
		return qa < qb
	}
	return sustained(a) < sustained(b)
}

// sustained is a rule's long-run rate in requests per second.
func sustained(r *Rule) float64 {
	if r.Endpoint.IsBucket() {
		return r.Endpoint.Rate
	}
	if r.Endpoint.Window <= 0 {
		return 0
	}
	return float64(r.Endpoint.Limit) / r.Endpoint.Window.Seconds()
}

// DetectFormat guesses a config's format from its name and content.
func DetectFormat(name string, data []byte) (Format, error) {
	s := string(data)
	switch ext := strings.ToLower(filepath.Ext(name)); {
	case ext == ".conf" || ext == ".template" && !strings.Contains(s, "apiVersion") || strings.Contains(s, "limit_req"):
		return Nginx, nil
	case ext == ".toml":
		return Traefik, nil
	case strings.Contains(s, "local_ratelimit") || strings.Contains(s, "token_bucket") || strings.Contains(s, "tokenBucket"):
		return Envoy, nil
	case strings.Contains(s, "_format_version") || strings.Contains(s, "rate-limiting"):
		return Kong, nil
	case strings.Contains(s, "rateLimit") || strings.Contains(s, "ratelimit"):
		return Traefik, nil
	}
	return "", fmt.Errorf("limitconf: cannot tell the format of %s: give --format nginx, envoy, traefik or kong", name)
}
