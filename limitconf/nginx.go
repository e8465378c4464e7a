package limitconf

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// nginx's default reject status (limit_req_status).
const nginxDefaultStatus = 503

// zone is an nginx limit_req_zone.
type zone struct {
	name    string
	keyExpr string
	rate    float64 // requests per second
	rateSrc string  // as written, e.g. "1r/s"
	at      Source
	used    bool
}

// limitReq is one limit_req directive.
type limitReq struct {
	zone    string
	burst   int64
	nodelay bool
	delay   int64
	at      Source
	text    string
}

// limitCtx is what a configuration level passes down (nginx merges these
// from http to server to location).
type limitCtx struct {
	reqs      []limitReq // replaced, not merged, by a level with its own
	status    int
	statusAt  Source
	dryRun    bool
	dryRunAt  Source
	serverRet *directive // a server-level return: answers before any location
	serverIf  *directive // a server-level if holding a return
}

// nginxConf is one parse of an nginx configuration.
type nginxConf struct {
	file     string
	zones    map[string]*zone
	zoneList []*zone
	realIP   bool // set_real_ip_from / real_ip_header present
	im       *Import
	// Of the server being read: whether it has regular-expression
	// locations, and its exact ones. A prefix location serves the URL of
	// its own prefix only when neither takes that URL first.
	regex bool
	exact map[string]bool
}

