package patterns

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr string
	}{
		{"5/s", 5, ""},
		{"5r/s", 5, ""},
		{"0.5/s", 0.5, ""},
		{"30/m", 0.5, ""},
		{"1r/m", 1.0 / 60, ""},
		{"1.5r/m", 1.5 / 60, ""},
		{"3600/h", 1, ""},
		{"10", 0, "no unit"},
		{"10.5", 0, "no unit"},
		{"1r/h", 0, "nginx rates"},
		{"5/d", 0, "unit"},
		{"-5/s", 0, "not a decimal"},
		{"1e3/s", 0, "not a decimal"},
		{"inf/s", 0, "not a decimal"},
		{"0/s", 0, "positive"},
		{"/s", 0, "not a decimal"},
		{"1..2/s", 0, "not a decimal"},
		{"fast", 0, "N/s"},
		{"", 0, "N/s"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "patterns: ") {
				t.Errorf("ParseRate(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{5, "5/s"},
		{0.5, "0.5/s"},
		{1.0 / 60, "1/m"},
		{1.0 / 3600, "1/h"},
		{2.5, "2.5/s"},
		{1000, "1000/s"},
	}
	for _, tt := range tests {
		got := FormatRate(tt.in)
		if got != tt.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := ParseRate(got); err != nil || back != tt.in {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v; want the same rate back", tt.in, back, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"1.5s", 1500 * time.Millisecond, ""},
		{"2m", 2 * time.Minute, ""},
		{"60", 0, "no unit"},
		{"abc", 0, "Go syntax"},
	} {
		got, err := ParseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseTime(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	now := time.Date(2030, 5, 1, 12, 30, 0, 0, zone)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"2030-05-01T10:00:00Z", time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC), false},
		{"2030-05-01T10:00:00.25+02:00", time.Date(2030, 5, 1, 8, 0, 0, 250e6, time.UTC), false},
		{"13:00", time.Date(2030, 5, 1, 13, 0, 0, 0, zone), false}, // later today
		{"12:30:00", now, false}, // now itself
		{"12:29:59.5", time.Date(2030, 5, 2, 12, 29, 59, 500e6, zone), false}, // passed: tomorrow
		{"00:00:00", time.Date(2030, 5, 2, 0, 0, 0, 0, zone), false},          // midnight: tomorrow
		{"25:00", time.Time{}, true},                                          // no such hour
		{"noon", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, now)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseTime(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
