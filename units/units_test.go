package units

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    float64
		wantErr string
	}{
		{in: "10/s", want: 10},
		{in: "1.5/m", want: 0.025},
		{in: "30r/m", want: 0.5},
		{in: "2r/s", want: 2},
		{in: "7200/h", want: 2},
		{in: " 5/s ", want: 5},
		{in: "0.5/s", want: 0.5},
		{in: "5", wantErr: "has no unit: write it like 5/s"},
		{in: "5/d", wantErr: "the unit must be /s, /m or /h"},
		{in: "5r/h", wantErr: "nginx rates are Nr/s or Nr/m"},
		{in: "0/s", wantErr: "must be positive"},
		{in: "-1/s", wantErr: "not a decimal number"},
		{in: "1e3/s", wantErr: "not a decimal number"},
		{in: ".5/s", wantErr: "not a decimal number"},
		{in: "", wantErr: "invalid rate"},
		{in: "fast", wantErr: "invalid rate"},
		{in: strings.Repeat("9", 400) + "/s", wantErr: "out of range"},
	} {
		got, err := ParseRate(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRate(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestParseRateRefuses: every spelling outside the grammar is refused, and
// the message says what to write instead.
func TestParseRateRefuses(t *testing.T) {
	for _, in := range []string{"", "10", "10/", "/s", "10/d", "10/min", "10 /s", "10r/h", "r/s", "-1/s", "+1/s", "0/s", "0.0/m", "1e3/s", ".5/s", "5./s", "0x10/s", "1_000/s", "NaN/s", "Inf/s", "10/S", "10rr/s"} {
		_, err := ParseRate(in)
		if err == nil {
			t.Errorf("ParseRate(%q) = nil error, want one", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "/s") {
			t.Errorf("ParseRate(%q) error %q does not say how to write a rate", in, msg)
		}
	}
}

func TestFormatRateRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want string
	}{
		{10, "10/s"},
		{1.0 / 60, "1/m"},
		{1.0 / 3600, "1/h"},
		{0.5, "0.5/s"},
		{2.5, "2.5/s"},
	} {
		if got := FormatRate(tc.r); got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
	for _, r := range []float64{1, 3, 1.0 / 7, 1e-6, 12345.678, 1.0 / 60, 2.0 / 3} {
		back, err := ParseRate(FormatRate(r))
		if err != nil || back != r {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v", r, back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: "1.5s", want: 1500 * time.Millisecond},
		{in: "2m", want: 2 * time.Minute},
		{in: " 500ms", want: 500 * time.Millisecond},
		{in: "60", wantErr: "has no unit: write it like 60s"},
		{in: "1.5", wantErr: "has no unit"},
		{in: "soon", wantErr: "use Go syntax"},
	} {
		got, err := ParseDuration(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{HumanNumber(40.90909090909091), "40.91"},
		{HumanNumber(1361.4), "1361"},
		{HumanNumber(123456.7), "123457"},
		{HumanNumber(0.0004567891), "0.0004568"},
		{HumanNumber(0), "0"},
		{HumanNumber(-2.345678), "-2.346"},
		{HumanRate(40.90909090909091), "40.91/s"},
		{HumanRate(0.5), "30/m"},
		{HumanRate(1.0 / 3600), "1/h"},
		{HumanRate(0.123456), "0.1235/s"},
		{HumanRate(5), "5/s"},
		{HumanDuration(1234567 * time.Nanosecond), "1.2ms"},
		{HumanDuration(1234567891 * time.Nanosecond), "1.235s"},
		{HumanDuration(123456 * time.Nanosecond), "123µs"},
		{HumanDuration(125 * time.Second), "2m5s"},
		{HumanDuration(0), "0s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	if got := Seconds(1.5); got != 1500*time.Millisecond {
		t.Errorf("Seconds(1.5) = %v", got)
	}
	if got := Seconds(1e300); got != math.MaxInt64 {
		t.Errorf("Seconds(1e300) = %v, want the largest duration", got)
	}
	if got := Seconds(math.NaN()); got != 0 {
		t.Errorf("Seconds(NaN) = %v", got)
	}
}

func TestTypesInFilesAndFlags(t *testing.T) {
	var v struct {
		Rate   Rate     `yaml:"rate" json:"rate"`
		Window Duration `yaml:"window" json:"window"`
	}
	if err := yaml.Unmarshal([]byte("rate: 30r/m\nwindow: 1m\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.Rate != 0.5 || time.Duration(v.Window) != time.Minute {
		t.Fatalf("yaml: got %+v", v)
	}
	err := yaml.Unmarshal([]byte("rate: 5\nwindow: 60\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "line 1: rate \"5\" has no unit") || !strings.Contains(err.Error(), "line 2: duration \"60\" has no unit") {
		t.Fatalf("yaml errors: want both lines reported, got %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"rate":"0.5/s","window":"1m0s"}` {
		t.Fatalf("json: %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"rate":"2/s","window":"1.5s"}`), &v); err != nil || v.Rate != 2 || time.Duration(v.Window) != 1500*time.Millisecond {
		t.Fatalf("json decode: %+v, %v", v, err)
	}
	var r Rate
	var d Duration
	if r.String() != "" || d.String() != "" {
		t.Error("unset values print as empty")
	}
	if err := r.Set("10"); err == nil {
		t.Error("Set accepted a bare number")
	}
	if err := d.Set("2s"); err != nil || d.String() != "2s" || d.Type() != "duration" || r.Type() != "rate" {
		t.Errorf("flag value: %v %q", err, d.String())
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10/s", "1.5r/m", "5", "0/h", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if !(r > 0) || math.IsInf(r, 0) {
			t.Fatalf("ParseRate(%q) = %v without error", s, r)
		}
		if back, err := ParseRate(FormatRate(r)); err != nil || back != r {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
	})
}

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "0 requests"}, {1, "1 request"}, {2, "2 requests"}, {-1, "-1 requests"}} {
		if got := Count(tt.n, "request"); got != tt.want {
			t.Errorf("Count(%d, request) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
