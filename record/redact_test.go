package record

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	// sha256("secret") = 2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b
	if got, want := Fingerprint("secret"), "redacted:sha256:2bb80d53"; got != want {
		t.Errorf("Fingerprint(%q) = %q, want %q", "secret", got, want)
	}
	if Fingerprint("secret") == Fingerprint("secret2") {
		t.Error("Fingerprint does not tell two secrets apart")
	}
	if !regexp.MustCompile(`^redacted:sha256:[0-9a-f]{8}$`).MatchString(Fingerprint("")) {
		t.Errorf("Fingerprint(\"\") = %q", Fingerprint(""))
	}
}

func TestRedactHeader(t *testing.T) {
	fp := Fingerprint
	in := http.Header{
		"Authorization":       {"Bearer tok-123"},
		"Cookie":              {"a=1", "b=2"},
		"Set-Cookie":          {"sid=xyz; HttpOnly"},
		"X-Api-Key":           {"k-1"},
		"Api-Key":             {"k-2"},
		"X-Auth-Token":        {"t-1"},
		"proxy-authorization": {"Basic dTpw"}, // not canonical: still matched
		"X-Tenant-Secret":     {"s-1"},        // an extra name
		"Retry-After":         {"5"},
		"Ratelimit-Policy":    {`"default";q=100;w=60`},
		"X-Already":           {fp("x")},
	}
	want := http.Header{
		"Authorization":       {fp("Bearer tok-123")},
		"Cookie":              {fp("a=1"), fp("b=2")},
		"Set-Cookie":          {fp("sid=xyz; HttpOnly")},
		"X-Api-Key":           {fp("k-1")},
		"Api-Key":             {fp("k-2")},
		"X-Auth-Token":        {fp("t-1")},
		"proxy-authorization": {fp("Basic dTpw")},
		"X-Tenant-Secret":     {fp("s-1")},
		"Retry-After":         {"5"},
		"Ratelimit-Policy":    {`"default";q=100;w=60`},
		"X-Already":           {fp("x")},
	}
	orig := http.Header{}
	for k, v := range in {
		orig[k] = append([]string(nil), v...)
	}
	r := NewRedactor([]string{" x-tenant-secret "}, nil)
	if got := r.Header(in); !reflect.DeepEqual(got, want) {
		t.Errorf("Header =\n%v\nwant\n%v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("Header modified its argument: %v", in)
	}
	if r.Header(nil) != nil {
		t.Error("Header(nil) != nil")
	}
	// The zero and nil Redactors redact the defaults, not the extras.
	for _, d := range []*Redactor{nil, {}} {
		got := d.Header(in)
		if got.Get("Authorization") != fp("Bearer tok-123") || got.Get("X-Tenant-Secret") != "s-1" {
			t.Errorf("%#v.Header = %v, want the defaults redacted only", d, got)
		}
	}
	// Redacting twice is redacting once.
	if twice := r.Header(r.Header(in)); !reflect.DeepEqual(twice, want) {
		t.Errorf("Header(Header(h)) = %v, want %v", twice, want)
	}
}

func TestRedactValue(t *testing.T) {
	r := NewRedactor([]string{"X-Secret"}, []string{"sig"})
	tests := []struct{ name, v, want string }{
		{"authorization", "Bearer x", Fingerprint("Bearer x")},
		{"X-SECRET", "v", Fingerprint("v")},
		{"SIG", "v", Fingerprint("v")},
		{"access_token", "v", Fingerprint("v")},
		{"Accept", "v", "v"},
	}
	for _, tt := range tests {
		if got := r.Value(tt.name, tt.v); got != tt.want {
			t.Errorf("Value(%q, %q) = %q, want %q", tt.name, tt.v, got, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	r := NewRedactor(nil, []string{"api_key", "Sig"})
	fp := Fingerprint
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8080/api?q=1", "http://127.0.0.1:8080/api?q=1"},
		{"http://h/p?b=2&api_key=abc&a=1", "http://h/p?b=2&api_key=" + fp("abc") + "&a=1"},
		{"http://h/p?API_KEY=abc", "http://h/p?API_KEY=" + fp("abc")},
		{"http://h/p?api%5Fkey=a%2Bb+c", "http://h/p?api%5Fkey=" + fp("a+b c")},
		{"http://h/p?access_token=t&sig=s&sig=s2", "http://h/p?access_token=" + fp("t") + "&sig=" + fp("s") + "&sig=" + fp("s2")},
		{"http://h/p?x=1;sig=s;y=2&z=3", "http://h/p?x=1;sig=" + fp("s;y=2") + "&z=3"},
		{"http://h/p?sig=a;b", "http://h/p?sig=" + fp("a;b")},
		{"http://h/p?sig&sig=", "http://h/p?sig&sig=" + fp("")},
		{"http://h/p?q=1#access_token=t&state=s", "http://h/p?q=1#access_token=" + fp("t") + "&state=s"},
		{"https://user:p%40ss@h:443/p", "https://user:" + fp("p@ss") + "@h:443/p"},
		{"https://sk_live_123@h/p", "https://" + fp("sk_live_123") + "@h/p"},
		{"https://sk_live_123:@h/p", "https://" + fp("sk_live_123") + ":@h/p"},
		{"https://u:p@h/a@b?api_key=k", "https://u:" + fp("p") + "@h/a@b?api_key=" + fp("k")},
		{"http://h/users/me@example.com", "http://h/users/me@example.com"},
		{"://bad url%zz?api_key=k k", "://bad url%zz?api_key=" + fp("k k")},
		{"", ""},
	}
	for _, tt := range tests {
		got := r.URL(tt.in)
		if got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := r.URL(got); again != got {
			t.Errorf("URL(URL(%q)) = %q, want %q", tt.in, again, got)
		}
	}
}

// TestRedactNeverLeaks puts random secrets wherever a secret goes and
// checks that neither they nor their escaped forms survive.
func TestRedactNeverLeaks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/=:;@&?# %"
	secret := func() string {
		b := make([]byte, 12+rng.IntN(30))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	r := NewRedactor([]string{"X-Mine"}, []string{"token"})
	for range 2000 {
		s := secret()
		forms := []string{s, url.QueryEscape(s), url.PathEscape(s), url.User(s).String(), url.UserPassword("u", s).String()[2:]}
		h := r.Header(http.Header{"Authorization": {"Bearer " + s}, "X-Mine": {s}, "Cookie": {"id=" + s}})
		urls := []string{
			r.URL("http://h/p?a=1&token=" + url.QueryEscape(s) + "&b=2"),
			r.URL("http://h/p?a=1;access_token=" + url.QueryEscape(s) + ";b=2"),
			r.URL("http://" + url.UserPassword("u", s).String() + "@h/p"),
			r.URL("http://" + url.User(s).String() + "@h/p"),
			r.URL("http://" + url.User(s).String() + ":@h/p"),
			r.Value("X-Mine", s),
		}
		out := strings.Join(urls, "\n") + "\n" + strings.Join(h["Authorization"], "") +
			strings.Join(h["X-Mine"], "") + strings.Join(h["Cookie"], "")
		for _, f := range forms {
			if strings.Contains(out, f) {
				t.Fatalf("secret %q (as %q) survived redaction:\n%s", s, f, out)
			}
		}
	}
}

// TestDefaultSecretQuery: every default name is secret in any case, plus
// the extra names; WithoutDefaultQuery keeps only the extra ones (and the
// URL's password).
func TestDefaultSecretQuery(t *testing.T) {
	names := []string{"api_key", "apikey", "api-key", "key", "token", "access_token", "refresh_token", "id_token",
		"auth", "signature", "sig", "password", "passwd", "secret", "client_secret", "session"}
	if got := DefaultSecretQuery(); !reflect.DeepEqual(got, names) {
		t.Errorf("DefaultSecretQuery() = %v, want %v", got, names)
	}
	r := NewRedactor(nil, []string{"tenant"})
	fp := Fingerprint("S3")
	for _, n := range append(names, "tenant") {
		for _, spelled := range []string{n, strings.ToUpper(n)} {
			u := "http://h/p?a=1&" + spelled + "=S3#x"
			if got, want := r.URL(u), "http://h/p?a=1&"+spelled+"="+fp+"#x"; got != want {
				t.Errorf("URL(%q) = %q, want %q", u, got, want)
			}
		}
	}
	if got := r.URL("http://h/?keys=1&tokenish=2"); got != "http://h/?keys=1&tokenish=2" {
		t.Errorf("names are whole: %q", got)
	}
	bare := r.WithoutDefaultQuery()
	if got, want := bare.URL("http://u:pw@h/?key=k&tenant=S3"), "http://u:"+Fingerprint("pw")+"@h/?key=k&tenant="+fp; got != want {
		t.Errorf("WithoutDefaultQuery: URL = %q, want %q", got, want)
	}
	if got := bare.Header(http.Header{"Authorization": {"x"}}).Get("Authorization"); got != Fingerprint("x") {
		t.Errorf("WithoutDefaultQuery: Authorization = %q, want its fingerprint", got)
	}
	var nilR *Redactor
	if got := nilR.WithoutDefaultQuery().URL("http://h/?key=k"); got != "http://h/?key=k" {
		t.Errorf("nil.WithoutDefaultQuery: %q", got)
	}
}

// TestRedactText: URLs inside error text are redacted, the rest is kept.
func TestRedactText(t *testing.T) {
	r := NewRedactor(nil, nil)
	fp := Fingerprint("S3cr3t")
	for _, tc := range []struct{ in, want string }{
		{`Get "http://127.0.0.1:1/x?api_key=S3cr3t": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Get "http://127.0.0.1:1/x?api_key=` + fp + `": dial tcp 127.0.0.1:1: connect: connection refused`},
		{`two: HTTPS://a/?Token=S3cr3t and http://b/?sig=S3cr3t&q=1 end`,
			`two: HTTPS://a/?Token=` + fp + ` and http://b/?sig=` + fp + `&q=1 end`},
		{"no url here, just http and https words", "no url here, just http and https words"},
		{"at end http://u:S3cr3t@h", "at end http://u:" + fp + "@h"},
		{"", ""},
	} {
		if got := r.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
