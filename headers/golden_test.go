package headers

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenNow is the response time of the golden files; its half second shows
// the rounding of epoch resets.
var goldenNow = time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)

// goldenQuotas is a per-minute and a daily policy; the daily one is the
// expiring one (fewer remaining).
var goldenQuotas = []Quota{
	{Policy: "burst", Limit: 100, Window: time.Minute, Remaining: 50, UntilMore: 1200 * time.Millisecond, UntilFull: 29500 * time.Millisecond,
		Effective: 400 * time.Millisecond, Cost: 1},
	{Policy: "daily", Limit: 1000, Window: 24 * time.Hour, Remaining: 10, UntilMore: 86 * time.Second, UntilFull: 3 * time.Hour,
		Effective: 86 * time.Second, Unit: "requests", PartitionKey: []byte("user-42")},
}

// formatHeader writes h as wire lines sorted by name.
func formatHeader(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range h[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	return b.String()
}

// dump writes p in a stable, readable form.
func dump(p Parsed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dialects: %v\n", p.Dialects)
	opt := func(ok bool, v any) string {
		if !ok {
			return "-"
		}
		return fmt.Sprint(v)
	}
	for _, x := range p.Policies {
		fmt.Fprintf(&b, "policy %s name=%q quota=%d window=%s unit=%q pk=%q\n",
			x.Dialect, x.Name, x.Quota, opt(x.HasWindow, x.Window), x.Unit, x.PartitionKey)
	}
	for _, x := range p.Limits {
		reset := opt(x.HasReset, x.Reset)
		if x.HasReset && x.ResetIsEpoch {
			reset += " (epoch)"
		}
		used := ""
		if x.HasUsed {
			used = fmt.Sprintf(" used=%d", x.Used)
		}
		if x.HasCost {
			used += fmt.Sprintf(" cost=%d", x.Cost)
		}
		fmt.Fprintf(&b, "limit %s name=%q limit=%s remaining=%s%s reset=%s pk=%q\n",
			x.Dialect, x.Name, opt(x.HasLimit, x.Limit), opt(x.HasRemaining, x.Remaining), used, reset, x.PartitionKey)
	}
	for _, x := range p.Partitions {
		fmt.Fprintf(&b, "partition name=%q dimensions=%+v\n", x.Policy, x.Dimensions)
	}
	if p.RetryAfter != nil {
		fmt.Fprintf(&b, "retry-after %s\n", *p.RetryAfter)
	}
	for _, x := range p.Problems {
		before := ""
		if x.Before != "" {
			before = fmt.Sprintf(" (not from %s)", x.Before)
		}
		fmt.Fprintf(&b, "problem %s%s\n", x, before)
	}
	return b.String()
}

// golden compares got with testdata/name.golden, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestSetGolden formats the golden quotas in each dialect, and parses the
// result back at the same instant.
func TestSetGolden(t *testing.T) {
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			h := http.Header{}
			Set(h, d, goldenNow, goldenQuotas...)
			h.Set(fieldRetryAfter, FormatRetryAfter(30*time.Second, RetryAfterSeconds, goldenNow))
			got := formatHeader(h) + "--- parsed\n" + dump(Parse(h, goldenNow))
			golden(t, "set-"+string(d), got)
		})
	}
}

