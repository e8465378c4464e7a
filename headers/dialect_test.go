package headers

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseDialects(t *testing.T) {
	tests := []struct {
		in      string
		want    []Dialect
		wantErr string // substring; "" means success
	}{
		{in: "draft-8", want: []Dialect{Draft8}},
		{in: "draft-8,x-ratelimit", want: []Dialect{Draft8, XRateLimit}},
		{in: " draft-6 , Draft-7 ", want: []Dialect{Draft6, Draft7}},
		{in: "x-ratelimit,x-ratelimit-epoch,x-ratelimit", want: []Dialect{XRateLimit, XRateLimitEpoch}},
		{in: "none", want: []Dialect{None}},
		{in: "openai, GitHub,shopify", want: []Dialect{OpenAI, GitHub, Shopify}},
		{in: "", wantErr: "empty dialect list"},
		{in: "draft-8,", wantErr: "empty dialect"},
		{in: "draft-9", wantErr: `dialect "draft-9" (valid: none, x-ratelimit, x-ratelimit-epoch, draft-6, draft-7, draft-8, draft-11, draft-12, openai, github, shopify)`},
		{in: "Draft-11, draft-12", want: []Dialect{Draft11, Draft12}},
		{in: "none,draft-8", wantErr: "cannot be combined"},
	}
	for _, tt := range tests {
		got, err := ParseDialects(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUnknownDialect) {
				t.Errorf("ParseDialects(%q) = %v, %v; want error containing %q wrapping ErrUnknownDialect", tt.in, got, err, tt.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "headers: ") {
				t.Errorf("ParseDialects(%q) error %q lacks the package prefix", tt.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseDialects(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestDialectsValid(t *testing.T) {
	for _, d := range Dialects {
		if !d.Valid() {
			t.Errorf("%q.Valid() = false", d)
		}
	}
	for _, d := range []Dialect{"", "draft-9", "X-RateLimit"} {
		if d.Valid() {
			t.Errorf("%q.Valid() = true", d)
		}
	}
}

func TestSpeaks(t *testing.T) {
	tests := []struct {
		detected []Dialect
		asked    Dialect
		want     bool
	}{
		{[]Dialect{XRateLimitEpoch}, XRateLimit, true},
		{[]Dialect{XRateLimit}, XRateLimitEpoch, false},
		{[]Dialect{XRateLimit}, XRateLimit, true},
		{[]Dialect{Draft7, Draft8}, Draft8, true},
		{[]Dialect{Draft7}, Draft6, false},
		{[]Dialect{None}, None, true},
		{nil, None, true},
		{[]Dialect{Draft6}, None, false},
		{[]Dialect{GitHub}, XRateLimit, true},
		{[]Dialect{GitHub}, XRateLimitEpoch, true},
		{[]Dialect{GitHub}, GitHub, true},
		{[]Dialect{XRateLimitEpoch}, GitHub, false},
		{[]Dialect{OpenAI}, XRateLimit, false},
		{[]Dialect{Shopify}, None, false},
	}
	for _, tt := range tests {
		if got := (Parsed{Dialects: tt.detected}).Speaks(tt.asked); got != tt.want {
			t.Errorf("Parsed{Dialects: %v}.Speaks(%q) = %v, want %v", tt.detected, tt.asked, got, tt.want)
		}
	}
}
