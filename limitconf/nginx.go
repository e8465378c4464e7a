package limitconf

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/rlprobe/rlprobe/verify"
)

// nginx's default reject status (limit_req_status).
const nginxDefaultStatus = 503

// zone is an nginx limit_req_zone.
type zone struct {
	name    string
	keyExpr string
	perKs   int64   // requests per 1000 s, as nginx keeps the rate
	rate    float64 // requests per second (perKs / 1000)
	rateSrc string  // as written, e.g. "1r/s"
	at      Source
	used    bool
	unread  bool // a placeholder was left in its size or rate
}

// limitReq is one limit_req directive.
type limitReq struct {
	zone    string
	burst   int64
	nodelay bool
	delay   int64
	at      Source
	text    string
	unread  bool // a placeholder was left in it, or in its zone
}

// limitCtx is what a configuration level passes down (nginx merges these
// from http to server to location).
type limitCtx struct {
	reqs     []limitReq // replaced, not merged, by a level with its own
	status   int
	statusAt Source
	dryRun   bool
	dryRunAt Source
	// answers are the server level's answers in the rewrite phase, which
	// run before any location is chosen.
	answers []answer
}

// answer is a directive that answers a request in the rewrite phase,
// before limit_req's preaccess phase: a return or a redirecting rewrite,
// under cond ("" when it answers every request).
type answer struct {
	d    *directive
	cond string
	what string // "return" or "rewrite … permanent" as written
}

// nginxCtx is the context a directive is in.
type nginxCtx int

const (
	mainCtx nginxCtx = iota
	httpCtx
	serverCtx
	locationCtx
	ifCtx
	otherCtx // events, upstream, stream, mail, limit_except, …
)

// nginxConf is one parse of an nginx configuration.
type nginxConf struct {
	file     string
	o        Options
	zones    map[string]*zone
	zoneList []*zone
	realIP   bool // set_real_ip_from / real_ip_header present
	im       *Import
	servers  int // server blocks numbered so far
	// mentioned are zones named by a limit directive that was not read
	// (an unknown directive holding it): not reported zone-unused.
	mentioned map[string]bool
	// Of the server being read: whether it has regular-expression
	// locations, and its exact ones. A prefix location serves the URL of
	// its own prefix only when neither takes that URL first.
	regex bool
	exact map[string]bool
}

// addf adds a finding about server block n (0: none).
func (c *nginxConf) addf(n int, f Finding) {
	f.server = n
	c.im.add(f)
}

