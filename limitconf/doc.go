// Package limitconf reads a rate limiter's own configuration — nginx
// limit_req, Envoy's HTTP local rate limit filter, Traefik's rateLimit
// middleware, Kong's rate-limiting plugin — and says what it promises, as
// rlprobe policies (verify.Policy) whose every rule names the file and
// line it comes from, together with what a static reading already shows
// the config cannot do (Lint findings). Parse is the entry point;
// WritePolicy writes a policy file; Targets and Judge hold the promise
// against the live target.
//
// Nothing here sends a request or reads the clock. Parse never panics:
// a malformed configuration is a *problem.Error with its file and line.
//
// # How a configuration becomes a policy
//
// Each row is one mapping; the table tests of this package have one case
// per row. "Family" is the algorithm the product's documentation
// describes (in infer's names); "policy" is the rule rlprobe checks.
//
//	product / setting                          family                policy rule
//	------------------------------------------ --------------------- ----------------------------------------------
//	nginx limit_req_zone rate=Nr/s | Nr/m,     token-bucket          rate N/s (N·1000/60 per 1000 s, truncated, as
//	                                                                 nginx keeps it: 1r/m is one per 62.5 s),
//	                                                                 capacity = burst + 1
//	  limit_req burst=B nodelay                                      (nginx's burst: the requests beyond the first)
//	nginx limit_req burst=B (no nodelay)       leaky-bucket-queue    rate, capacity B + 1; 1 served at once, B held
//	nginx limit_req burst=B delay=D (D < B)    leaky-bucket-queue    rate, capacity B + 1; D + 1 at once, B − D held
//	nginx limit_req burst=0 / delay ≥ burst    token-bucket          rate, capacity B + 1 (nothing is held)
//	nginx several limit_req on one level       all apply             one rule each; the smallest capacity binds
//	nginx a level with its own limit_req       replaces inherited    http → server → location, nested locations
//	nginx limit_req_status S (default 503)     —                     status S
//	nginx limit_req_dry_run on                 none (counts only)    rule kept; lint: config-not-enforced, certain
//	nginx key $binary_remote_addr/$remote_addr —                     key ip
//	nginx key $http_x_name                     —                     key header:X-Name (requests without it: unlimited)
//	nginx key a constant, $host, $server_name  —                     key global
//	nginx key anything else ($request_uri …)   —                     key unknown, checked as global
//	Envoy token_bucket (capacity max_tokens,   —                     the rule's capacity max_tokens, its refill
//	  refill tokens_per_fill per fill_interval;                     tokens_per_fill per fill_interval; checked:
//	  camelCase fields; Istio EnvoyFilter                           below
//	  patches inserting the filter)
//	Envoy token_bucket, tokens_per_fill ≥      fixed-window on the   rate tokens_per_fill/fill_interval,
//	  max_tokens (timer refill, older Envoy)    fill timer (or a      capacity max_tokens + min(tokens_per_fill,
//	                                            continuous bucket,    max_tokens): the bound no timer phase and
//	                                            newer Envoy)          neither refill implementation can exceed
//	Envoy token_bucket, tokens_per_fill <      token-bucket,         (a fixed window of unknown phase cannot be
//	  max_tokens                                stepwise (older) or   written as a policy); status 429 or status.code
//	                                            continuous (newer)
//	Envoy filter_enabled / filter_enforced     —                     absent: 0 % limited → lint config-not-enforced
//	Traefik rateLimit average A, period P      token-bucket          rate A/P, capacity = burst (default 1)
//	  (default 1s), burst B                                          status 429; average 0 → no limit (lint)
//	Traefik sourceCriterion (none | ipStrategy —                     key ip | ip (X-Forwarded-For at depth) |
//	  | requestHeaderName H | requestHost)                           header:H | global
//	Kong rate-limiting second/minute/hour/day  fixed-window,         one rule per window, all apply: limit N,
//	                                            clock-aligned (UTC)   window 1s/1m/1h/24h, window_type fixed,
//	                                                                 align epoch; status error_code (default 429)
//	Kong limit_by ip | consumer | credential   —                     key ip (consumer and credential fall back to
//	  | header | service | path                                      the client IP without authentication) |
//	                                                                 header:header_name | global | global
//	Kong month / year                          calendar windows      not imported (lint: not-interpreted)
//
// Where the documents say so:
//
//   - nginx: https://nginx.org/en/docs/http/ngx_http_limit_req_module.html —
//     "leaky bucket"; burst, nodelay and delay (1.15.7); "There could be
//     several limit_req directives"; "These directives are inherited from
//     the previous configuration level if and only if there are no
//     limit_req directives defined on the current level"; limit_req_status
//     default 503; limit_req_dry_run (1.17.1); "Requests with an empty key
//     value are not accounted". The phases (rewrite before preaccess):
//     https://nginx.org/en/docs/dev/development_guide.html#http_phases, and
//     return "stops processing": https://nginx.org/en/docs/http/ngx_http_rewrite_module.html#return.
//   - Envoy: https://www.envoyproxy.io/docs/envoy/latest/api-v3/type/v3/token_bucket.proto
//     ("max_tokens … also the number of tokens that the bucket initially
//     contains"; "During each fill interval tokens_per_fill are added";
//     tokens_per_fill defaults to 1), and
//     https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/local_rate_limit_filter
//     (429 by default; filter_enabled / filter_enforced default to 0 % of
//     requests). Envoy releases from mid-2024 on refill the bucket
//     continuously rather than on a timer (envoyproxy/envoy pull requests
//     35207 and 38197), which is why the policy is the bound that holds
//     for both.
//   - Traefik: https://doc.traefik.io/traefik/middlewares/http/ratelimit/ —
//     "based on a token bucket implementation … average and period … the
//     rate at which the bucket refills, and the burst is the size (volume)
//     of the bucket"; average 0 means no rate limiting; burst defaults to
//     1, period to 1s; sourceCriterion defaults to the remote address.
//   - Kong: https://developer.konghq.com/plugins/rate-limiting/ — config.second,
//     minute, hour, day, month, year (each a separate limit, all enforced);
//     limit_by consumer (default), credential, ip, service, header, path,
//     consumer-group; error_code 429. Kong counts per clock period (its
//     timestamps are floored to the second, minute, hour and day in UTC),
//     so each window is fixed and epoch-aligned.
//
// # How a configuration is read
//
// nginx is read by nginx's own rules: the tokenizer is a port of
// ngx_conf_read_token, *_by_lua_block bodies are read as lua-nginx-module
// reads them, and what nginx refuses about limits (a zone defined twice,
// limit_req_zone outside http, limit_req inside if, burst=0 or delay=0, a
// rate or zone size it cannot read, a directive duplicated on one level)
// is a *problem.Error in nginx's words. Every table test row puts nginx -t's
// verdict beside ours. A directive neither nginx nor a known module
// defines is skipped (Options.Strict refuses it); includes are read
// relative to the main file, absolute ones under Options.Root; templates
// are filled from Options.Vars, and only those names.
//
// # What Lint reports
//
// config-not-enforced (error): a limited nginx location answered in the
// rewrite phase — every return, and every redirecting rewrite (flag
// redirect or permanent, or a replacement that starts with http://,
// https:// or $scheme), in the location or at server level: certain when
// it answers every request, possible under if or for the URLs a regular
// expression matches; rewrite … last (possible); nginx
// limit_req_dry_run on; an Envoy filter with filter_enabled or
// filter_enforced absent (certain) or below 100 % (possible when a runtime
// key may raise it); per-route Envoy limits with the filter neither in
// http_filters nor inserted by an Istio EnvoyFilter patch; a Traefik
// rateLimit with average 0. placeholder-unset (error): a template's $NAME
// left where a number goes (that limit is not read). not-interpreted: an
// unknown nginx directive (warning; an error when its arguments name a
// limit directive), Envoy descriptors, Kong calendar windows (info).
// include-missing (warning): an nginx include that cannot be read.
// Warnings and notes: zone-unused, queueing-latency (burst without
// nodelay: the excess waits), key-behind-proxy (a client-address key with
// no realip configuration, or a key any client can set), key-unknown,
// limit-untestable (a location that is not one URL). Findings belong to
// their nginx server block: Options.Server keeps one server's.
package limitconf
