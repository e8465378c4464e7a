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

// SendTimes returns a sent result's pacing error (how late it went out,
// ns; negative when early) and the moment it counts as sent (ns since the
// run's start): normally Sent − Sched and Sent; for a race member whose
// head went out before its release (Sent < Sched), Wrote − Sched and Wrote,
// since the release of its final byte is what was scheduled. Meaningless
// for a result that was never sent (Sent 0).
func (r *Result) SendTimes() (pacing, start int64) {
	if r.Sent < r.Sched && r.Wrote != 0 {
		return r.Wrote - r.Sched, r.Wrote
	}
	return r.Sent - r.Sched, r.Sent
}

// Latency returns an answered result's latency in ns, as the run document
// counts it: from the moment it counts as sent (see SendTimes) to the
// response fully read (Done). ok is false for a result without a response,
// or one never sent or never finished.
func (r *Result) Latency() (ns int64, ok bool) {
	if r.Outcome != OutcomeResponse || r.Sent == 0 || r.Done == 0 {
		return 0, false
	}
	_, start := r.SendTimes()
	return r.Done - start, true
}
