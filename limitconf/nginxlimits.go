package limitconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The limit directives, read by nginx's rules (ngx_http_limit_req_module.c):
// what nginx refuses is refused here, in nginx's words, and the numbers
// are nginx's numbers.

// limitDirectives are the directives of ngx_http_limit_req_module, and
// where nginx allows them.
var limitDirectives = map[string][]nginxCtx{
	"limit_req_zone":      {httpCtx},
	"limit_req":           {httpCtx, serverCtx, locationCtx},
	"limit_req_status":    {httpCtx, serverCtx, locationCtx},
	"limit_req_dry_run":   {httpCtx, serverCtx, locationCtx},
	"limit_req_log_level": {httpCtx, serverCtx, locationCtx},
}

// nodelay is the delay nginx gives nodelay (NGX_MAX_INT_T_VALUE / 1000).
const nodelay = math.MaxInt64 / 1000

// ngxAtoi is nginx's ngx_atoi: decimal digits only, no sign, no overflow.
func ngxAtoi(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// nginxRate parses a rate as nginx does: N followed by r/s or r/m, or N
// alone (per second). nginx keeps it in requests per 1000 s, truncated
// (rate * 1000 / 60 for r/m), so 1r/m is 16 per 1000 s: one request
// every 62.5 s. It returns that count.
func nginxRate(s string) (perKs int64, err error) {
	num, scale := s, int64(1)
	if len(s) >= 3 {
		switch s[len(s)-3:] {
		case "r/s":
			num = s[:len(s)-3]
		case "r/m":
			num, scale = s[:len(s)-3], 60
		}
	}
	n, ok := ngxAtoi(num)
	if !ok || n <= 0 || n > math.MaxInt64/1000 {
		return 0, fmt.Errorf("invalid rate \"rate=%s\" (nginx takes Nr/s or Nr/m, N a whole number above 0)", s)
	}
	return n * 1000 / scale, nil
}

// nginxSize is ngx_parse_size: a number with an optional k, m or g.
func nginxSize(s string) (int64, bool) {
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, ok := ngxAtoi(s)
	if !ok || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// minZoneSize is 8 pages of 4 KiB: nginx refuses a smaller zone.
const minZoneSize = 8 * 4096

func argCountErr(d *directive) error {
	return errAt(d.file, d.line, "invalid number of arguments in %q directive", d.name)
}

// zone reads a limit_req_zone. A placeholder left in its size or rate
// is placeholder-unset: the zone is known, its limits not read.
func (c *nginxConf) zone(d *directive) error {
	args := d.args
	if len(args) == 4 && args[3] == "sync" { // NGINX Plus
		args = args[:3]
	}
	if len(args) != 3 {
		return argCountErr(d)
	}
	z := &zone{at: d.src(), keyExpr: args[0], perKs: 1000, rateSrc: "1r/s (nginx's default)"}
	for _, a := range args[1:] {
		switch {
		case strings.HasPrefix(a, "zone="):
			name, size, ok := strings.Cut(a[len("zone="):], ":")
			if !ok {
				return errAt(d.file, d.line, "invalid zone size %q", a)
			}
			z.name = name
			if _, ph := placeholderIn(size); ph {
				c.addf(d.server, placeholderFinding(d.src(), "limit_req_zone's zone size", size))
				z.unread = true
				continue
			}
			n, ok := nginxSize(size)
			if !ok {
				return errAt(d.file, d.line, "invalid zone size %q", a)
			}
			if n < minZoneSize {
				return errAt(d.file, d.line, "zone %q is too small (nginx takes at least 32k)", a)
			}
		case strings.HasPrefix(a, "rate="):
			v := a[len("rate="):]
			if _, ph := placeholderIn(v); ph {
				c.addf(d.server, placeholderFinding(d.src(), "limit_req_zone's rate", v))
				z.unread, z.rateSrc = true, v+", not read"
				continue
			}
			r, err := nginxRate(v)
			if err != nil {
				return errAt(d.file, d.line, "%v", err)
			}
			z.perKs, z.rateSrc = r, v
		default:
			return errAt(d.file, d.line, "invalid parameter %q", a)
		}
	}
	if z.name == "" {
		return errAt(d.file, d.line, "\"limit_req_zone\" must have \"zone\" parameter")
	}
	if old, ok := c.zones[z.name]; ok {
		return errAt(d.file, d.line, "limit_req_zone %q is already bound to key %q (defined at %s): a zone is defined once", z.name, old.keyExpr, old.at)
	}
	z.rate = float64(z.perKs) / 1000
	c.zones[z.name] = z
	c.zoneList = append(c.zoneList, z)
	return nil
}

// limitReq reads a limit_req directive.
func (c *nginxConf) limitReq(d *directive) (limitReq, error) {
	l := limitReq{at: d.src(), text: "limit_req " + strings.Join(d.args, " ")}
	if len(d.args) < 1 || len(d.args) > 3 {
		return l, argCountErr(d)
	}
	for _, a := range d.args {
		k, v, _ := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(a, "zone="):
			l.zone = v
		case strings.HasPrefix(a, "burst=") || strings.HasPrefix(a, "delay="):
			if _, ph := placeholderIn(v); ph {
				c.addf(d.server, placeholderFinding(d.src(), "limit_req's "+k, v))
				l.unread = true
				continue
			}
			n, ok := ngxAtoi(v)
			if !ok || n <= 0 {
				return l, errAt(d.file, d.line, "invalid %s value %q (nginx takes a whole number above 0)", k, a)
			}
			if k == "burst" {
				l.burst = min(n, nodelay)
			} else {
				l.delay = min(n, nodelay)
			}
		case a == "nodelay":
			l.delay = nodelay
		default:
			return l, errAt(d.file, d.line, "invalid parameter %q", a)
		}
	}
	if l.zone == "" {
		return l, errAt(d.file, d.line, "\"limit_req\" must have \"zone\" parameter")
	}
	l.nodelay = l.delay == nodelay
	z, ok := c.zones[l.zone]
	if !ok {
		return l, errAt(d.file, d.line, "limit_req: zone %q is unknown: no limit_req_zone defines it (nginx: zero size shared memory zone %q)", l.zone, l.zone)
	}
	z.used = true
	l.unread = l.unread || z.unread
	return l, nil
}

// level reads a level's own limit directives into the context inherited
// from its parent.
func (c *nginxConf) level(ds []*directive, parent limitCtx) (limitCtx, error) {
	ctx := parent
	var own []limitReq
	seen := map[string]bool{}
	dup := func(d *directive) error {
		if seen[d.name] {
			return errAt(d.file, d.line, "%q directive is duplicate", d.name)
		}
		seen[d.name] = true
		return nil
	}
	for _, d := range ds {
		switch d.name {
		case "limit_req":
			l, err := c.limitReq(d)
			if err != nil {
				return ctx, err
			}
			for _, o := range own {
				if o.zone == l.zone {
					return ctx, errAt(d.file, d.line, "\"limit_req\" directive is duplicate: zone %s is limited at %s already", l.zone, o.at)
				}
			}
			own = append(own, l)
		case "limit_req_status":
			if len(d.args) != 1 {
				return ctx, argCountErr(d)
			}
			if err := dup(d); err != nil {
				return ctx, err
			}
			if _, ph := placeholderIn(d.args[0]); ph {
				c.addf(d.server, placeholderFinding(d.src(), "limit_req_status", d.args[0]))
				continue
			}
			s, ok := ngxAtoi(d.args[0])
			if !ok {
				return ctx, errAt(d.file, d.line, "\"limit_req_status\" directive invalid number %q", d.args[0])
			}
			if s < 400 || s > 599 {
				return ctx, errAt(d.file, d.line, "\"limit_req_status\" directive %s: nginx takes a status from 400 to 599", d.args[0])
			}
			ctx.status, ctx.statusAt = int(s), d.src()
		case "limit_req_dry_run":
			if len(d.args) != 1 {
				return ctx, argCountErr(d)
			}
			if err := dup(d); err != nil {
				return ctx, err
			}
			on := strings.EqualFold(d.args[0], "on")
			if !on && !strings.EqualFold(d.args[0], "off") {
				return ctx, errAt(d.file, d.line, "invalid value %q in \"limit_req_dry_run\" directive, it must be \"on\" or \"off\"", d.args[0])
			}
			ctx.dryRun, ctx.dryRunAt = on, d.src()
		case "limit_req_log_level":
			if len(d.args) != 1 {
				return ctx, argCountErr(d)
			}
			if err := dup(d); err != nil {
				return ctx, err
			}
			switch d.args[0] {
			case "info", "notice", "warn", "error":
			default:
				return ctx, errAt(d.file, d.line, "invalid value %q in \"limit_req_log_level\" directive", d.args[0])
			}
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

// rateNote says how nginx's arithmetic changes a per-minute rate.
func (z *zone) rateNote() string {
	if !strings.HasSuffix(z.rateSrc, "r/m") {
		return ""
	}
	n, _ := ngxAtoi(strings.TrimSuffix(z.rateSrc, "r/m"))
	if n*1000 == z.perKs*60 {
		return ""
	}
	return fmt.Sprintf("nginx keeps rates in requests per 1000 s, truncated: %s is %d per 1000 s (%s/s), one request every %s s, not %s", z.rateSrc, z.perKs,
		strconv.FormatFloat(z.rate, 'f', -1, 64), strconv.FormatFloat(1000/float64(z.perKs), 'f', -1, 64), strconv.FormatFloat(60/float64(n), 'f', -1, 64))
}
