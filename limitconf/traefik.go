package limitconf

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
	"golang.org/x/net/http/httpguts"
)

// traefikMiddleware is one rateLimit middleware.
type traefikMiddleware struct {
	name string
	n    *node // the rateLimit mapping
	used bool
}

// traefikRouter is a router that may use middlewares.
type traefikRouter struct {
	name        string
	rule        string
	line        int
	middlewares []string
}

func parseTraefik(data []byte, file string) (*Import, error) {
	var docs []*node
	if isTOML(data, file) {
		d, err := tomlDoc(data, file)
		if err != nil {
			return nil, err
		}
		docs = []*node{d}
	} else {
		d, err := yamlDocs(data, file)
		if err != nil {
			return nil, err
		}
		docs = d
	}
	var mws []*traefikMiddleware
	var routers []traefikRouter
	for _, doc := range docs {
		// File provider: http.middlewares.NAME.rateLimit, http.routers.
		for i, name := range doc.path("http", "middlewares").mapKeys() {
			if rl := doc.path("http", "middlewares").vals[i].get("rateLimit"); rl != nil {
				mws = append(mws, &traefikMiddleware{name: name, n: rl})
			}
		}
		rs := doc.path("http", "routers")
		for i, name := range rs.mapKeys() {
			rt := rs.vals[i]
			r := traefikRouter{name: name, line: rt.line}
			r.rule, _ = rt.get("rule").scalar()
			for _, m := range rt.get("middlewares").listItems() {
				if s, ok := m.scalar(); ok {
					r.middlewares = append(r.middlewares, s)
				}
			}
			routers = append(routers, r)
		}
		// Kubernetes CRDs: kind Middleware with spec.rateLimit;
		// IngressRoute with spec.routes[].match and middlewares[].name.
		kind, _ := doc.get("kind").scalar()
		name, _ := doc.path("metadata", "name").scalar()
		switch kind {
		case "Middleware":
			if rl := doc.path("spec", "rateLimit"); rl != nil {
				mws = append(mws, &traefikMiddleware{name: name, n: rl})
			}
		case "IngressRoute":
			for i, rt := range doc.path("spec", "routes").listItems() {
				r := traefikRouter{name: fmt.Sprintf("%s.routes[%d]", name, i), line: rt.line}
				r.rule, _ = rt.get("match").scalar()
				for _, m := range rt.get("middlewares").listItems() {
					if s, ok := m.get("name").scalar(); ok {
						r.middlewares = append(r.middlewares, s)
					}
				}
				routers = append(routers, r)
			}
		}
	}
	im := &Import{}
	for _, mw := range mws {
		base, err := traefikRule(mw, file, im)
		if skipPlaceholder(err, im) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if base == nil {
			continue
		}
		for _, rt := range routers {
			for _, m := range rt.middlewares {
				if n, _, _ := strings.Cut(m, "@"); n != mw.name {
					continue
				}
				mw.used = true
				r := *base
				r.Notes = append([]string(nil), base.Notes...)
				r.Server, r.Location = rt.name, rt.rule
				r.Path, r.Prefix = traefikPaths(rt.rule)
				r.Endpoint.Path = orElse(r.Path, r.Prefix)
				if r.Path == "" && r.Prefix == "" && !strings.Contains(rt.rule, "Path") {
					r.Prefix, r.Endpoint.Path = "/", "/"
				}
				im.Rules = append(im.Rules, r)
			}
		}
		if !mw.used {
			r := *base
			r.Location, r.Prefix, r.Endpoint.Path = "middleware "+mw.name, "/", "/"
			im.Rules = append(im.Rules, r)
			im.add(finding(IDZoneUnused, verify.SeverityInfo, verify.Possible, base.Source, r.Location,
				"no router in this file uses middleware "+mw.name+": it limits only routers configured elsewhere",
				"check that a router lists "+mw.name+" in its middlewares"))
		}
	}
	return im, nil
}

func isTOML(data []byte, file string) bool {
	if strings.HasSuffix(strings.ToLower(file), ".toml") {
		return true
	}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		return strings.HasPrefix(l, "[")
	}
	return false
}

