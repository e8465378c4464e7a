package record

import (
	"net/http"
	"testing"
)

// TestClassify is contract.md's "Words" section as a table.
func TestClassify(t *testing.T) {
	resp := func(status int, h http.Header) Result {
		return Result{Outcome: OutcomeResponse, Status: status, Headers: h}
	}
	age := func(v string) http.Header { return http.Header{"Age": {v}} }
	for _, tc := range []struct {
		name     string
		r        Result
		declared int
		want     Class
		mismatch bool
	}{
		{"200 accepted", resp(200, nil), 0, ClassAccepted, false},
		{"204 accepted", resp(204, nil), 429, ClassAccepted, false},
		{"cache hit is other", resp(200, age("5")), 0, ClassOther, false},
		{"Age 0 is fresh", resp(200, age("0")), 0, ClassAccepted, false},
		{"non-canonical Age key", resp(200, http.Header{"age": {"3"}}), 0, ClassOther, false},
		{"cached 429 is other", resp(429, age("2")), 429, ClassOther, false},
		{"429 undeclared", resp(429, nil), 0, ClassRejected, false},
		{"503 undeclared", resp(503, nil), 0, ClassRejected, false},
		{"429 declared", resp(429, nil), 429, ClassRejected, false},
		{"503 under declared 429", resp(503, nil), 429, ClassRejected, true},
		{"429 under declared 503", resp(429, nil), 503, ClassRejected, true},
		{"declared 420", resp(420, nil), 420, ClassRejected, false},
		{"420 undeclared", resp(420, nil), 0, ClassOther, false},
		{"404 other", resp(404, nil), 429, ClassOther, false},
		{"302 other", resp(302, nil), 0, ClassOther, false},
		{"500 other", resp(500, nil), 0, ClassOther, false},
		{"transport error", Result{Outcome: OutcomeError, Err: ErrTimeout}, 0, ClassError, false},
		{"not sent", Result{Outcome: OutcomeNotSent}, 0, ClassNotSent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, mm := Classify(tc.r, tc.declared)
			if c != tc.want || mm != tc.mismatch {
				t.Errorf("Classify = %s, mismatch %v; want %s, %v", c, mm, tc.want, tc.mismatch)
			}
		})
	}
}
