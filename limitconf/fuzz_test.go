package limitconf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlprobe/rlprobe/problem"
	"github.com/rlprobe/rlprobe/verify"
)

// fuzzParse checks, for any input, that parsing never panics, that a
// failure is a *problem.Error naming the file (or ErrNoLimits), and that a
// success writes a policy file that verify reads back.
func fuzzParse(f *testing.F, format Format, seeds ...string) {
	for _, s := range seeds {
		data, err := os.ReadFile(filepath.Join("testdata", s))
		if err != nil {
			data, err = os.ReadFile(s)
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		im, err := parse(data, "fuzz.cfg", Options{Format: format})
		if err != nil {
			var e *problem.Error
			if !errors.Is(err, ErrNoLimits) && (!errors.As(err, &e) || e.Problems[0].File != "fuzz.cfg") {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WritePolicy(&b, im); err != nil {
			t.Fatal(err)
		}
		if len(im.Policy().Endpoints) == 0 {
			return
		}
		if _, err := verify.ParsePolicyFile(b.Bytes(), "fuzz.policy"); err != nil {
			t.Fatalf("the written policy does not read back: %v\n%s", err, b.String())
		}
	})
}

func FuzzNginx(f *testing.F) {
	fuzzParse(f, Nginx, "nginx-docs.conf", "../../examples/nginx.conf", "realistic/openresty.conf",
		"realistic/gateway.conf.template", "realistic/shop/sites/store.conf")
}

func FuzzEnvoy(f *testing.F) {
	fuzzParse(f, Envoy, "envoy.yaml", "envoy-route.yaml", "realistic/envoy-camel.yaml", "realistic/istio-local-ratelimit.yaml")
}

func FuzzTraefikYAML(f *testing.F) {
	fuzzParse(f, Traefik, "traefik.yaml", "traefik-crd.yaml", "realistic/traefik-dynamic.yaml")
}

// FuzzTemplate: --env files and substitution never panic, substitute
// only the names given, and leave a text without them as it was.
func FuzzTemplate(f *testing.F) {
	f.Add([]byte("A=1\nexport B='x y'\n# c\n"), []byte("rate=${A} $B $binary_remote_addr ${C"))
	f.Add([]byte("R=10r/s"), []byte("limit_req_zone $k zone=z:1m rate=$R;"))
	f.Fuzz(func(t *testing.T, env, text []byte) {
		vars, err := ParseVars(nil, []string{"f.env"}, func(string) ([]byte, error) { return env, nil })
		if err != nil {
			return
		}
		out := substitute(text, vars)
		if !bytes.Contains(text, []byte("$")) && !bytes.Equal(out, text) {
			t.Fatalf("%q changed without a $: %q", text, out)
		}
		if len(vars) == 0 && !bytes.Equal(out, text) {
			t.Fatalf("no names, yet %q became %q", text, out)
		}
	})
}

func FuzzTraefikTOML(f *testing.F) { fuzzParse(f, Traefik, "traefik.toml") }

func FuzzKong(f *testing.F) { fuzzParse(f, Kong, "kong.yaml") }
