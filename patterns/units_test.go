package patterns

import (
	"testing"
	"time"
)

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
