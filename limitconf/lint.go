package limitconf

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/verify"
)

// hintReturn is what to do about a location answered in the rewrite phase.
const hintReturn = "answer from a handler that runs after limit_req's preaccess phase: proxy_pass, a static file, or try_files /.no-such-file @named with the return in @named"

// hintRedirect is what to do about a redirect in front of a limit.
const hintRedirect = "redirect from a server or location without limits, or limit the location the redirect leads to"

// add appends a finding unless the same one (id, place, endpoint, server
// block) is there already.
func (im *Import) add(f Finding) {
	for _, g := range im.Findings {
		if g.ID == f.ID && g.Source == f.Source && g.Endpoint == f.Endpoint && g.server == f.server {
			return
		}
	}
	im.Findings = append(im.Findings, f)
}

// lintLocation reports what keeps a limited nginx location's limit from
// holding: every answer in the rewrite phase, at server level or in the
// location, which runs before limit_req's preaccess phase (certain when
// it answers every request, possible when it depends on the request);
// dry-run mode; queueing.
func (c *nginxConf) lintLocation(r *Rule, l limitReq, body []*directive, ctx limitCtx, proxies bool) {
	ep := r.Location
	limited := fmt.Sprintf("%s is limited by %s (%s)", r.Location, l.text, l.at)
	add := func(at Source, cert verify.Certainty, msg, hint string) {
		c.addf(r.server, finding(verify.IDConfigNotEnforced, verify.SeverityError, cert, at, ep, limited+", but "+msg, hint))
	}
	if ctx.dryRun {
		add(ctx.dryRunAt, verify.Certain, "limit_req_dry_run on: requests are counted and never rejected",
			"remove limit_req_dry_run on once the limit is tuned")
	}
	for _, a := range ctx.answers {
		switch {
		case a.cond == "" && a.what == "return":
			add(a.d.src(), verify.Certain, "the server-level return answers every request in the server's rewrite phase, before any location is chosen", hintReturn)
		case a.cond == "":
			add(a.d.src(), verify.Certain, "the server-level "+a.what+" redirects every request in the server's rewrite phase, before any location is chosen", hintRedirect)
		default:
			add(a.d.src(), verify.Possible, "when "+a.cond+", the server-level "+a.what+" answers in the server's rewrite phase, before any location is chosen, unlimited", a.hint())
		}
	}
	if s := answersIn(body); s != nil {
		add(s.src(), verify.Certain, "return answers in the rewrite phase, before limit_req's preaccess phase runs: nothing is limited", hintReturn)
	}
	for _, a := range answers(body) {
		switch {
		case a.what == "return" && a.cond == "":
			// answersIn reported it
		case a.cond == "":
			add(a.d.src(), verify.Certain, a.what+" redirects every request in the rewrite phase, unlimited", hintRedirect)
		default:
			add(a.d.src(), verify.Possible, "when "+a.cond+", "+a.what+" answers in the rewrite phase, unlimited", a.hint())
		}
	}
	for _, s := range body {
		if s.name == "rewrite" && len(s.args) >= 3 && s.args[2] == "last" && !redirects(s) {
			add(s.src(), verify.Possible, "rewrite … last moves requests matching "+s.args[0]+" to another location before limit_req runs: that location's limits apply instead",
				"put the limit in the location the rewrite leads to")
		}
	}
	if r.Family == LeakyBucketQueue {
		sev := verify.SeverityInfo
		if proxies || strings.Contains(strings.ToLower(r.Location), "api") {
			sev = verify.SeverityWarning
		}
		held := time.Duration(float64(l.burst-l.delay) / r.Rate * float64(time.Second))
		c.addf(r.server, finding(IDQueueingLatency, sev, verify.Certain, l.at, ep,
			fmt.Sprintf("burst=%d without nodelay: up to %d excess requests are held, the last about %s, before they are served", l.burst, l.burst-l.delay, held),
			"add nodelay (or delay=N) so that excess requests are served at once or rejected, not queued"))
	}
}

// hint is what to do about an answer in front of a limit.
func (a answer) hint() string {
	if a.d.name == "rewrite" {
		return hintRedirect
	}
	return hintReturn
}

// lintZones reports zones no limit_req uses and keys that a proxy in
// front of nginx would collapse.
func (c *nginxConf) lintZones() {
	var byAddr []*zone
	defer func() {
		if len(byAddr) == 0 {
			return
		}
		names := make([]string, len(byAddr))
		for i, z := range byAddr {
			names[i] = z.name
		}
		f := finding(IDKeyBehindProxy, verify.SeverityInfo, verify.Possible, byAddr[0].at, "",
			fmt.Sprintf("zone %s keyed by the connection's address (%s): behind a load balancer, CDN or proxy every client arrives from the proxy's address and all share one quota (this config has no set_real_ip_from / real_ip_header)", strings.Join(names, ", "), byAddr[0].keyExpr),
			"if nginx sits behind a proxy, configure the realip module (set_real_ip_from PROXY; real_ip_header X-Forwarded-For;)")
		f.zones = names
		c.im.add(f)
	}()
	add := func(z *zone, f Finding) {
		f.zones = []string{z.name}
		c.im.add(f)
	}
	for _, z := range c.zoneList {
		if !z.used && !c.mentioned[z.name] {
			add(z, finding(IDZoneUnused, verify.SeverityWarning, verify.Certain, z.at, "",
				fmt.Sprintf("zone %s (rate=%s) is defined but no limit_req uses it: it limits nothing", z.name, z.rateSrc),
				"add limit_req zone="+z.name+" where it should apply, or remove the zone"))
			continue
		}
		if !z.used {
			continue
		}
		key, _ := nginxKey(z.keyExpr)
		switch {
		case key == verify.KeyIP && !c.realIP:
			byAddr = append(byAddr, z)
		case key == KeyUnknown:
			add(z, finding(IDKeyUnknown, verify.SeverityInfo, verify.Certain, z.at, "",
				fmt.Sprintf("zone %s is keyed by %s, which rlprobe cannot vary: it is checked as one global quota", z.name, z.keyExpr),
				"key by $binary_remote_addr, $http_NAME or a constant to have the key checked too"))
		case strings.EqualFold(key, "header:X-Forwarded-For") || strings.EqualFold(key, "header:X-Real-Ip"):
			add(z, finding(IDKeyBehindProxy, verify.SeverityWarning, verify.Certain, z.at, "",
				fmt.Sprintf("zone %s is keyed by %s, a header any client can set: a fresh value is a fresh quota", z.name, z.keyExpr),
				"key by $binary_remote_addr with the realip module trusting only your proxies (set_real_ip_from)"))
		}
	}
}

// sortFindings orders findings most severe first, certain before
// possible, then by file and line.
func sortFindings(fs []Finding) {
	rank := func(f Finding) int {
		r := 0
		switch f.Severity {
		case verify.SeverityError:
			r = 0
		case verify.SeverityWarning:
			r = 2
		default:
			r = 4
		}
		if f.Certainty != verify.Certain {
			r++
		}
		return r
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.Source.File, b.Source.File),
			cmp.Compare(a.Source.Line, b.Source.Line), strings.Compare(a.Endpoint, b.Endpoint))
	})
}
