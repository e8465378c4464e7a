package limitconf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigSourceRead: a file or stdin, the format given or guessed,
// narrowed to a server and location; a bad format, a missing file and an
// unreadable stdin are errors.
func TestConfigSourceRead(t *testing.T) {
	file := filepath.Join("testdata", "nginx-docs.conf")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		src     ConfigSource
		file    string
		stdin   io.Reader
		rules   func(n int) bool // of the import; nil when an error is wanted
		wantErr string
	}{
		{name: "a file, format guessed", file: file, rules: func(n int) bool { return n > 2 }},
		{name: "stdin, format given", src: ConfigSource{Format: "NGINX"}, file: "-", stdin: bytes.NewReader(data), rules: func(n int) bool { return n > 2 }},
		{name: "one location", src: ConfigSource{Location: "/search/"}, file: file, rules: func(n int) bool { return n == 1 }},
		{name: "bad format", src: ConfigSource{Format: "haproxy"}, file: file, wantErr: "format must be nginx, envoy, traefik or kong"},
		{name: "missing file", file: filepath.Join(t.TempDir(), "nope.conf"), wantErr: "no such file"},
		{name: "stdin fails", file: "-", stdin: io.MultiReader(strings.NewReader("http {"), errReader{}), wantErr: "policy: disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, err := tt.src.Read(tt.stdin, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Read = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if im.Format != Nginx || !tt.rules(len(im.Rules)) {
				t.Errorf("format %s, %d rules", im.Format, len(im.Rules))
			}
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// TestConfigSourceReadCap: stdin is read up to MaxStdin bytes, no more.
func TestConfigSourceReadCap(t *testing.T) {
	r := &countingReader{}
	_, _ = ConfigSource{Format: "nginx"}.Read(r, "-")
	if r.n != MaxStdin {
		t.Errorf("read %d bytes of stdin, want MaxStdin (%d)", r.n, MaxStdin)
	}
}

// countingReader is an endless stream of spaces that counts what is read.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n += len(p)
	return len(p), nil
}

// TestConfigSourceLiveCheck: the --location-url values give the URLs of
// locations (added to the options' own), a bad one is refused, and a
// config that cannot be read is refused before them.
func TestConfigSourceLiveCheck(t *testing.T) {
	file := filepath.Join("testdata", "nginx-docs.conf")
	o := TargetOptions{Base: "http://127.0.0.1:8080", URLs: map[string]string{"/search/": "/search/q"}}
	c, err := ConfigSource{}.LiveCheck(nil, file, []string{"~ ^/items/[0-9]+$=/items/7"}, o)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range c.Policy.Endpoints {
		paths = append(paths, e.Path)
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "/items/7") || !strings.Contains(got, "/search/q") || len(c.Skipped()) != 0 {
		t.Errorf("probed paths %q, skipped %q; want /items/7 and /search/q, none skipped", got, c.Skipped())
	}
	if len(o.URLs) != 1 {
		t.Errorf("LiveCheck changed the caller's URLs: %v", o.URLs)
	}
	tests := []struct {
		name    string
		src     ConfigSource
		urls    []string
		wantErr string
	}{
		{"bad --location-url", ConfigSource{}, []string{"/items"}, "want PATTERN=URL"},
		{"the config first", ConfigSource{Format: "haproxy"}, []string{"/items"}, "format must be"},
		{"nothing to check", ConfigSource{Location: "/search/"}, nil, "no location"},
	}
	for _, tt := range tests {
		if _, err := tt.src.LiveCheck(nil, file, tt.urls, TargetOptions{Base: "http://h"}); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
