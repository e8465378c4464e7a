package limitconf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// envoyFilter is the HTTP local rate limit filter's name.
const envoyFilter = "envoy.filters.http.local_ratelimit"

// walkTree calls f on every node with its ancestors (nearest last) and the
// keys leading to it.
func walkTree(n *node, anc []*node, trail []string, f func(n *node, anc []*node, trail []string)) {
	if n == nil || len(anc) > 4*maxNesting {
		return
	}
	f(n, anc, trail)
	anc = append(anc, n)
	switch n.kind {
	case mapNode:
		for i, k := range n.keys {
			walkTree(n.vals[i], anc, append(trail, k), f)
		}
	case listNode:
		for _, v := range n.vals {
			walkTree(v, anc, trail, f)
		}
	}
}

func parseEnvoy(data []byte, file string) (*Import, error) {
	docs, err := yamlDocs(data, file)
	if err != nil {
		return nil, err
	}
	im := &Import{}
	filterListed := false
	var perRoute []*Rule
	for _, doc := range docs {
		snakeKeys(doc, 0)
		var werr error
		walkTree(doc, nil, nil, func(n *node, anc []*node, trail []string) {
			if werr != nil || n.kind != mapNode {
				return
			}
			if name, _ := n.get("name").scalar(); name == envoyFilter && slices.Contains(trail, "http_filters") {
				filterListed = true
			}
			if istioInserts(n) {
				filterListed = true
			}
			tb := n.get("token_bucket")
			if tb == nil || slices.Contains(trail, "descriptors") {
				return
			}
			r, err := envoyRule(n, tb, anc, trail, file, im)
			if skipPlaceholder(err, im) {
				return
			}
			if err != nil {
				werr = err
				return
			}
			im.Rules = append(im.Rules, *r)
			if slices.Contains(trail, "typed_per_filter_config") {
				perRoute = append(perRoute, r)
			}
		})
		if werr != nil {
			return nil, werr
		}
	}
	if !filterListed && len(perRoute) > 0 {
		for _, r := range perRoute {
			im.add(finding(verify.IDConfigNotEnforced, verify.SeverityError, verify.Certain, r.Source, r.Location,
				"a per-route local rate limit is configured, but no HTTP connection manager lists "+envoyFilter+" in http_filters: the per-route settings are never read",
				"add the filter to http_filters (without a token_bucket it limits only the routes that configure one)"))
		}
	}
	return im, nil
}

// istioInserts reports whether n is an Istio EnvoyFilter config patch
// that puts the local rate limit filter into the HTTP filter chain
// (applyTo HTTP_FILTER, patch.value.name the filter, any operation but
// REMOVE).
func istioInserts(n *node) bool {
	applyTo, _ := n.get("apply_to").scalar()
	name, _ := n.path("patch", "value", "name").scalar()
	op, _ := n.path("patch", "operation").scalar()
	return applyTo == "HTTP_FILTER" && name == envoyFilter && op != "REMOVE"
}