func parseNginx(data []byte, name string, o Options) (*Import, error) {
	r := &nginxReader{o: o, root: filepath.Dir(name)}
	top, err := r.parseFile(data, name, 0)
	if err != nil {
		return nil, err
	}
	c := &nginxConf{file: name, zones: map[string]*zone{}, im: &Import{}}
	c.im.Findings = append(c.im.Findings, r.skipped...)
	// An http block, or a snippet of one (conf.d files hold servers and
	// zones at their top level).
	var https [][]*directive
	for _, d := range top {
		if d.name == "http" && d.hasBlock {
			https = append(https, d.block)
		}
	}
	if len(https) == 0 {
		https = append(https, top)
	}
	walk(top, func(d *directive) {
		if d.name == "set_real_ip_from" || d.name == "real_ip_header" {
			c.realIP = true
		}
	})
	for _, h := range https {
		if err := c.zonesIn(h); err != nil {
			return nil, err
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

func (c *nginxConf) zonesIn(http []*directive) error {
	for _, d := range http {
		if d.name != "limit_req_zone" {
			continue
		}
		z := &zone{at: d.src()}
		if len(d.args) < 3 {
			return errAt(d.file, d.line, "limit_req_zone needs a key, zone=NAME:SIZE and rate=RATE")
		}
		z.keyExpr = d.args[0]
		for _, a := range d.args[1:] {
			switch {
			case strings.HasPrefix(a, "zone="):
				n, _, ok := strings.Cut(strings.TrimPrefix(a, "zone="), ":")
				if !ok || n == "" {
					return errAt(d.file, d.line, "limit_req_zone %q: want zone=NAME:SIZE", a)
				}
				z.name = n
			case strings.HasPrefix(a, "rate="):
				r, err := nginxRate(strings.TrimPrefix(a, "rate="))
				if err != nil {
					return errAt(d.file, d.line, "limit_req_zone: %v", err)
				}
				z.rate, z.rateSrc = r, strings.TrimPrefix(a, "rate=")
			case a == "sync":
			default:
				return errAt(d.file, d.line, "limit_req_zone: unknown parameter %q", a)
			}
		}
		if z.name == "" || z.rate == 0 {
			return errAt(d.file, d.line, "limit_req_zone needs zone=NAME:SIZE and rate=RATE")
		}
		if old, ok := c.zones[z.name]; ok {
			return errAt(d.file, d.line, "limit_req_zone: zone %q is already defined at %s", z.name, old.at)
		}
		c.zones[z.name] = z
		c.zoneList = append(c.zoneList, z)
	}
	return nil
}

// nginxRate parses nginx's rate syntax: a whole number of requests per
// second ("10r/s") or per minute ("30r/m") — units' grammar, narrowed to
// what nginx accepts.
func nginxRate(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "r/s")
	if !ok {
		num, ok = strings.CutSuffix(s, "r/m")
	}
	if !ok {
		return 0, fmt.Errorf("rate %q: nginx takes Nr/s or Nr/m", s)
	}
	if n, err := strconv.ParseUint(num, 10, 32); err != nil || n == 0 {
		return 0, fmt.Errorf("rate %q: want a positive whole number of requests, as 10r/s or 30r/m", s)
	}
	return units.ParseRate(s)
}

// level reads a level's own limit directives into the context inherited
// from its parent.
func (c *nginxConf) level(ds []*directive, parent limitCtx) (limitCtx, error) {
	ctx := parent
	var own []limitReq
	for _, d := range ds {
		switch d.name {
		case "limit_req":
			l, err := c.limitReq(d)
			if err != nil {
				return ctx, err
			}
			own = append(own, l)
		case "limit_req_status":
			if len(d.args) != 1 {
				return ctx, errAt(d.file, d.line, "limit_req_status takes one status code")
			}
			s, err := strconv.Atoi(d.args[0])
			if err != nil || s < 400 || s > 599 {
				return ctx, errAt(d.file, d.line, "limit_req_status %q: nginx takes a status from 400 to 599", d.args[0])
			}
			ctx.status, ctx.statusAt = s, d.src()
		case "limit_req_dry_run":
			if len(d.args) != 1 || (d.args[0] != "on" && d.args[0] != "off") {
				return ctx, errAt(d.file, d.line, "limit_req_dry_run takes on or off")
			}
			ctx.dryRun, ctx.dryRunAt = d.args[0] == "on", d.src()
		}
	}
	if len(own) > 0 {
		// nginx: "These directives are inherited from the previous
		// configuration level if and only if there are no limit_req
		// directives defined on the current level."
		ctx.reqs = own
	}
	return ctx, nil
}

func (c *nginxConf) limitReq(d *directive) (limitReq, error) {
	l := limitReq{at: d.src(), text: "limit_req " + strings.Join(d.args, " ")}
	for _, a := range d.args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "zone":
			l.zone = v
		case "burst", "delay":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > math.MaxInt32 {
				return l, errAt(d.file, d.line, "limit_req %s=%q: want a whole number", k, v)
			}
			if k == "burst" {
				l.burst = n
			} else {
				l.delay = n
			}
		case "nodelay":
			l.nodelay = true
		default:
			return l, errAt(d.file, d.line, "limit_req: unknown parameter %q", a)
		}
	}
	if l.zone == "" {
		return l, errAt(d.file, d.line, "limit_req needs zone=NAME")
	}
	z, ok := c.zones[l.zone]
	if !ok {
		return l, errAt(d.file, d.line, "limit_req: zone %q is unknown (no limit_req_zone defines it)", l.zone)
	}
	z.used = true
	if l.nodelay && l.delay > 0 {
		return l, errAt(d.file, d.line, "limit_req: nodelay and delay= are exclusive")
	}
	return l, nil
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
	for _, s := range d.block {
		switch {
		case s.name == "return" && ctx.serverRet == nil:
			ctx.serverRet = s
		case s.name == "if" && s.hasBlock && ctx.serverIf == nil && answersIn(s.block) != nil:
			ctx.serverIf = s
		}
	}
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
		pseudo := &directive{name: "location", args: []string{"/"}, file: d.file, line: d.line, hasBlock: true}
		return c.emit(pseudo, name, "/ (the whole server)", ctx, nil)
	}
	return nil
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
		return errAt(d.file, d.line, "location takes [= | ~ | ~* | ^~] PATH")
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
		return errAt(d.file, d.line, "location: unknown modifier %q", mod)
	}
	exact, prefix = urlPath(exact), urlPath(prefix)
	proxies := hasDirective(body, "proxy_pass", "fastcgi_pass", "grpc_pass", "uwsgi_pass", "scgi_pass")
	for _, l := range ctx.reqs {
		z := c.zones[l.zone]
		r := Rule{
			Source: l.at, ZoneAt: z.at, Zone: z.name, Server: server, Location: loc,
			Path: exact, Prefix: prefix,
			Rate: z.rate, Capacity: l.burst + 1, KeyExpr: z.keyExpr,
			Status: ctx.status, DryRun: ctx.dryRun,
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
		ep := verify.Endpoint{Path: orElse(exact, prefix), Rate: z.rate, Capacity: l.burst + 1, Key: r.Key, Status: ctx.status}
		if r.Key == KeyUnknown {
			ep.Key = verify.KeyGlobal
			r.Notes = append(r.Notes, "the key is checked as global: one client sees the limit as written")
		}
		r.Endpoint = ep
		c.im.Rules = append(c.im.Rules, r)
		c.lintLocation(&r, d, l, body, ctx, proxies)
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
