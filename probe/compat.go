package probe

// The headers package promises Captured and ArrivalHeader; until it builds,
// these local copies stand in (switch to headers.Captured and
// headers.ArrivalHeader when it lands).

// arrivalHeader is the response header in which a server echoes the
// request's arrival time, in Unix nanoseconds on its clock.
const arrivalHeader = "X-Rlprobe-Arrival"

// defaultCaptured returns the response header names recorded by default.
func defaultCaptured() []string {
	return []string{
		"Retry-After",
		"RateLimit", "RateLimit-Policy",
		"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
		"X-RateLimit-Used", "X-RateLimit-Resource",
		"X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset",
		"Cache-Control", "Expires", "Date", "X-Envoy-Ratelimited",
	}
}
