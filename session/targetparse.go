package session

// The target's parsers: -H values, TLS files, client values, source
// addresses (split from target.go).

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ParseHeaders reads -H values: "Name: value", or @FILE with one such line
// a line (blank lines and lines starting with # skipped). $VAR and ${VAR}
// expand from getenv ($$ is a dollar); an unset variable is a problem. It
// returns the headers and every problem found.
func ParseHeaders(args []string, getenv func(string) string) (http.Header, []string) {
	h := http.Header{}
	var probs []string
	add := func(where, line string) {
		line, missing := expandEnv(line, getenv)
		for _, v := range missing {
			probs = append(probs, fmt.Sprintf("%s: $%s is not set in the environment", where, v))
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		value = strings.TrimSpace(value)
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s: write a header as \"Name: value\"", where))
		case !httpguts.ValidHeaderFieldName(name):
			probs = append(probs, fmt.Sprintf("%s: %q is not a valid header name", where, name))
		case !httpguts.ValidHeaderFieldValue(value):
			probs = append(probs, fmt.Sprintf("%s: the value of %s has characters a header cannot carry", where, name))
		default:
			h.Add(name, value)
		}
	}
	for _, a := range args {
		file, isFile := strings.CutPrefix(a, "@")
		if !isFile {
			add("-H", a)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			probs = append(probs, fmt.Sprintf("-H @%s: %v", file, err))
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimRight(line, "\r")
			if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			add(fmt.Sprintf("-H @%s:%d", file, i+1), line)
		}
	}
	return h, probs
}

// expandEnv expands $VAR and ${VAR} with getenv, $$ to $, and returns the
// names that were unset (or empty).
func expandEnv(s string, getenv func(string) string) (string, []string) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		if name == "$" {
			return "$"
		}
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	})
	return out, missing
}

// tlsConfig builds the client TLS configuration, nil when no TLS option is
// set (the engine's defaults).
func (t Target) tlsConfig() (*tls.Config, []string) {
	if t.CACert == "" && t.ClientCert == "" && t.ClientKey == "" && !t.Insecure {
		return nil, nil
	}
	var probs []string
	c := &tls.Config{InsecureSkipVerify: t.Insecure} //nolint:gosec // the user asked with --insecure
	if t.CACert != "" {
		pem, err := os.ReadFile(t.CACert)
		switch {
		case err != nil:
			probs = append(probs, fmt.Sprintf("--cacert: %v", err))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				probs = append(probs, fmt.Sprintf("--cacert %s holds no PEM certificate", t.CACert))
			}
			c.RootCAs = pool
		}
	}
	switch {
	case (t.ClientCert == "") != (t.ClientKey == ""):
		probs = append(probs, "--client-cert and --client-key go together")
	case t.ClientCert != "":
		pair, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			probs = append(probs, fmt.Sprintf("--client-cert/--client-key: %v", err))
		} else {
			c.Certificates = []tls.Certificate{pair}
		}
	}
	return c, probs
}

// readClientValues reads one identity value a line, skipping blank lines.
func readClientValues(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var vals []string
	sc := bufio.NewScanner(io.LimitReader(f, maxClientValuesSize))
	for n := 1; sc.Scan(); n++ {
		v := strings.TrimSpace(sc.Text())
		if v == "" {
			continue
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("%s:%d: not a valid header value", path, n)
		}
		vals = append(vals, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("%s holds no value", path)
	}
	return vals, nil
}

// ParseSourceIPs reads a comma-separated list of addresses and CIDR
// prefixes. A prefix stands for its addresses, except an IPv4 prefix's
// network and broadcast addresses when it is /30 or wider.
func ParseSourceIPs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.Contains(item, "/") {
			a, err := netip.ParseAddr(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not an IP address", item)
			}
			out = append(out, a.Unmap())
			continue
		}
		pfx, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR prefix", item)
		}
		pfx = pfx.Masked()
		bits := pfx.Addr().BitLen() - pfx.Bits()
		if bits > 12 {
			return nil, fmt.Errorf("%s holds more than %d addresses", item, maxSourceIPs)
		}
		a, n := pfx.Addr(), 1<<bits
		skipEnds := pfx.Addr().Is4() && bits >= 2
		for i := 0; i < n; i, a = i+1, a.Next() {
			if !skipEnds || (i != 0 && i != n-1) {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no address given")
	}
	if len(out) > maxSourceIPs {
		return nil, fmt.Errorf("%d addresses, more than %d", len(out), maxSourceIPs)
	}
	return out, nil
}

// splitAll splits every value of a repeatable option at commas.
func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
