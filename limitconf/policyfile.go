package limitconf

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rlprobe/rlprobe/units"
	"github.com/rlprobe/rlprobe/verify"
)

// Policy returns the policy the import declares: one endpoint per rule
// that names a URL path (rules on a regular expression are left out).
func (im *Import) Policy() verify.Policy {
	p := verify.Policy{Version: verify.PolicyVersion}
	for _, r := range im.Rules {
		if r.Endpoint.Path == "" && r.Prefix == "" && r.Path == "" {
			continue
		}
		p.Endpoints = append(p.Endpoints, r.Endpoint)
	}
	return p
}

// WritePolicy writes the import as a policy file (contract.md's format,
// readable by verify.ParsePolicyFile), each rule preceded by comments
// naming the configuration lines it comes from, how it was mapped, and
// what lint found there. Rules on a regular expression are written
// commented out, with the reason.
func WritePolicy(w io.Writer, im *Import) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# rlprobe policy imported from %s (%s) by rlprobe policy import.\n", oneLine(im.File), im.Format)
	b.WriteString("# Each rule names the configuration lines it comes from. Check it live with\n")
	b.WriteString("#   rlprobe check BASE_URL --policy-file THIS_FILE\n")
	b.WriteString("version: 1\nendpoints:\n")
	for i := range im.Rules {
		r := &im.Rules[i]
		head := r.Location
		if r.Server != "" {
			head += " (server " + r.Server + ")"
		}
		fmt.Fprintf(&b, "  # %s: %s\n", oneLine(r.Source.String()), oneLine(head))
		if r.ZoneAt.File != "" {
			fmt.Fprintf(&b, "  #   zone %s defined at %s\n", oneLine(r.Zone), oneLine(r.ZoneAt.String()))
		}
		fmt.Fprintf(&b, "  #   %s\n", oneLine(r.Describe()))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  #   %s\n", oneLine(n))
		}
		for _, f := range im.Findings {
			if f.Endpoint == r.Location && f.Endpoint != "" && f.server == r.server {
				fmt.Fprintf(&b, "  #   lint %s (%s, %s): %s\n", f.ID, f.Severity, f.Certainty, oneLine(f.Message))
			}
		}
		prefix := "  "
		if r.Endpoint.Path == "" {
			b.WriteString("  #   not one URL path: give the path to check and uncomment\n")
			prefix = "  # "
		}
		capNote := ""
		if r.RefillTokens > 0 && r.Endpoint.Quota() != r.Capacity {
			capNote = fmt.Sprintf("max_tokens %d + min(tokens_per_fill %d, max_tokens): a fill may land inside a burst", r.Capacity, r.RefillTokens)
		}
		writeEndpoint(&b, prefix, &r.Endpoint, capNote)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// oneLine makes s safe for one YAML comment line: valid UTF-8, no
// control characters, spaces collapsed.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xFEFF || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// writeEndpoint writes e as a policy file's endpoint, capNote (when
// given) as a comment beside its capacity.
func writeEndpoint(b *bytes.Buffer, prefix string, e *verify.Endpoint, capNote string) {
	first := true
	field := func(k, v string) {
		lead := prefix + "  "
		if first {
			lead, first = prefix+"- ", false
		}
		fmt.Fprintf(b, "%s%s: %s\n", lead, k, v)
	}
	field("path", yamlString(orElse(e.Path, "/")))
	if e.Method != "" {
		field("method", yamlString(e.Method))
	}
	if e.IsBucket() {
		field("rate", units.FormatRate(e.Rate))
		c := strconv.FormatInt(e.Quota(), 10)
		if capNote != "" {
			c += "  # " + oneLine(capNote)
		}
		field("capacity", c)
	} else {
		field("limit", strconv.FormatInt(e.Limit, 10))
		field("window", e.Window.String())
		if e.WindowType != "" {
			field("window_type", string(e.WindowType))
		}
		if e.Align != "" {
			field("align", string(e.Align))
		}
	}
	if e.Key != "" {
		field("key", yamlString(e.Key))
	}
	if e.Status != 0 {
		field("status", strconv.Itoa(e.Status))
	}
}

// yamlString writes s plain when YAML reads it back as the same string,
// else double-quoted.
func yamlString(s string) string {
	plain := s != "" && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`\\\n\t") && strings.TrimSpace(s) == s
	if plain {
		switch strings.ToLower(s) {
		case "true", "false", "yes", "no", "on", "off", "null", "~":
			plain = false
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			plain = false
		}
		if s[0] == '-' || s[0] == '?' {
			plain = false
		}
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}
