package verify

import (
	"fmt"
	"time"

	"github.com/rlprobe/rlprobe/headers"
)

// The cacheability family: cacheable-429.

// cacheable raises cacheable-429 for rejections that carry explicit
// freshness without no-store or private.
func (r *rule) cacheable(t *traffic) []Finding {
	var bad []*obs
	for _, o := range t.rej {
		if headers.Cacheable(o.res.Headers, o.start.Add(time.Duration(o.recv))) {
			bad = append(bad, o)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return []Finding{r.finding(IDCacheable429, Certain, t.g, bad, Finding{
		Check:    CheckHeaders,
		Message:  fmt.Sprintf("%d rejections may be cached (Cache-Control: %s)", len(bad), headers.Get(bad[0].res.Headers, "Cache-Control")),
		Evidence: Evidence{Headers: bad[0].res.Headers},
	})}
}
