package verify

import (
	"testing"
	"time"
)

// TestEndpointString pins the one description of a rule: every front end
// says a rule with it, numbers in the units display format.
func TestEndpointString(t *testing.T) {
	burst := int64(3)
	for _, tt := range []struct {
		e    Endpoint
		want string
	}{
		{Endpoint{Limit: 100, Window: time.Minute}, "100 in any 1m0s"},
		{Endpoint{Path: "/api", Limit: 10, Window: time.Second}, "/api: 10 in any 1s"},
		{Endpoint{Method: "GET", Limit: 10, Window: 1500 * time.Millisecond}, "GET /*: 10 in any 1.5s"},
		{Endpoint{Method: "GET", Path: "/a", Limit: 5, Window: 2 * time.Second, WindowType: Fixed, Align: "epoch", Key: KeyIP},
			"GET /a: 5 per 2s window (epoch-aligned) per ip"},
		{Endpoint{Limit: 5, Window: time.Second, WindowType: Fixed}, "5 per 1s window (first-request-aligned)"},
		{Endpoint{Rate: 1, Capacity: 4}, "rate 1/s, capacity 4"},
		{Endpoint{Rate: 1, Burst: &burst, Key: "header:X-Key"}, "rate 1/s, capacity 4 per header:X-Key"},
		{Endpoint{Rate: 1.0 / 60, Capacity: 2}, "rate 1/m, capacity 2"},
		{Endpoint{Rate: 40.909090909090914, Capacity: 2, Key: KeyGlobal}, "rate 40.91/s, capacity 2"},
		{Endpoint{Limit: 3, Window: 1234567 * time.Microsecond}, "3 in any 1.235s"},
		{Endpoint{Status: 503}, "rejects with 503"},
		{Endpoint{}, "no limit"},
	} {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestPolicyString(t *testing.T) {
	p := Policy{Endpoints: []Endpoint{{Path: "/a", Limit: 1, Window: time.Second}, {Rate: 2, Capacity: 4}}}
	if got, want := p.String(), "/a: 1 in any 1s; rate 2/s, capacity 4"; got != want {
		t.Errorf("Policy.String() = %q, want %q", got, want)
	}
	var none *Policy
	if got := none.String(); got != "no policy" {
		t.Errorf("nil Policy.String() = %q, want \"no policy\"", got)
	}
	if got := (&Policy{}).String(); got != "no policy" {
		t.Errorf("empty Policy.String() = %q, want \"no policy\"", got)
	}
}
