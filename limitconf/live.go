package limitconf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// Target is one limited location to check live: the URL to probe, the
// policy to check it with (the binding rule), and every rule that covers
// it. A target whose URL is unknown is reported, not probed.
type Target struct {
	// Server and Location name the place in the config.
	Server, Location string
	// Rules cover the location, the binding one first.
	Rules []Rule
	// URL is the URL to probe; "" when Untested says why not.
	URL string
	// Policy holds the binding rule's endpoint, its Path cleared: check
	// probes URL itself.
	Policy verify.Policy
	// Untested says why the location is not probed ("" when it is).
	Untested string
	// Incomplete says why a check cannot cover the binding rule's window
	// within the run's duration cap ("" when it can): the document then
	// carries "complete": false.
	Incomplete string
	// Notes are sentences to print with the target's verdict (which rule
	// binds, which others apply).
	Notes []string
}

// TargetOptions say where the locations are.
type TargetOptions struct {
	// Base is the target's base URL (scheme, host, port), no trailing
	// slash needed.
	Base string
	// URLs map a location (as the config writes it, e.g. "~ ^/api/",
	// or its pattern alone) to the URL or path to probe for it
	// (--location-url PATTERN=URL).
	URLs map[string]string
	// MaxDuration is the run's duration cap (0 = none): a rule whose
	// suite needs longer is marked Incomplete.
	MaxDuration time.Duration
}

// Targets groups an import's rules by location and says how to probe each
// (see Target). Rules on a location with a dry-run limit or a certain
// static config-not-enforced are still probed: the live run is what shows
// it.
func Targets(im *Import, o TargetOptions) []Target {
	type key struct{ server, loc string }
	var order []key
	groups := map[key][]Rule{}
	for _, r := range im.Rules {
		k := key{r.Server, r.Location}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	base := strings.TrimSuffix(o.Base, "/")
	var out []Target
	for _, k := range order {
		rs := groups[k]
		slices.SortStableFunc(rs, func(a, b Rule) int {
			switch {
			case a.Binding && !b.Binding:
				return -1
			case b.Binding && !a.Binding:
				return 1
			}
			return 0
		})
		t := Target{Server: k.server, Location: k.loc, Rules: rs}
		bind := rs[0]
		path := bind.Path
		if u, ok := lookupURL(o.URLs, k.loc); ok {
			if strings.Contains(u, "://") {
				t.URL = u
			} else {
				path = u
			}
		}
		switch {
		case t.URL != "":
		case path != "":
			t.URL = base + path
		default:
			t.Untested = fmt.Sprintf("%s is not one URL: give one with --location-url '%s=/some/path'", k.loc, lastField(k.loc))
		}
		ep := bind.Endpoint
		ep.Path = ""
		t.Policy = verify.Policy{Version: verify.PolicyVersion, Endpoints: []verify.Endpoint{ep}}
		if len(rs) > 1 {
			t.Notes = append(t.Notes, fmt.Sprintf("%d limits apply to %s; checking the binding one, %s (%s)", len(rs), k.loc, bind.Describe(), bind.Source))
			for _, r := range rs[1:] {
				t.Notes = append(t.Notes, fmt.Sprintf("also applies, not checked on its own: %s (%s)", r.Describe(), r.Source))
			}
		}
		if o.MaxDuration > 0 {
			if d := verify.PlanDuration(t.Policy, nil, nil); d > o.MaxDuration {
				t.Incomplete = fmt.Sprintf("the check of %s needs about %s, beyond the %s cap (--max-duration): a window of %s cannot be covered", bind.Describe(), d.Round(time.Second), o.MaxDuration, ep.Period())
			}
		}
		out = append(out, t)
	}
	return out
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return s
	}
	return f[len(f)-1]
}

func lookupURL(m map[string]string, loc string) (string, bool) {
	if u, ok := m[loc]; ok {
		return u, true
	}
	u, ok := m[lastField(loc)]
	return u, ok
}

