package record

import (
	"encoding/json"
	"testing"
)

// TestDistJSON pins the member names of a distribution in the run document:
// every number carries its unit (contract.md, "JSON documents").
func TestDistJSON(t *testing.T) {
	tests := []struct {
		name string
		d    Dist
		want string
	}{
		{"empty", Dist{}, `{"count":0,"mean_us":0,"p50_us":0,"p90_us":0,"p99_us":0,"p999_us":0,"max_us":0}`},
		{"latency", Dist{Count: 3, MeanUS: 1250.5, P50US: 1000, P90US: 1500, P99US: 1900, P999US: 1990, MaxUS: 2000},
			`{"count":3,"mean_us":1250.5,"p50_us":1000,"p90_us":1500,"p99_us":1900,"p999_us":1990,"max_us":2000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("json.Marshal(%+v) = %s, want %s", tt.d, b, tt.want)
			}
			var back Dist
			if err := json.Unmarshal(b, &back); err != nil || back != tt.d {
				t.Errorf("round trip = %+v, %v; want %+v", back, err, tt.d)
			}
		})
	}
}
