package record

// Dist is a distribution of durations in microseconds, as the run document
// (schema rlprobe.run/v1) gives every one of them: the latency per status,
// the pacing error, the race spreads. Count is how many values were seen;
// MeanUS is their mean, rounded to 0.1 µs; the percentiles (P50US … P999US)
// and MaxUS are whole microseconds. How the percentiles are estimated is
// the producer's to document. The zero value is the empty distribution.
type Dist struct {
	Count  int64   `json:"count"`
	MeanUS float64 `json:"mean_us"`
	P50US  int64   `json:"p50_us"`
	P90US  int64   `json:"p90_us"`
	P99US  int64   `json:"p99_us"`
	P999US int64   `json:"p999_us"`
	MaxUS  int64   `json:"max_us"`
}