// ParseLocationURL parses one --location-url value, PATTERN=URL: the
// pattern as the config writes the location ("= /login", "~ ^/api/", or
// the pattern alone), the URL a path ("/api/v1/items") or an absolute
// URL. It splits at the first "=" that a path or URL follows, so patterns
// may hold "=" themselves.
func ParseLocationURL(s string) (pattern, url string, err error) {
	for i := 1; i < len(s); i++ {
		if s[i] != '=' {
			continue
		}
		rest := s[i+1:]
		if strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
			return strings.TrimSpace(s[:i]), rest, nil
		}
	}
	return "", "", fmt.Errorf("limitconf: --location-url %q: want PATTERN=URL with URL a path or an absolute URL, e.g. '~ ^/api/=/api/v1/items'", s)
}

// Bound is an estimate with the range that fits as well (the infer
// document's {value, low, high}).
type Bound struct{ Value, Low, High float64 }

// known reports whether the estimate was made.
func (b *Bound) known() bool { return b != nil && (b.Value != 0 || b.High != 0) }

// Observed is what live inference concluded about one target, in the
// infer document's names; nil fields were not estimated.
type Observed struct {
	// Family is infer's algorithm ("none" when nothing was limited, ""
	// when no family fits).
	Family string
	// Fit is infer's fit: exact, approximate or misfit. A mismatch is
	// certain only against an exact fit, never by a share of outcomes.
	Fit string
	// Closest is the family closest to the outcomes (infer's closest).
	Closest string
	// Incomplete is set when the budget ended the inference before the
	// candidates were told apart (infer's complete: false): nothing it
	// shows is certain.
	Incomplete bool
	Rate       *Bound // requests per second
	Capacity   *Bound
	Limit      *Bound
	WindowS    *Bound
}

