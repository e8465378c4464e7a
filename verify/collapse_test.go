package verify

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKeyCollapsed: under a per-client rule, a client refused while its
// own quota was surely left, after other clients used the quota, is
// key-collapsed — certain when the others' acceptances surely fill the
// window before the refusal, and then not also under-admission; possible
// when they only may; with one client, or a refusal the pooled count cannot
// explain, it stays under-admission. A client whose first request is
// refused says nothing certain of its own quota: its key may be busy with
// traffic from before the run.
func TestKeyCollapsed(t *testing.T) {
	type req struct {
		client string
		ms     float64
		status int
	}
	e := Endpoint{Limit: 3, Window: time.Second, Key: "header:X-Client", Headers: []string{"none"}}
	for _, tt := range []struct {
		name        string
		uncertainty time.Duration
		reqs        []req
		want        map[string]Certainty
	}{
		{"A exhausts, B refused", 0, []req{{"a", 0, 200}, {"a", 10, 200}, {"a", 20, 200}, {"b", 100, 429}},
			map[string]Certainty{IDKeyCollapsed: Certain}},
		{"A exhausts, B admitted: keys apart", 0, []req{{"a", 0, 200}, {"a", 10, 200}, {"a", 20, 200}, {"b", 100, 200}}, map[string]Certainty{}},
		{"A's acceptances may have left the window", 500 * time.Millisecond, []req{{"a", 0, 200}, {"a", 10, 200}, {"a", 20, 200}, {"b", 900, 429}},
			map[string]Certainty{IDKeyCollapsed: Possible}},
		// Past a window after its first request, nothing from before the
		// run counts in B's window any more.
		{"one client refused early: under-admission", 0, []req{{"b", 0, 200}, {"b", 1100, 200}, {"b", 1110, 429}}, map[string]Certainty{IDUnderAdmission: Certain}},
		{"one client refused right after its first: its key may be busy", 0, []req{{"b", 0, 200}, {"b", 10, 429}}, map[string]Certainty{}},
		{"a client's first request refused: its key may be busy", 0, []req{{"b", 0, 429}}, map[string]Certainty{}},
		{"B refused, A used one: the pool cannot explain it", 0, []req{{"b", 0, 200}, {"a", 1100, 200}, {"b", 1150, 200}, {"b", 1200, 429}},
			map[string]Certainty{IDUnderAdmission: Certain}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newRun("a1", tt.uncertainty)
			for _, r := range tt.reqs {
				b.add(r.ms, r.ms+1, r.status).Client = r.client
			}
			rep := analyze(t, e, Options{}, b)
			got := map[string]Certainty{}
			for _, f := range rep.Findings {
				if slices.Contains([]string{IDKeyCollapsed, IDUnderAdmission}, f.ID) {
					got[f.ID] = f.Certainty
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("findings %v, want %v:%s", got, tt.want, describeFindings(rep))
			}
			for id, c := range tt.want {
				if got[id] != c {
					t.Errorf("%s %s, want %s:%s", id, got[id], c, describeFindings(rep))
				}
			}
		})
	}
}

// TestKeyUntestedNote: a per-client rule whose records show one identity
// gets a note that its key was not tested (a collapsed key would pass),
// with the flags that test it; two identities, or a global key, get none.
// The key-spoof probe's claimed addresses are not identities.
func TestKeyUntestedNote(t *testing.T) {
	for _, tt := range []struct {
		name    string
		key     string
		clients []string
		phases  []string
		want    string // a part of the note; "" for none
	}{
		{"ip key, one address", "ip", []string{"a", "a"}, []string{"burst", "burst"}, "give --source-ips two addresses"},
		{"header key, one identity", "header:X-Client", []string{"a"}, []string{"burst"}, "--clients 2 or more)"},
		{"ip key, spoofed claims are not identities", "ip", []string{"a", "203.0.113.2"}, []string{"burst", "key-spoof/X-Real-IP"}, "was not tested"},
		{"two identities", "header:X-Client", []string{"a", "b"}, []string{"burst", "burst"}, ""},
		{"global key", "global", []string{"a"}, []string{"burst"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := Endpoint{Limit: 3, Window: time.Second, Key: tt.key, Headers: []string{"none"}}
			b := newRun("a1", 0)
			for i, c := range tt.clients {
				x := b.add(float64(10*i), float64(10*i+1), 200)
				x.Client, x.Phase = c, tt.phases[i]
			}
			rep := analyze(t, e, Options{}, b)
			switch {
			case tt.want == "" && len(rep.Notes) > 0:
				t.Errorf("notes %q, want none", rep.Notes)
			case tt.want != "" && (len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], tt.want)):
				t.Errorf("notes %q, want one with %q", rep.Notes, tt.want)
			}
		})
	}
}
