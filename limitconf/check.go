package limitconf

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"

	"github.com/rlprobe/rlprobe/verify"
)

// LiveCheck is a config held against the live target (rlprobe check
// --from-config): the limited locations of an import as one policy to
// check at a base URL, one rule each, and the judgement of the verdict
// as findings about the config. Build it with NewLiveCheck, check
// Policy (session.Check, with Infer set and Judge called from its
// CheckOptions.Judge, each inference read by ParseObserved).
type LiveCheck struct {
	// Targets are the import's locations (see Targets), in config order.
	Targets []Target
	// Policy holds one endpoint per probed target, its binding rule, with
	// Path the target's URL path under the base URL (the check joins it
	// to every base URL given). Normalized and valid.
	Policy verify.Policy
	// paths are, per target, its Path in Policy ("" when not probed).
	paths []string
}

// NewLiveCheck plans the live check of im's limits at o.Base. A target
// is probed when it has a URL under the base, its suite fits within
// o.MaxDuration and no earlier target has the same URL; the others are
// reported (Skipped) and make the verdict incomplete. It is an error
// when a --location-url points outside the base URL, or when no target
// can be probed.
func NewLiveCheck(im *Import, o TargetOptions) (*LiveCheck, error) {
	c := &LiveCheck{Targets: Targets(im, o)}
	c.paths = make([]string, len(c.Targets))
	base := strings.TrimSuffix(o.Base, "/")
	byPath := map[string]int{}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Untested != "" || t.Incomplete != "" {
			continue
		}
		path, ok := strings.CutPrefix(t.URL, base)
		if !ok || (path != "" && !strings.HasPrefix(path, "/")) {
			return nil, fmt.Errorf("limitconf: %s (%s): %s is not under %s: give --location-url a path, or an URL under the base URL", t.Location, t.Rules[0].Source, t.URL, o.Base)
		}
		if path == "" {
			path = "/"
		}
		if u, err := url.Parse(path); err != nil || u.Path == "" {
			return nil, fmt.Errorf("limitconf: %s (%s): %q is not a URL path", t.Location, t.Rules[0].Source, path)
		}
		if j, dup := byPath[path]; dup {
			t.Untested = fmt.Sprintf("the same URL as %s (%s), checked there", c.Targets[j].Location, c.Targets[j].Rules[0].Source)
			continue
		}
		byPath[path] = i
		c.paths[i] = path
		ep := t.Policy.Endpoints[0]
		ep.Path = path
		c.Policy.Endpoints = append(c.Policy.Endpoints, ep)
	}
	if len(c.Policy.Endpoints) == 0 {
		var why []string
		for _, t := range c.Targets {
			why = append(why, t.Location+": "+t.Untested+t.Incomplete)
		}
		if len(why) == 0 {
			return nil, fmt.Errorf("limitconf: %s declares no limit to check", im.File)
		}
		return nil, fmt.Errorf("limitconf: no location of %s can be checked:\n  %s", im.File, strings.Join(why, "\n  "))
	}
	c.Policy.Version = verify.PolicyVersion
	if err := c.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("limitconf: the policy of %s: %w", im.File, err)
	}
	c.Policy = c.Policy.Normalize()
	return c, nil
}

// Skipped returns one line per target that is not probed, saying why:
// a location that is not one URL, one whose check needs longer than the
// duration cap, or one with the URL of another.
func (c *LiveCheck) Skipped() []string {
	var out []string
	for i, t := range c.Targets {
		if c.paths[i] == "" {
			out = append(out, fmt.Sprintf("%s (%s): not checked: %s", t.Location, t.Rules[0].Source, t.Untested+t.Incomplete))
		}
	}
	return out
}

// Notes returns the sentences to print with the verdict: which rule
// binds where several limits apply, then the locations not checked.
func (c *LiveCheck) Notes() []string {
	var out []string
	for i, t := range c.Targets {
		if c.paths[i] != "" {
			out = append(out, t.Notes...)
		}
	}
	return append(out, c.Skipped()...)
}

// Inferred is what inference made of one rule of a LiveCheck's Policy:
// Observed, or why there is none (Skipped); beside an incomplete
// Observed, Skipped may say what ended it.
type Inferred struct {
	Observed *Observed
	Skipped  string
}

// Judge turns the verdict of a check of Policy into the verdict about
// the config: each target's findings go through the package's Judge
// (no-limiting-observed becomes config-not-enforced) with its inference
// (inferred holds one entry per rule of Policy, or is nil when nothing
// was inferred), and each names the config line of the binding rule. A
// target not probed, or not inferred when inferred is given, makes the
// verdict incomplete, as an inference the budget ended does; Judge
// returns one line per such inference, saying why. The verdict is given
// again (verify.Report.Rejudge).
func (c *LiveCheck) Judge(rep *verify.Report, inferred []Inferred) []string {
	used := make([]bool, len(rep.Findings))
	out := []verify.Finding{}
	var notes []string
	k := -1 // the rule of Policy
	for i, t := range c.Targets {
		if c.paths[i] == "" {
			rep.Complete = false
			continue
		}
		k++
		var obs *Observed
		if k < len(inferred) {
			obs = inferred[k].Observed
			at := fmt.Sprintf("%s (%s)", t.Location, t.Rules[0].Source)
			switch {
			case obs == nil:
				rep.Complete = false
				notes = append(notes, fmt.Sprintf("%s: not inferred (no config-mismatch judged): %s", at, inferred[k].Skipped))
			case obs.Incomplete:
				rep.Complete = false
				why := cmp.Or(inferred[k].Skipped, "the budget cut it short")
				notes = append(notes, fmt.Sprintf("%s: the inference is incomplete (%s): any config-mismatch is possible, not certain", at, why))
			}
		}
		sub := *rep
		sub.Findings = nil
		for j, f := range rep.Findings {
			if !used[j] && f.Endpoint == c.paths[i] {
				sub.Findings, used[j] = append(sub.Findings, f), true
			}
		}
		at := t.Rules[0].Source.String()
		for _, f := range Judge(t, &sub, obs) {
			if !strings.Contains(f.Message, at) {
				f.Message = at + ": " + f.Message
			}
			out = append(out, f)
		}
	}
	for j, f := range rep.Findings {
		if !used[j] {
			out = append(out, f)
		}
	}
	rep.Findings = out
	rep.Rejudge()
	return notes
}
