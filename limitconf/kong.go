package limitconf

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/verify"
	"golang.org/x/net/http/httpguts"
)

// kongWindows are the rate-limiting plugin's fixed windows of a fixed
// length, in the order Kong documents them. Kong aligns each window to the
// clock (UTC): a minute window runs from :00 to :59.
var kongWindows = []struct {
	name string
	d    time.Duration
}{{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}}

// kongPlugin is a rate-limiting plugin instance and what it is attached to.
type kongPlugin struct {
	n              *node
	service, route string // "" when not attached to one
}

type kongRoute struct {
	name, service string
	paths         []string
	line          int
	// literal: no route of the file matches by regular expression, so
	// a route's first path, as a URL, is served by that route (Kong
	// picks the longest matching prefix).
	literal bool
}

func parseKong(data []byte, file string) (*Import, error) {
	docs, err := yamlDocs(data, file)
	if err != nil {
		return nil, err
	}
	var plugins []kongPlugin
	var routes []kongRoute
	for _, doc := range docs {
		if doc.kind != mapNode {
			return nil, errAt(file, doc.line, "a Kong declarative configuration is a mapping (_format_version, services, plugins)")
		}
		for _, p := range doc.get("plugins").listItems() {
			kp := kongPlugin{n: p}
			kp.service, _ = kongRef(p.get("service"))
			kp.route, _ = kongRef(p.get("route"))
			plugins = append(plugins, kp)
		}
		for si, svc := range doc.get("services").listItems() {
			sname := kongName(svc, fmt.Sprintf("services[%d]", si))
			for _, p := range svc.get("plugins").listItems() {
				plugins = append(plugins, kongPlugin{n: p, service: sname})
			}
			for ri, rt := range svc.get("routes").listItems() {
				routes = append(routes, kongRouteOf(rt, sname, fmt.Sprintf("%s.routes[%d]", sname, ri)))
				for _, p := range rt.get("plugins").listItems() {
					plugins = append(plugins, kongPlugin{n: p, service: sname, route: routes[len(routes)-1].name})
				}
			}
		}
		for ri, rt := range doc.get("routes").listItems() {
			svc, _ := kongRef(rt.get("service"))
			routes = append(routes, kongRouteOf(rt, svc, fmt.Sprintf("routes[%d]", ri)))
			for _, p := range rt.get("plugins").listItems() {
				plugins = append(plugins, kongPlugin{n: p, service: svc, route: routes[len(routes)-1].name})
			}
		}
	}
	im := &Import{}
	// Kong runs one instance of a plugin per request, the most specific:
	// route, then service, then global.
	pick := func(rt kongRoute) *kongPlugin {
		var best *kongPlugin
		rank := -1
		for i := range plugins {
			p := &plugins[i]
			if name, _ := p.n.get("name").scalar(); name != "rate-limiting" {
				continue
			}
			if p.n.get("consumer") != nil || p.n.get("consumer_group") != nil {
				continue
			}
			r := -1
			switch {
			case p.route != "" && p.route == rt.name:
				r = 2
			case p.route == "" && p.service != "" && p.service == rt.service:
				r = 1
			case p.route == "" && p.service == "":
				r = 0
			}
			if r > rank {
				best, rank = p, r
			}
		}
		return best
	}
	regex := false
	for _, rt := range routes {
		for _, p := range rt.paths {
			regex = regex || strings.HasPrefix(p, "~")
		}
	}
	for _, rt := range routes {
		rt.literal = !regex
		p := pick(rt)
		if p == nil {
			continue
		}
		if err := kongRules(p, rt, file, im); err != nil && !skipPlaceholder(err, im) {
			return nil, err
		}
	}
	if len(routes) == 0 {
		for i := range plugins {
			if name, _ := plugins[i].n.get("name").scalar(); name == "rate-limiting" {
				if err := kongRules(&plugins[i], kongRoute{name: "(every route)", paths: []string{"/"}}, file, im); err != nil && !skipPlaceholder(err, im) {
					return nil, err
				}
			}
		}
	}
	return im, nil
}

func kongName(n *node, def string) string {
	if s, ok := n.get("name").scalar(); ok && s != "" {
		return s
	}
	return def
}

// kongRef reads a reference to a service or route: a name, or {name} / {id}.
func kongRef(n *node) (string, bool) {
	if n == nil {
		return "", false
	}
	if s, ok := n.scalar(); ok {
		return s, true
	}
	if s, ok := n.get("name").scalar(); ok {
		return s, true
	}
	return n.get("id").scalar()
}

func kongRouteOf(rt *node, service, def string) kongRoute {
	r := kongRoute{name: kongName(rt, def), service: service, line: rt.line}
	for _, p := range rt.get("paths").listItems() {
		if s, ok := p.scalar(); ok {
			r.paths = append(r.paths, s)
		}
	}
	return r
}