func envoyRule(cfg, tb *node, anc []*node, trail []string, file string, im *Import) (*Rule, error) {
	maxN := tb.get("max_tokens")
	if maxN == nil {
		return nil, errAt(file, tb.line, "token_bucket needs max_tokens")
	}
	maxTokens, err := maxN.int64(file, "max_tokens")
	if err != nil {
		return nil, err
	}
	perFill := int64(1)
	if n := tb.get("tokens_per_fill"); n != nil {
		if n.kind == mapNode { // UInt32Value written as {value: N}
			n = n.get("value")
		}
		if perFill, err = n.int64(file, "tokens_per_fill"); err != nil {
			return nil, err
		}
	}
	fi := tb.get("fill_interval")
	if fi == nil {
		return nil, errAt(file, tb.line, "token_bucket needs fill_interval")
	}
	interval, err := envoyDuration(fi, file)
	if err != nil {
		return nil, err
	}
	switch {
	case maxTokens < 0 || maxTokens > math.MaxUint32:
		return nil, errAt(file, maxN.line, "max_tokens %d is out of range", maxTokens)
	case perFill <= 0 || perFill > math.MaxUint32:
		return nil, errAt(file, tb.line, "tokens_per_fill must be a positive whole number")
	case interval <= 0:
		return nil, errAt(file, fi.line, "fill_interval must be positive")
	}
	r := &Rule{Source: Source{File: file, Line: tb.line}, Key: verify.KeyGlobal, KeyExpr: "(one bucket per Envoy process)", Status: 429}
	r.Server, r.Location, r.Path, r.Prefix = envoyPlace(anc, trail)
	if s := cfg.get("status"); s != nil {
		code, err := envoyStatus(s, file)
		if err != nil {
			return nil, err
		}
		r.Status = code
	}
	if v, _ := cfg.get("local_rate_limit_per_downstream_connection").scalar(); v == "true" {
		r.Key, r.KeyExpr = KeyUnknown, "(one bucket per downstream connection)"
		r.Notes = append(r.Notes, "local_rate_limit_per_downstream_connection: each connection has its own bucket; checked as one global quota over one connection's worth")
	}
	if cfg.get("descriptors") != nil {
		im.add(finding(IDNotInterpreted, verify.SeverityInfo, verify.Certain, Source{File: file, Line: cfg.get("descriptors").line}, r.Location,
			"descriptors (per-descriptor buckets) are not imported; only the default token_bucket is", "check descriptor limits with a policy file of your own"))
	}
	rate := float64(perFill) / interval.Seconds()
	step := min(perFill, maxTokens)
	if maxTokens == 0 {
		return nil, errAt(file, maxN.line, "max_tokens 0 is refused, as Envoy refuses it (max_tokens must be > 0)")
	}
	r.Rate, r.Capacity, r.RefillTokens, r.RefillEvery = rate, maxTokens, perFill, interval
	if perFill >= maxTokens {
		r.Family, r.Limit, r.Window, r.Align = FixedWindow, maxTokens, interval, AlignTimer
		r.Also = []Family{TokenBucket}
		r.Notes = append(r.Notes, fmt.Sprintf("tokens_per_fill %d ≥ max_tokens %d: each fill_interval %s refills the bucket whole, a fixed window of %d on Envoy's fill timer (timer-based Envoy; releases from mid-2024 on refill continuously at %s)", perFill, maxTokens, interval, maxTokens, units.HumanRate(rate)))
	} else {
		r.Family = TokenBucket
		r.Also = []Family{FixedWindow}
		r.Notes = append(r.Notes, fmt.Sprintf("max_tokens %d, %d tokens every %s: a token bucket of capacity %d at %s (stepwise in timer-based Envoy, continuous in releases from mid-2024 on)", maxTokens, perFill, interval, maxTokens, units.HumanRate(rate)))
	}
	// The bound that holds for the stepwise (timer) and the continuous
	// bucket alike: whatever the phase of the fill timer, an interval of
	// length L sees at most max_tokens + min(tokens_per_fill, max_tokens)
	// per started fill interval.
	r.Endpoint = verify.Endpoint{Path: orElse(r.Path, r.Prefix), Rate: rate, Capacity: maxTokens + step, Key: verifyKey(r.Key), Status: r.Status}
	r.Notes = append(r.Notes, fmt.Sprintf("checked against %d = max_tokens %d + min(tokens_per_fill, max_tokens) %d at rate %s: a fill may land inside a burst, and no fill-timer phase can exceed it", maxTokens+step, maxTokens, step, units.HumanRate(rate)))
	lintEnvoyRuntime(cfg, r, file, im)
	return r, nil
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func verifyKey(k string) string {
	if k == KeyUnknown {
		return verify.KeyGlobal
	}
	return k
}

// envoyDuration reads a protobuf Duration in YAML: "1s" or {seconds, nanos}.
func envoyDuration(n *node, file string) (time.Duration, error) {
	if n.kind == mapNode {
		var d time.Duration
		if s := n.get("seconds"); s != nil {
			v, err := s.int64(file, "fill_interval.seconds")
			if err != nil {
				return 0, err
			}
			if v < 0 || v > math.MaxInt64/int64(time.Second) {
				return 0, errAt(file, s.line, "fill_interval.seconds is out of range")
			}
			d += time.Duration(v) * time.Second
		}
		if s := n.get("nanos"); s != nil {
			v, err := s.int64(file, "fill_interval.nanos")
			if err != nil {
				return 0, err
			}
			if v < 0 || v >= 1e9 {
				return 0, errAt(file, s.line, "fill_interval.nanos is out of range")
			}
			d += time.Duration(v)
		}
		return d, nil
	}
	s, _ := n.scalar()
	if _, ph := placeholderIn(s); ph {
		return n.duration(file, "fill_interval", false)
	}
	if !strings.HasSuffix(s, "s") {
		return 0, errAt(file, n.line, "fill_interval %q: a protobuf duration ends in s, as 1s or 0.5s", s)
	}
	return n.duration(file, "fill_interval", false)
}

// envoyStatus reads LocalRateLimit.status ({code: TooManyRequests}).
func envoyStatus(n *node, file string) (int, error) {
	c := n.get("code")
	if c == nil {
		return 0, errAt(file, n.line, "status needs a code, as {code: TooManyRequests}")
	}
	s, _ := c.scalar()
	names := map[string]int{"TooManyRequests": 429, "ServiceUnavailable": 503, "Forbidden": 403, "BadRequest": 400}
	if v, ok := names[s]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 400 || v > 599 {
		return 0, errAt(file, c.line, "status code %q: want TooManyRequests, ServiceUnavailable or a number from 400 to 599", s)
	}
	return v, nil
}

// envoyPlace names where a LocalRateLimit config applies, from its
// ancestors: a route (its match), a virtual host, or every route of the
// HTTP connection manager that lists it.
func envoyPlace(anc []*node, trail []string) (server, loc, path, prefix string) {
	if !slices.Contains(trail, "typed_per_filter_config") {
		// One bucket for every route: any routed URL shows it.
		return "", "(every route)", "/", "/"
	}
	for i := len(anc) - 1; i >= 0; i-- {
		a := anc[i]
		if applyTo, ok := a.get("apply_to").scalar(); ok && a.get("patch") != nil {
			// An Istio EnvoyFilter patch: its match names the route.
			vh := a.path("match", "route_configuration", "vhost")
			server, _ = vh.get("name").scalar()
			if rn, ok := vh.path("route", "name").scalar(); ok {
				return server, "(route " + rn + ")", "", ""
			}
			if server != "" {
				return server, "(virtual host " + server + ")", "", "/"
			}
			return "", "(routes patched by " + applyTo + ")", "", "/"
		}
		if m := a.get("match"); m != nil && a.get("typed_per_filter_config") != nil {
			for j := i - 1; j >= 0; j-- {
				if name, ok := anc[j].get("name").scalar(); ok && anc[j].get("domains") != nil {
					server = name
					break
				}
			}
			if p, ok := m.get("path").scalar(); ok {
				return server, "path " + p, urlPath(p), ""
			}
			if p, ok := m.get("prefix").scalar(); ok {
				return server, "prefix " + p, "", urlPath(p)
			}
			if p, ok := m.get("path_separated_prefix").scalar(); ok {
				return server, "prefix " + p, "", urlPath(p)
			}
			if re, ok := m.path("safe_regex", "regex").scalar(); ok {
				return server, "regex " + re, "", ""
			}
			return server, "(a route)", "", ""
		}
		if name, ok := a.get("name").scalar(); ok && a.get("domains") != nil && a.get("typed_per_filter_config") != nil {
			return name, "(virtual host " + name + ")", "", "/"
		}
	}
	return "", "(per-filter config)", "", "/"
}

// envoyFraction reads a RuntimeFractionalPercent's default as a share.
func envoyFraction(n *node) (float64, bool) {
	dv := n.get("default_value")
	if dv == nil {
		return 0, false
	}
	num := 0.0
	if s, ok := dv.get("numerator").scalar(); ok {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		num = v
	}
	den := 100.0
	switch s, _ := dv.get("denominator").scalar(); s {
	case "TEN_THOUSAND":
		den = 1e4
	case "MILLION":
		den = 1e6
	}
	return num / den, true
}

// lintEnvoyRuntime: the filter limits only the share of requests that
// filter_enabled and filter_enforced give, 0 % when they are absent
// ("Defaults to 0% of requests for safety", local_rate_limit.proto).
func lintEnvoyRuntime(cfg *node, r *Rule, file string, im *Import) {
	for _, f := range []string{"filter_enabled", "filter_enforced"} {
		n := cfg.get(f)
		if n == nil {
			im.add(finding(verify.IDConfigNotEnforced, verify.SeverityError, verify.Certain, r.Source, r.Location,
				f+" is not set: Envoy applies the local rate limit to 0 % of requests by default, so nothing is limited",
				"add "+f+": {runtime_key: ..., default_value: {numerator: 100, denominator: HUNDRED}}"))
			continue
		}
		share, ok := envoyFraction(n)
		if ok && share < 1 {
			cert := verify.Certain
			if _, rk := n.get("runtime_key").scalar(); rk {
				cert = verify.Possible // the runtime may raise it
			}
			im.add(finding(verify.IDConfigNotEnforced, verify.SeverityError, cert, Source{File: file, Line: n.line}, r.Location,
				fmt.Sprintf("%s defaults to %.4g %% of requests: the rest pass unlimited", f, share*100),
				"set default_value to numerator: 100, denominator: HUNDRED"))
		}
	}
}
