package headers

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestDetect builds runs of r/t responses one second apart and checks which
// draft Detect reports: -11 needs t > 0 with r > 0 and no effective window
// seen admitting more than its r, or a declaration.
func TestDetect(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	// resp is a response sent at second i, answered 10 ms later.
	resp := func(i int, admitted bool, field, value string) Sample {
		h := http.Header{}
		setField(h, field, value)
		sent := t0.Add(time.Duration(i) * time.Second)
		return Sample{Sent: sent, Received: sent.Add(10 * time.Millisecond), Admitted: admitted, Parsed: Parse(h, sent)}
	}
	rl := func(i int, admitted bool, v string) Sample { return resp(i, admitted, fieldRateLimit, v) }
	tests := []struct {
		name     string
		samples  []Sample
		declared []Dialect
		want     []Dialect
	}{
		{"nothing", nil, nil, []Dialect{None}},
		{"draft-8 as served: t 0 while r > 0", []Sample{
			rl(0, true, `"d";r=2;t=0`), rl(1, true, `"d";r=1;t=0`), rl(2, true, `"d";r=0;t=5`), rl(3, false, `"d";r=0;t=4`)},
			nil, []Dialect{Draft8}},
		{"effective window honoured", []Sample{
			rl(0, true, `"d";r=2;t=10`), rl(1, true, `"d";r=1;t=9`), rl(2, true, `"d";r=0;t=8`), rl(3, false, `"d";r=0;t=7`)},
			nil, []Dialect{Draft11}},
		{"t contradicted: three admitted within a t promising at most one", []Sample{
			rl(0, true, `"d";r=1;t=10`), rl(1, true, `"d";r=5;t=1`), rl(2, true, `"d";r=4;t=1`), rl(3, true, `"d";r=3;t=1`)},
			nil, []Dialect{Draft8}},
		{"rounding: an admission in the last second of t is no contradiction", []Sample{
			rl(0, true, `"d";r=0;t=2`), rl(1, true, `"d";r=3;t=1`)},
			nil, []Dialect{Draft11}},
		{"a burst answered at one instant is no contradiction (its order is open)", func() []Sample {
			var b []Sample
			for range 5 {
				x := rl(0, true, `"d";r=4;t=2`)
				x.Received = x.Sent
				b = append(b, x)
			}
			return b
		}(), nil, []Dialect{Draft11}},
		{"declared draft-11", []Sample{rl(0, true, `"d";r=2;t=0`)}, []Dialect{Draft11}, []Dialect{Draft11}},
		{"draft-12 on a/w", []Sample{rl(0, true, `"d";a=2;w=10`)}, nil, []Dialect{Draft12}},
		{"other dialects kept", []Sample{rl(0, true, `"d";r=2;t=10`), resp(1, true, fieldXRemaining, "3")},
			nil, []Dialect{XRateLimit, Draft11}},
	}
	for _, tt := range tests {
		if got := Detect(tt.samples, tt.declared); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Detect = %v, want %v", tt.name, got, tt.want)
		}
	}
}
