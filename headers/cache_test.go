package headers

import (
	"net/http"
	"testing"
)

func TestCacheable(t *testing.T) {
	// received is 2026-05-14 10:20:30.25 UTC.
	tests := []struct {
		name   string
		header [][2]string
		want   bool
	}{
		{"nothing", nil, false},
		{"max-age", [][2]string{{"Cache-Control", "max-age=60"}}, true},
		{"max-age=0", [][2]string{{"Cache-Control", "max-age=0"}}, false},
		{"quoted max-age", [][2]string{{"Cache-Control", `max-age="60"`}}, true},
		{"upper-case directive", [][2]string{{"Cache-Control", "Max-Age=60"}}, true},
		{"s-maxage", [][2]string{{"Cache-Control", "s-maxage=30, max-age=0"}}, true},
		{"public alone", [][2]string{{"Cache-Control", "public"}}, true},
		{"no-store wins", [][2]string{{"Cache-Control", "public, max-age=60, no-store"}}, false},
		{"private wins", [][2]string{{"Cache-Control", "max-age=60"}, {"Cache-Control", `private="Set-Cookie"`}}, false},
		{"no-cache is still stored", [][2]string{{"Cache-Control", "no-cache, max-age=60"}}, true},
		{"first max-age counts", [][2]string{{"Cache-Control", "max-age=0, max-age=60"}}, false},
		{"future Expires", [][2]string{{"Expires", "Thu, 14 May 2026 11:00:00 GMT"}}, true},
		{"past Expires", [][2]string{{"Expires", "Thu, 14 May 2026 10:00:00 GMT"}}, false},
		{"invalid Expires is expired", [][2]string{{"Expires", "0"}}, false},
		{"Expires against Date", [][2]string{{"Expires", "Thu, 14 May 2026 11:00:00 GMT"}, {"Date", "Thu, 14 May 2026 12:00:00 GMT"}}, false},
		{"Expires equal to Date", [][2]string{{"Expires", "Thu, 14 May 2026 10:20:30 GMT"}, {"Date", "Thu, 14 May 2026 10:20:30 GMT"}}, false},
		{"max-age=0 overrides Expires", [][2]string{{"Cache-Control", "max-age=0"}, {"Expires", "Thu, 14 May 2026 11:00:00 GMT"}}, false},
		{"no-store with Expires", [][2]string{{"Cache-Control", "no-store"}, {"Expires", "Thu, 14 May 2026 11:00:00 GMT"}}, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, kv := range tt.header {
			h.Add(kv[0], kv[1])
		}
		if got := Cacheable(h, received); got != tt.want {
			t.Errorf("%s: Cacheable(%v) = %v, want %v", tt.name, h, got, tt.want)
		}
	}
}

func TestCapturedCoversEveryParsedField(t *testing.T) {
	for _, f := range []string{fieldRetryAfter, fieldRateLimit, fieldPolicy, fieldPartition, fieldLimit6, fieldRemaining6, fieldReset6,
		fieldXLimit, fieldXRemaining, fieldXReset, fieldXUsed, fieldXResource, fieldXAltLimit, fieldXAltRemaining, fieldXAltReset,
		fieldOpenAILimitRequests, fieldOpenAIRemainingRequests, fieldOpenAIResetRequests,
		fieldOpenAILimitTokens, fieldOpenAIRemainingTokens, fieldOpenAIResetTokens, fieldShopify,
		fieldCacheControl, fieldExpires, fieldDate, ArrivalHeader} {
		found := false
		for _, c := range Captured {
			found = found || c == f
		}
		if !found {
			t.Errorf("Captured lacks %s, which Parse or Cacheable reads", f)
		}
	}
	if len(Captured) != 28 {
		t.Errorf("Captured has %d names, want 28: every dialect's fields, vendor ones included", len(Captured))
	}
}
