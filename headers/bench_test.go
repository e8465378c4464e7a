package headers

import (
	"net/http"
	"testing"
	"time"
)

func BenchmarkParse(b *testing.B) {
	for _, s := range parseSamples {
		if s.name != "draft-10-multiple-lines" && s.name != "github" && s.name != "express-draft-7" {
			continue
		}
		h := http.Header{}
		for _, kv := range s.header {
			h.Add(kv[0], kv[1])
		}
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Parse(h, received)
			}
		})
	}
}

func BenchmarkSet(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, d := range []Dialect{Draft8, Draft7, XRateLimitEpoch} {
		b.Run(string(d), func(b *testing.B) {
			b.ReportAllocs()
			h := http.Header{}
			for b.Loop() {
				Set(h, d, now, goldenQuotas...)
			}
		})
	}
}