// kongRules turns one rate-limiting plugin on one route into a rule per
// window: all apply at once.
func kongRules(p *kongPlugin, rt kongRoute, file string, im *Import) error {
	cfg := p.n.get("config")
	if cfg == nil || cfg.kind != mapNode {
		return errAt(file, p.n.line, "rate-limiting needs a config with at least one of second, minute, hour, day")
	}
	key, keyExpr, notes, err := kongKey(cfg, file)
	if err != nil {
		return err
	}
	status := 429
	if c := cfg.get("error_code"); c != nil {
		v, err := c.int64(file, "error_code")
		if err != nil {
			return err
		}
		if v < 400 || v > 599 {
			return errAt(file, c.line, "error_code %d: want 400 to 599", v)
		}
		status = int(v)
	}
	loc := rt.name
	prefix := ""
	if len(rt.paths) > 0 {
		loc += " " + strings.Join(rt.paths, ",")
		if !strings.HasPrefix(rt.paths[0], "~") {
			prefix = urlPath(rt.paths[0])
		}
	}
	exact := ""
	if rt.literal {
		exact = prefix
	}
	n, unread := 0, 0
	for _, w := range kongWindows {
		v := cfg.get(w.name)
		if v == nil {
			continue
		}
		if s, _ := v.scalar(); s == "null" || s == "" {
			continue
		}
		limit, err := v.int64(file, w.name)
		if skipPlaceholder(err, im) {
			unread++ // placeholder-unset says so
			continue
		}
		if err != nil {
			return err
		}
		if limit <= 0 {
			return errAt(file, v.line, "%s must be a positive number of requests, not %d", w.name, limit)
		}
		n++
		r := Rule{
			Source: Source{File: file, Line: v.line}, Server: rt.service, Location: loc, Path: exact, Prefix: prefix,
			Family: FixedWindow, Limit: limit, Window: w.d, Align: AlignEpoch,
			Key: key, KeyExpr: keyExpr, Status: status,
			Notes: append([]string{fmt.Sprintf("%s: %d: %d per clock-aligned %s (UTC), a fixed window; every window configured applies at once", w.name, limit, limit, w.name)}, notes...),
		}
		r.Endpoint = verify.Endpoint{Path: prefix, Limit: limit, Window: w.d, WindowType: verify.Fixed, Align: "epoch", Key: verifyKey(key), Status: status}
		im.Rules = append(im.Rules, r)
	}
	for _, w := range []string{"month", "year"} {
		if v := cfg.get(w); v != nil {
			if s, _ := v.scalar(); s != "null" {
				im.add(finding(IDNotInterpreted, verify.SeverityInfo, verify.Certain, Source{File: file, Line: v.line}, loc,
					w+" windows follow the calendar and are not imported", "check month and year quotas by other means"))
			}
		}
	}
	if n == 0 && unread == 0 {
		return errAt(file, cfg.line, "rate-limiting config has none of second, minute, hour, day")
	}
	if pol, _ := cfg.get("policy").scalar(); pol == "local" || pol == "" {
		for i := len(im.Rules) - n; i < len(im.Rules); i++ {
			im.Rules[i].Notes = append(im.Rules[i].Notes, "policy local: each Kong node counts alone; several nodes multiply the quota")
		}
	}
	return nil
}

// kongKey maps limit_by (default consumer) to the contract's key.
func kongKey(cfg *node, file string) (key, expr string, notes []string, err error) {
	by := "consumer"
	if s, ok := cfg.get("limit_by").scalar(); ok {
		by = s
	}
	switch by {
	case "ip":
		return verify.KeyIP, "limit_by ip", nil, nil
	case "consumer", "credential":
		return verify.KeyIP, "limit_by " + by, []string{"limit_by " + by + ": without an authenticated consumer Kong falls back to the client IP"}, nil
	case "header":
		h, _ := cfg.get("header_name").scalar()
		if !httpguts.ValidHeaderFieldName(h) {
			return "", "", nil, errAt(file, cfg.line, "limit_by header needs header_name, a header name (not %q)", h)
		}
		return "header:" + h, "limit_by header " + h, nil, nil
	case "service", "path":
		return verify.KeyGlobal, "limit_by " + by, []string{"limit_by " + by + ": one quota shared by every client"}, nil
	case "consumer-group":
		return KeyUnknown, "limit_by consumer-group", nil, nil
	}
	return "", "", nil, errAt(file, cfg.get("limit_by").line, "limit_by %s: want consumer, credential, ip, service, header, path or consumer-group", strconv.Quote(by))
}
