package verify

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlprobe/rlprobe/limiter"
)

// TestPolicyPenalty: a penalty declared in a policy file reads into
// Endpoint.Penalty, shows in the rule's description, and writes back.
func TestPolicyPenalty(t *testing.T) {
	const file = `version: 1
endpoints:
  - {path: /a, limit: 5, window: 2s, penalty: "block:30s", key: ip}
  - {path: /b, limit: 5, window: 2s, window_type: fixed, penalty: extend}
  - {path: /c, limit: 5, window: 2s, penalty: restart}
  - {path: /d, rate: 1/s, capacity: 4, penalty: block:1m}
  - {path: /e, limit: 5, window: 2s, penalty: none}
`
	p, err := ParsePolicyFile([]byte(file), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pen  limiter.Penalty
		desc string
	}{
		{limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: 30 * time.Second}, "/a: 5 in any 2s per ip, penalty block:30s"},
		{limiter.Penalty{Kind: limiter.PenaltyExtend}, "/b: 5 per 2s window (first-request-aligned), penalty extend"},
		{limiter.Penalty{Kind: limiter.PenaltyRestart}, "/c: 5 in any 2s, penalty restart"},
		{limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: time.Minute}, "/d: rate 1/s, capacity 4, penalty block:1m0s"},
		{limiter.Penalty{}, "/e: 5 in any 2s"},
	}
	for i, w := range want {
		e := p.Endpoints[i]
		if e.Penalty != w.pen {
			t.Errorf("endpoints[%d].Penalty = %+v, want %+v", i, e.Penalty, w.pen)
		}
		if got := e.String(); got != w.desc {
			t.Errorf("endpoints[%d].String() = %q, want %q", i, got, w.desc)
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"penalty":"block:30s"`) || strings.Count(string(data), `"penalty"`) != 4 {
		t.Errorf("JSON %s: want the four penalties, none for the rule without one", data)
	}
	q, err := ParsePolicyFile(data, "")
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Errorf("round trip: %v\n%+v\n%+v", err, p, q)
	}
}

// TestPolicyPenaltyProblems: bad penalties are reported with the other
// problems, with their line; extend and restart need a window rule.
func TestPolicyPenaltyProblems(t *testing.T) {
	const file = `version: 1
endpoints:
  - limit: 5
    window: 2s
    penalty: block
  - rate: 1/s
    capacity: 2
    penalty: extend
  - rate: 1/s
    capacity: 2
    penalty: restart
  - limit: 5
    window: 2s
    penalty: jail:3s
  - limit: 5
    window: 2s
    penalty: block:0s
  - limit: 0
    window: 2s
    penalty: [block]
`
	_, err := ParsePolicyFile([]byte(file), "p.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		"line 5: endpoints[0].penalty: penalty \"block\": block needs a duration",
		"line 8: endpoints[1].penalty: extend moves a window's end: it needs a window policy",
		"line 11: endpoints[2].penalty: restart moves a window's end",
		"line 14: endpoints[3].penalty: penalty \"jail:3s\": one of block:DURATION, extend, restart",
		"line 17: endpoints[4].penalty: penalty \"block:0s\"",
		"line 18: endpoints[5].limit: must be at least 1",
		"line 20: endpoints[5].penalty: must be a single value",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	// Built by hand (flags, a library caller): the same rules.
	for _, tt := range []struct {
		e    Endpoint
		want string
	}{
		{Endpoint{Limit: 1, Window: time.Second, Penalty: limiter.Penalty{Kind: limiter.PenaltyBlock}}, "penalty: a block lasts more than 0"},
		{Endpoint{Rate: 1, Capacity: 1, Penalty: limiter.Penalty{Kind: limiter.PenaltyRestart}}, "penalty: restart moves a window's end"},
		{Endpoint{Limit: 1, Window: time.Second, Penalty: limiter.Penalty{Kind: "jail"}}, `penalty: must be block:DURATION (e.g. block:30s), extend or restart, not "jail"`},
		{Endpoint{Rate: 1, Capacity: 1, Penalty: limiter.Penalty{Kind: limiter.PenaltyBlock, Duration: time.Second}}, ""},
	} {
		p := Policy{Version: 1, Endpoints: []Endpoint{tt.e}}
		err := p.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.e, err, tt.want)
		}
	}
}