// parseSamples are headers as real servers and the drafts write them.
var parseSamples = []struct {
	name   string
	header [][2]string
}{
	{"nothing", [][2]string{{"Content-Type", "text/plain"}}},
	{"openai", [][2]string{
		{"x-ratelimit-limit-requests", "10000"}, {"x-ratelimit-limit-tokens", "2000000"},
		{"x-ratelimit-remaining-requests", "9999"}, {"x-ratelimit-remaining-tokens", "1999982"},
		{"x-ratelimit-reset-requests", "6ms"}, {"x-ratelimit-reset-tokens", "0s"}}},
	{"openai-exhausted", [][2]string{
		{"x-ratelimit-limit-requests", "60"}, {"x-ratelimit-remaining-requests", "0"}, {"x-ratelimit-reset-requests", "6m0s"},
		{"x-ratelimit-limit-tokens", "150000"}, {"x-ratelimit-remaining-tokens", "149984"}, {"x-ratelimit-reset-tokens", "1m26.4s"},
		{"retry-after", "20"}}},
	{"openai-compatible-seconds", [][2]string{
		{"x-ratelimit-limit-requests", "30"}, {"x-ratelimit-remaining-requests", "29"}, {"x-ratelimit-reset-requests", "2.5"}}},
	{"shopify", [][2]string{{"X-Shopify-Shop-Api-Call-Limit", "32/40"}}},
	{"shopify-full", [][2]string{{"x-shopify-shop-api-call-limit", "40/40"}, {"Retry-After", "2.0"}}},
	{"github-search", [][2]string{
		{"X-RateLimit-Limit", "30"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1778754072"},
		{"X-RateLimit-Used", "30"}, {"X-RateLimit-Resource", "search"}}},
	{"github", [][2]string{
		{"x-ratelimit-limit", "5000"}, {"x-ratelimit-remaining", "4999"}, {"x-ratelimit-reset", "1778754060"},
		{"x-ratelimit-used", "1"}, {"x-ratelimit-resource", "core"}}},
	{"throttled-delta", [][2]string{
		{"X-RateLimit-Limit", "10"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "3"}, {"Retry-After", "1"}}},
	{"epoch-milliseconds", [][2]string{
		{"X-Rate-Limit-Limit", "60"}, {"X-Rate-Limit-Remaining", "12"}, {"X-Rate-Limit-Reset", "1778754060123"}}},
	{"envoy", [][2]string{
		{"x-ratelimit-limit", `10, 10;w=1;name="per-ip", 1000;w=3600`}, {"x-ratelimit-remaining", "9"},
		{"x-ratelimit-reset", "1"}, {"x-envoy-ratelimited", "true"}}},
	{"express-draft-6", [][2]string{
		{"RateLimit-Policy", "100;w=60"}, {"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "99"}, {"RateLimit-Reset", "60"}}},
	{"express-draft-7", [][2]string{
		{"RateLimit-Policy", "100;w=60"}, {"RateLimit", "limit=100, remaining=99, reset=60"}}},
	{"express-draft-8", [][2]string{
		{"RateLimit-Policy", `"100-in-1min"; q=100; w=60; pk=:ZjA2Yzk1OGU1NjNm:`},
		{"RateLimit", `"100-in-1min"; r=99; t=60; pk=:ZjA2Yzk1OGU1NjNm:`}}},
	{"draft-10-multiple-lines", [][2]string{
		{"RateLimit-Policy", `"burst";q=100;w=60`}, {"RateLimit-Policy", `"daily";q=1000;w=86400`},
		{"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`},
		{"RateLimit", `"burst";r=0;t=30`}, {"RateLimit", `"daily";r=900`},
		{"Retry-After", "Thu, 14 May 2026 10:22:00 GMT"}}},
	{"draft-10-appendix-token", [][2]string{
		{"RateLimit-Policy", "quota;q=100;w=1"}, {"RateLimit", "quota;t=1"}}},
	{"draft-10-faq-q-in-ratelimit", [][2]string{
		{"RateLimit-Policy", `"sliding";q=12;w=1`}, {"RateLimit", `"sliding";q=12;r=6;t=1`}}},
	// -08 §3/§4 examples.
	{"draft-08-fields", [][2]string{
		{"RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`}, {"RateLimit", `"default";r=50;t=30`}}},
	// -11 (May 2026): the same syntax, r the available quota, t the
	// effective window; its examples, its unit slip (qu "request", the
	// IANA table's spelling) and its FAQ's q inside RateLimit.
	{"draft-11-effective-window", [][2]string{
		{"RateLimit-Policy", `"basic";q=100;w=60`}, {"RateLimit", `"basic";r=60;t=58`}}},
	{"draft-11-throttled", [][2]string{
		{"Date", "Mon, 05 Aug 2019 09:27:00 GMT"}, {"Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT"},
		{"RateLimit", `"default";r=0;t=5`}}},
	{"draft-11-partition-key", [][2]string{
		{"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`},
		{"RateLimit", `"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`}}},
	{"draft-11-unit-request", [][2]string{
		{"RateLimit-Policy", `"default";q=100;qu="request";w=60`}, {"RateLimit", `"default";r=99;t=60`}}},
	{"draft-11-faq-q-in-ratelimit", [][2]string{
		{"RateLimit-Policy", `"sliding";q=12;w=1`}, {"RateLimit", `"sliding";q=12;r=1;t=1`}}},
	// -12 as PR #166 writes it: a, w, c and RateLimit-Partition.
	{"draft-12-fields", [][2]string{
		{"RateLimit-Policy", `"burst";q=100;w=60`}, {"RateLimit", `"burst";a=80;w=45`}}},
	{"draft-12-cost-partition", [][2]string{
		{"RateLimit-Policy", `"api";q=1000;w=3600;pk=:R0VUH2FsaWNl:`},
		{"RateLimit", `"api";a=950;w=1200;c=1;pk=:R0VUH2FsaWNl:`},
		{"RateLimit-Partition", `"api";user_id;method=GET, "search";client_id`}}},
	{"draft-12-q-in-ratelimit", [][2]string{
		{"RateLimit-Policy", `"sliding";q=12;w=1`}, {"RateLimit", `"sliding";q=12;a=6;w=1`}}},
	{"draft-06-invalid-same-unit", [][2]string{
		{"RateLimit-Policy", "10;w=1, 10;w=60"}, {"RateLimit-Limit", "10"}, {"RateLimit-Reset", "1"}}},
	{"polli-list-limit", [][2]string{
		{"RateLimit-Limit", "100, 100;w=60, 1000;w=3600"}, {"RateLimit-Remaining", "5"}, {"RateLimit-Reset", "7"}}},
	{"one-broken-member", [][2]string{
		{"RateLimit-Policy", `"burst";q=100;w=60, "daily";Q=1000;w=86400`}, {"RateLimit", `"burst";r=4;t=2`}}},
	{"all-dialects", [][2]string{
		{"RateLimit-Policy", `"default";q=100;w=60, 100;w=60`}, {"RateLimit", `limit=100, remaining=50, reset=30`},
		{"RateLimit-Limit", "100"}, {"RateLimit-Remaining", "50"}, {"RateLimit-Reset", "30"},
		{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "50"}, {"X-RateLimit-Reset", "30"}}},
}

// TestParseGolden parses real-world and draft samples; the golden files
// show each input above its result. The names are kept as the samples spell
// them, as a record keeps them.
func TestParseGolden(t *testing.T) {
	for _, s := range parseSamples {
		t.Run(s.name, func(t *testing.T) {
			h := http.Header{}
			var in strings.Builder
			for _, kv := range s.header {
				h[kv[0]] = append(h[kv[0]], kv[1])
				fmt.Fprintf(&in, "%s: %s\n", kv[0], kv[1])
			}
			golden(t, "parse-"+s.name, in.String()+"--- parsed\n"+dump(Parse(h, received)))
		})
	}
}
