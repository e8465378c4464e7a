package session

import (
	"errors"
	"fmt"
	"testing"
)

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		fixes []Fix
		want  string
	}{
		{[]Fix{{Flag: "--force"}}, "m; add --force"},
		{[]Fix{{Flag: "--budget", Value: "5%"}, {Flag: "--every", Value: "1m0s"}}, "m; use --budget 5% or --every 1m0s"},
		{[]Fix{{Flag: "--every", Value: "10s"}}, "m; use --every 10s"},
	} {
		err := fmt.Errorf("wrapped: %w", Suggest(Usage, "m", tc.fixes...))
		if got := err.Error(); got != "wrapped: "+tc.want {
			t.Errorf("message %q, want %q", got, "wrapped: "+tc.want)
		}
		if ClassOf(err) != Usage || fmt.Sprint(Fixes(err)) != fmt.Sprint(tc.fixes) {
			t.Errorf("class %v, fixes %v; want usage, %v", ClassOf(err), Fixes(err), tc.fixes)
		}
	}
	if Fixes(errors.New("plain")) != nil {
		t.Error("a plain error suggests fixes")
	}
}