func parseNginx(data []byte, name string, o Options) (*Import, error) {
	r := &nginxReader{o: o, root: filepath.Dir(name)}
	top, err := r.parseFile(data, name, 0, directives)
	if err != nil {
		return nil, err
	}
	if err := r.strictIncludes(name); err != nil {
		return nil, err
	}
	c := &nginxConf{file: name, o: o, zones: map[string]*zone{}, im: &Import{}, mentioned: map[string]bool{}}
	for _, f := range r.skipped {
		c.im.add(f)
	}
	// A whole nginx.conf (http and events at its top), or a snippet of an
	// http block (conf.d files hold servers and zones at their top level).
	ctx := httpCtx
	for _, d := range top {
		if (d.name == "http" || d.name == "events") && d.hasBlock {
			ctx = mainCtx
		}
	}
	if top, err = c.vet(top, ctx, 0); err != nil {
		return nil, err
	}
	https := [][]*directive{top}
	if ctx == mainCtx {
		https = nil
		for _, d := range top {
			if d.name == "http" && d.hasBlock {
				https = append(https, d.block)
			}
		}
	}
	walk(top, func(d *directive) {
		if d.name == "set_real_ip_from" || d.name == "real_ip_header" {
			c.realIP = true
		}
	})
	for _, h := range https {
		for _, d := range h {
			if d.name == "limit_req_zone" {
				if err := c.zone(d); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, h := range https {
		if err := c.http(h); err != nil {
			return nil, err
		}
	}
	c.lintZones()
	return c.im, nil
}

// walk calls f on every directive, depth first.
func walk(ds []*directive, f func(*directive)) {
	for _, d := range ds {
		f(d)
		walk(d.block, f)
	}
}

// vet checks each directive's name and, for the limit directives, its
// context, as ngx_conf_handler does; numbers the server blocks; and
// returns the directives with each unknown one replaced by its block's
// contents. An unknown directive is not-interpreted (an error when its
// arguments name a limit directive: that limit was not read), or refused
// under Options.Strict.
func (c *nginxConf) vet(ds []*directive, ctx nginxCtx, server int) ([]*directive, error) {
	out := make([]*directive, 0, len(ds))
	for _, d := range ds {
		d.server = server
		if !knownDirectives[d.name] {
			if c.o.Strict {
				return nil, errAt(d.file, d.line, "unknown directive %q (--strict refuses what nginx and its known modules do not define)", d.name)
			}
			c.unknown(d)
			if d.hasBlock && !d.lua {
				inner, err := c.vet(d.block, ctx, server)
				if err != nil {
					return nil, err
				}
				out = append(out, inner...)
			}
			continue
		}
		if allowed, ok := limitDirectives[d.name]; ok && !slices.Contains(allowed, ctx) {
			return nil, errAt(d.file, d.line, "%q directive is not allowed here (nginx takes it in %s)", d.name, placesOf(allowed))
		}
		if d.hasBlock && !d.lua && kindOf(d.name) == directives {
			sub, srv := otherCtx, server
			switch {
			case d.name == "http" && ctx == mainCtx:
				sub = httpCtx
			case d.name == "server" && ctx == httpCtx:
				sub = serverCtx
				c.servers++
				srv = c.servers
				d.server = srv
			case d.name == "location" && (ctx == serverCtx || ctx == locationCtx):
				sub = locationCtx
			case d.name == "if" && (ctx == serverCtx || ctx == locationCtx):
				sub = ifCtx
			}
			var err error
			if d.block, err = c.vet(d.block, sub, srv); err != nil {
				return nil, err
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func placesOf(cs []nginxCtx) string {
	names := map[nginxCtx]string{httpCtx: "http", serverCtx: "server", locationCtx: "location"}
	var out []string
	for _, c := range cs {
		out = append(out, names[c])
	}
	return strings.Join(out, ", ")
}

// unknown reports a directive that is neither nginx's nor a known
// module's.
func (c *nginxConf) unknown(d *directive) {
	hint := "check its spelling and the module that defines it; --strict refuses it, as nginx without that module does"
	if p, ok := placeholderIn(d.name); ok {
		hint = fmt.Sprintf("%s looks like a template placeholder: give its value with --set %s=VALUE (as envsubst would)", p, placeholderName(p))
	}
	for _, a := range d.args {
		if _, ok := limitDirectives[a]; ok {
			for _, z := range d.args {
				if n, ok := strings.CutPrefix(z, "zone="); ok {
					c.mentioned[n] = true
				}
			}
			c.addf(d.server, finding(IDNotInterpreted, verify.SeverityError, verify.Certain, d.src(), "",
				fmt.Sprintf("%q is not a directive nginx or a known module defines, and it holds %s: this limit was not read", d.name, a), hint))
			return
		}
	}
	what := "skipped"
	if d.hasBlock && !d.lua {
		what = "skipped, its block read as part of the enclosing one"
	}
	c.addf(d.server, finding(IDNotInterpreted, verify.SeverityWarning, verify.Certain, d.src(), "",
		fmt.Sprintf("unknown directive %q: %s", d.name, what), hint))
}

func (c *nginxConf) http(ds []*directive) error {
	ctx, err := c.level(ds, limitCtx{status: nginxDefaultStatus})
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.name == "server" && d.hasBlock {
			if err := c.server(d, ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func serverName(d *directive) string {
	for _, s := range d.block {
		if s.name == "server_name" && len(s.args) > 0 {
			return strings.Join(s.args, " ")
		}
	}
	for _, s := range d.block {
		if s.name == "listen" && len(s.args) > 0 {
			return s.args[0]
		}
	}
	return ""
}

func (c *nginxConf) server(d *directive, parent limitCtx) error {
	ctx, err := c.level(d.block, parent)
	if err != nil {
		return err
	}
	name := serverName(d)
	c.regex, c.exact = false, map[string]bool{}
	walk(d.block, func(l *directive) {
		if l.name != "location" || len(l.args) != 2 {
			return
		}
		switch l.args[0] {
		case "~", "~*":
			c.regex = true
		case "=":
			c.exact[l.args[1]] = true
		}
	})
	ctx.answers = answers(d.block)
	locs := 0
	for _, s := range d.block {
		if s.name == "location" && s.hasBlock {
			locs++
			if err := c.location(s, name, ctx); err != nil {
				return err
			}
		}
	}
	if locs == 0 && len(ctx.reqs) > 0 {
		// A server without locations serves every path under its limits.
		pseudo := &directive{name: "location", args: []string{"/"}, file: d.file, line: d.line, hasBlock: true, server: d.server}
		return c.emit(pseudo, name, "/ (the whole server)", ctx, nil)
	}
	return nil
}

// answers lists what answers in the rewrite phase at one level: every
// return, every redirecting rewrite, and those under an if.
func answers(ds []*directive) []answer {
	var out []answer
	for _, d := range ds {
		switch {
		case d.name == "return":
			out = append(out, answer{d: d, what: "return"})
		case redirects(d):
			cond := ""
			if !universal(d.args[0]) {
				cond = "requests match " + d.args[0]
			}
			out = append(out, answer{d: d, cond: cond, what: "rewrite " + strings.Join(d.args, " ")})
		case d.name == "if" && d.hasBlock:
			for _, a := range answers(d.block) {
				a.cond = "if " + condText(d.args) + " holds"
				out = append(out, a)
			}
		}
	}
	return out
}

// condText writes an if's condition as a config would: an argument that
// is empty or holds a space quoted, no space before the closing ")".
func condText(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t") {
			out[i] = "'" + a + "'"
		}
	}
	return strings.ReplaceAll(strings.Join(out, " "), " )", ")")
}

// redirects reports whether d is a rewrite that answers with a redirect:
// flag redirect or permanent, or a replacement that starts with http://,
// https:// or $scheme.
func redirects(d *directive) bool {
	if d.name != "rewrite" || len(d.args) < 2 {
		return false
	}
	if len(d.args) >= 3 && (d.args[2] == "redirect" || d.args[2] == "permanent") {
		return true
	}
	r := d.args[1]
	return strings.HasPrefix(r, "http://") || strings.HasPrefix(r, "https://") || strings.HasPrefix(r, "$scheme")
}

// universal reports whether a rewrite's regular expression matches every
// URI (every URI starts with "/").
func universal(re string) bool {
	re = strings.NewReplacer("(", "", ")", "").Replace(re)
	switch re {
	case "", "^", "^/", "/", ".*", "^.*", "^.*$", ".*$", "^/.*", "^/.*$", "/.*", "/.*$", "^.+", "^.+$", "^/.*?$":
		return true
	}
	return false
}

// answersIn returns the first directive of a block that answers in the
// rewrite phase unconditionally (return), or nil.
func answersIn(ds []*directive) *directive {
	for _, d := range ds {
		if d.name == "return" {
			return d
		}
	}
	return nil
}

func (c *nginxConf) location(d *directive, server string, parent limitCtx) error {
	if len(d.args) == 0 || len(d.args) > 2 {
		return argCountErr(d)
	}
	ctx, err := c.level(d.block, parent)
	if err != nil {
		return err
	}
	loc := strings.Join(d.args, " ")
	if err := c.emit(d, server, loc, ctx, d.block); err != nil {
		return err
	}
	for _, s := range d.block {
		if s.name == "location" && s.hasBlock {
			if err := c.location(s, server, ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// emit turns a location's effective limits into rules, and lints what
// answers before them.
func (c *nginxConf) emit(d *directive, server, loc string, ctx limitCtx, body []*directive) error {
	if len(ctx.reqs) == 0 {
		return nil
	}
	mod, path := "", d.args[len(d.args)-1]
	if len(d.args) == 2 {
		mod = d.args[0]
	}
	if strings.HasPrefix(path, "@") || hasDirective(body, "internal") {
		// Named and internal locations are reached only by internal
		// redirects, after the entry location's limits ran.
		return nil
	}
	var exact, prefix string
	switch mod {
	case "=":
		exact = path
	case "", "^~":
		prefix = path
		if !c.exact[path] && (mod == "^~" || !c.regex) {
			// nginx picks the longest matching prefix, and no exact or
			// regular-expression location can take this URL first.
			exact = path
		}
	case "~", "~*":
	default:
		return errAt(d.file, d.line, "invalid location modifier %q", mod)
	}
	exact, prefix = urlPath(exact), urlPath(prefix)
	proxies := hasDirective(body, "proxy_pass", "fastcgi_pass", "grpc_pass", "uwsgi_pass", "scgi_pass")
	for _, l := range ctx.reqs {
		if l.unread {
			continue // placeholder-unset says so
		}
		z := c.zones[l.zone]
		r := Rule{
			Source: l.at, ZoneAt: z.at, Zone: z.name, Server: server, Location: loc,
			Path: exact, Prefix: prefix,
			Rate: z.rate, Capacity: l.burst + 1, KeyExpr: z.keyExpr,
			Status: ctx.status, DryRun: ctx.dryRun, server: d.server,
		}
		r.Key, r.Notes = nginxKey(z.keyExpr)
		switch {
		case l.nodelay || l.delay >= l.burst:
			r.Family = TokenBucket
			r.Notes = append(r.Notes, fmt.Sprintf("%s: excess beyond capacity %d = burst %d + 1 is rejected at once, refilled at %s", l.text, r.Capacity, l.burst, z.rateSrc))
		default:
			r.Family = LeakyBucketQueue
			r.Undelayed = l.delay + 1
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d served at once from idle, up to %d more held and served at %s, the rest rejected", l.text, r.Undelayed, l.burst-l.delay, z.rateSrc))
		}
		if n := z.rateNote(); n != "" {
			r.Notes = append(r.Notes, n)
		}
		ep := verify.Endpoint{Path: orElse(exact, prefix), Rate: z.rate, Capacity: l.burst + 1, Key: r.Key, Status: ctx.status}
		if r.Key == KeyUnknown {
			ep.Key = verify.KeyGlobal
			r.Notes = append(r.Notes, "the key is checked as global: one client sees the limit as written")
		}
		r.Endpoint = ep
		c.im.Rules = append(c.im.Rules, r)
		c.lintLocation(&r, l, body, ctx, proxies)
	}
	return nil
}

func hasDirective(ds []*directive, names ...string) bool {
	for _, d := range ds {
		for _, n := range names {
			if d.name == n {
				return true
			}
		}
	}
	return false
}

// nginxKey maps a zone's key expression to the contract's key.
func nginxKey(expr string) (string, []string) {
	switch expr {
	case "$binary_remote_addr", "$remote_addr", "${binary_remote_addr}", "${remote_addr}":
		return verify.KeyIP, []string{"key " + expr + ": one quota per client address"}
	case "$server_name", "$host", "$http_host":
		return verify.KeyGlobal, []string{"key " + expr + ": one quota per host name, shared by every client"}
	}
	if !strings.Contains(expr, "$") {
		return verify.KeyGlobal, []string{fmt.Sprintf("key %q is a constant: one quota shared by every client", expr)}
	}
	v := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(expr, "${"), "$"), "}")
	if h, ok := strings.CutPrefix(v, "http_"); ok && h != "" && isVarName(h) && strings.Count(expr, "$") == 1 {
		name := headerName(h)
		return "header:" + name, []string{fmt.Sprintf("key %s: one quota per %s value; requests without %s have an empty key and are not limited at all", expr, name, name)}
	}
	return KeyUnknown, []string{fmt.Sprintf("key %s is none of ip, global or header:NAME", expr)}
}

func isVarName(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			return false
		}
	}
	return true
}

// headerName turns an nginx $http_ variable suffix into the header's
// canonical name: x_api_key → X-Api-Key.
func headerName(v string) string {
	parts := strings.Split(strings.ToLower(v), "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}