// ParseObserved reads an infer document (rlprobe.infer/v1, as `rlprobe
// infer --json` prints it and a record file keeps it) into an Observed:
// algorithm (null: no family fits), fit, closest, complete and the
// params limit, window_s, rate_per_s and capacity. It is an error when
// the document is not JSON or names no fit.
func ParseObserved(doc []byte) (*Observed, error) {
	type param struct{ Value, Low, High float64 }
	var d struct {
		Algorithm *string `json:"algorithm"`
		Fit       string  `json:"fit"`
		Closest   string  `json:"closest"`
		Complete  bool    `json:"complete"`
		Params    struct {
			Limit    *param `json:"limit"`
			WindowS  *param `json:"window_s"`
			RatePerS *param `json:"rate_per_s"`
			Capacity *param `json:"capacity"`
		} `json:"params"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("limitconf: an infer document: %w", err)
	}
	if d.Fit == "" {
		return nil, fmt.Errorf("limitconf: an infer document without a fit")
	}
	b := func(p *param) *Bound {
		if p == nil {
			return nil
		}
		return &Bound{Value: p.Value, Low: p.Low, High: p.High}
	}
	o := &Observed{Fit: d.Fit, Closest: d.Closest, Incomplete: !d.Complete,
		Rate: b(d.Params.RatePerS), Capacity: b(d.Params.Capacity), Limit: b(d.Params.Limit), WindowS: b(d.Params.WindowS)}
	if d.Algorithm != nil {
		o.Family = *d.Algorithm
	}
	return o, nil
}

// allowedFamilies lists what inference may answer for a rule without
// contradicting the config (the mapping table of the package doc).
func allowedFamilies(r *Rule) []string {
	out := []string{string(r.Family)}
	for _, f := range r.Also {
		out = append(out, string(f))
	}
	return out
}

// Judge turns a live check of target t (rep, may be nil) and an inference
// (obs, may be nil) into the check document's findings about the config:
// no-limiting-observed becomes config-not-enforced, naming the config
// line (it absorbs it, with its certainty and evidence), and a family or
// parameter outside what the config declares is config-mismatch: certain
// only when obs's fit is exact and the inference complete, possible
// otherwise. It returns rep's findings with these changes; rep is not
// modified.
func Judge(t Target, rep *verify.Report, obs *Observed) []verify.Finding {
	if len(t.Rules) == 0 {
		return nil
	}
	bind := &t.Rules[0]
	at := bind.Source.String()
	var out []verify.Finding
	absorbed := false
	if rep != nil {
		for _, f := range rep.Findings {
			if f.ID == verify.IDNoLimitingObserved {
				g := f
				g.ID = verify.IDConfigNotEnforced
				g.Message = fmt.Sprintf("%s limits %s (%s), but %s", at, t.Location, bind.Describe(), f.Message)
				g.Hint = "the config limits this location and the live target does not: " + hintFor(bind)
				out = append(out, g)
				absorbed = true
				continue
			}
			out = append(out, f)
		}
	}
	if obs == nil {
		return out
	}
	endpoint := t.URL
	if obs.Family == "none" {
		if !absorbed {
			out = append(out, verify.Finding{ID: verify.IDConfigNotEnforced, Severity: verify.SeverityError, Certainty: verify.Possible,
				Endpoint: endpoint, Evidence: verify.Evidence{Refs: []string{}}, Message: fmt.Sprintf("%s limits %s (%s), but inference observed no limiting at all", at, t.Location, bind.Describe()),
				Hint: hintFor(bind)})
		}
		return out
	}
	cert := verify.Possible
	if obs.Fit == "exact" && !obs.Incomplete {
		cert = verify.Certain
	}
	mismatch := func(msg string) {
		out = append(out, verify.Finding{ID: verify.IDConfigMismatch, Severity: verify.SeverityError, Certainty: cert,
			Endpoint: endpoint, Evidence: verify.Evidence{Refs: []string{}}, Message: fmt.Sprintf("%s declares %s, but %s", at, bind.Describe(), msg),
			Hint: "the live limiter is not the one this config describes: a config not deployed, another limiter in front, or a different version"})
	}
	if obs.Family == "" {
		closest := "no model is left" // infer's closest is null when every model was ruled out
		if obs.Closest != "" {
			closest = "closest " + obs.Closest
		}
		mismatch(fmt.Sprintf("no limiter family fits the target (%s)", closest))
		return out
	}
	if allowed := allowedFamilies(bind); !slices.Contains(allowed, obs.Family) {
		mismatch(fmt.Sprintf("the target behaves as %s (the config allows %s)", obs.Family, strings.Join(allowed, " or ")))
		return out
	}
	ep := &bind.Endpoint
	outside := func(b *Bound, want float64) bool {
		if !b.known() {
			return false
		}
		lo, hi := b.Low, b.High
		if lo == 0 && hi == 0 {
			lo, hi = b.Value, b.Value
		}
		return want < lo*0.9 || want > hi*1.1
	}
	switch obs.Family {
	case string(TokenBucket), string(LeakyBucketQueue):
		rate, capacity := bind.Rate, bind.Capacity
		if bind.Family == FixedWindow { // Envoy's continuous refill
			rate, capacity = ep.Rate, bind.Limit
		}
		if outside(obs.Rate, rate) {
			mismatch(fmt.Sprintf("the live rate fits %s to %s", units.HumanRate(obs.Rate.Low), units.HumanRate(obs.Rate.High)))
		}
		if outside(obs.Capacity, float64(capacity)) && !(bind.Family == FixedWindow && obs.Capacity.High <= float64(ep.Capacity)) {
			mismatch(fmt.Sprintf("the live capacity fits %g to %g", obs.Capacity.Low, obs.Capacity.High))
		}
	case string(FixedWindow):
		if outside(obs.Limit, float64(bind.Limit)) {
			mismatch(fmt.Sprintf("the live limit fits %g to %g per window", obs.Limit.Low, obs.Limit.High))
		}
		if outside(obs.WindowS, bind.Window.Seconds()) {
			mismatch(fmt.Sprintf("the live window fits %gs to %gs", obs.WindowS.Low, obs.WindowS.High))
		}
	}
	return out
}

func hintFor(r *Rule) string {
	if r.ZoneAt.File != "" {
		return "an answer in nginx's rewrite phase (return, rewrite … redirect) runs before limit_req: " + hintReturn
	}
	return "check that the config is the one deployed and that the limiter is enabled for this route"
}