func (n *node) mapKeys() []string {
	if n == nil || n.kind != mapNode {
		return nil
	}
	return n.keys
}

func (n *node) listItems() []*node {
	if n == nil || n.kind != listNode {
		return nil
	}
	return n.vals
}

// traefikRule maps a rateLimit middleware (docs: "average and period
// define the rate at which the bucket refills, and burst is the size
// (volume) of the bucket"). It returns nil for average 0 (no limit).
func traefikRule(mw *traefikMiddleware, file string, im *Import) (*Rule, error) {
	n := mw.n
	if n.kind != mapNode {
		return nil, errAt(file, n.line, "rateLimit of %s must be a mapping, not %s", mw.name, describeKind(n))
	}
	at := Source{File: file, Line: n.line}
	var average int64
	if a := n.get("average"); a != nil {
		v, err := a.int64(file, "average")
		if err != nil {
			return nil, err
		}
		average, at.Line = v, a.line
	}
	if average <= 0 {
		im.add(finding(verify.IDConfigNotEnforced, verify.SeverityError, verify.Certain, at, "middleware "+mw.name,
			"rateLimit "+mw.name+" has no average (or 0): Traefik does not limit at all", "set average (requests per period) and burst"))
		return nil, nil
	}
	period := time.Second
	if p := n.get("period"); p != nil {
		d, err := p.duration(file, "period", true)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, errAt(file, p.line, "period must be positive")
		}
		period = d
	}
	burst := int64(1)
	if b := n.get("burst"); b != nil {
		v, err := b.int64(file, "burst")
		if err != nil {
			return nil, err
		}
		if v < 0 || v > math.MaxInt32 {
			return nil, errAt(file, b.line, "burst %d is out of range", v)
		}
		burst = max(v, 1)
	}
	rate := float64(average) / period.Seconds()
	r := &Rule{Source: at, Zone: mw.name, Family: TokenBucket, Rate: rate, Capacity: burst, Status: 429, Key: verify.KeyIP, KeyExpr: "remote address"}
	r.Notes = append(r.Notes, fmt.Sprintf("rateLimit %s: average %d per %s = %s, burst %d = the bucket's capacity", mw.name, average, period, units.HumanRate(rate), burst))
	if sc := n.get("sourceCriterion"); sc != nil {
		switch {
		case sc.get("requestHeaderName") != nil:
			h, _ := sc.get("requestHeaderName").scalar()
			if !httpguts.ValidHeaderFieldName(h) {
				return nil, errAt(file, sc.line, "requestHeaderName needs a header name, not %q", h)
			}
			r.Key, r.KeyExpr = "header:"+h, "requestHeaderName "+h
			r.Notes = append(r.Notes, "requests without "+h+" share one quota (Traefik groups them by an empty value)")
		case sc.get("requestHost") != nil:
			r.Key, r.KeyExpr = verify.KeyGlobal, "requestHost"
			r.Notes = append(r.Notes, "one quota per Host header, shared by every client")
		case sc.get("ipStrategy") != nil:
			depth, _ := sc.path("ipStrategy", "depth").scalar()
			r.KeyExpr = "ipStrategy"
			if depth != "" && depth != "0" {
				r.KeyExpr = "ipStrategy depth " + depth + " (X-Forwarded-For)"
				r.Notes = append(r.Notes, "the client address is read from X-Forwarded-For at depth "+depth+": right only behind that many trusted proxies")
			}
		}
	}
	r.Endpoint = verify.Endpoint{Rate: rate, Capacity: burst, Key: r.Key, Status: 429}
	return r, nil
}

var traefikPathRe = regexp.MustCompile("(Path|PathPrefix|PathRegexp)\\(\\s*[`\"]([^`\"]*)[`\"]")

// traefikPaths reads a router rule's first Path or PathPrefix matcher.
func traefikPaths(rule string) (path, prefix string) {
	m := traefikPathRe.FindStringSubmatch(rule)
	if m == nil || strings.Contains(m[2], "{") {
		return "", ""
	}
	switch m[1] {
	case "Path":
		return urlPath(m[2]), ""
	case "PathPrefix":
		return "", urlPath(m[2])
	}
	return "", ""
}
