package limitconf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlprobe/rlprobe/verify"
)

// fuzzParse checks, for any input, that parsing never panics, that a
// failure is an *Error naming the file (or ErrNoLimits), and that a
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
			var e *Error
			if !errors.Is(err, ErrNoLimits) && (!errors.As(err, &e) || e.Source.File != "fuzz.cfg") {
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
	fuzzParse(f, Nginx, "nginx-docs.conf", "../../examples/nginx.conf")
}

func FuzzEnvoy(f *testing.F) { fuzzParse(f, Envoy, "envoy.yaml", "envoy-route.yaml") }

func FuzzTraefikYAML(f *testing.F) { fuzzParse(f, Traefik, "traefik.yaml", "traefik-crd.yaml") }

func FuzzTraefikTOML(f *testing.F) { fuzzParse(f, Traefik, "traefik.toml") }

func FuzzKong(f *testing.F) { fuzzParse(f, Kong, "kong.yaml") }
