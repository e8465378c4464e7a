package record

import (
	"encoding/json"
	"time"
)

// SchemaRun is the "schema" member of the run document.
const SchemaRun = "rlprobe.run/v1"

// LateThreshold is how late (sent − sched) a send must be to count as late
// in a run summary.
const LateThreshold = time.Millisecond

// RunDoc is the run document (schema rlprobe.run/v1, contract.md "JSON
// documents"): the one struct that `rlprobe run --json` writes and that
// `rlprobe report` embeds as its "run" member. Its identity comes first,
// then the summary's counts, then the record file.
type RunDoc struct {
	Schema   string   `json:"schema"` // SchemaRun
	Tool     string   `json:"tool"`
	Complete bool     `json:"complete"`
	Reason   string   `json:"reason"` // completed, or the end reason that cut it short
	Targets  []string `json:"targets"`
	// Seed is the run's seed; nil when several runs are summarised.
	Seed *uint64 `json:"seed,omitempty"`
	// Plan is the plan run, as JSON; nil when unknown or several.
	Plan json.RawMessage `json:"plan,omitempty"`
	RunSummary
	RecordFile string `json:"record_file"`
	// RecordStallMS is how long, in milliseconds, writing the record held
	// the run back: the time results waited for room in the record
	// writer's bounded backlog (record.MaxBacklog) while the file fell
	// behind. Sends held back meanwhile count as late; no result is ever
	// dropped. 0 when nothing waited, and in a report (which reads a file).
	RecordStallMS float64 `json:"record_stall_ms"`
	// RecordBacklogMax is the largest backlog of the record writer, in
	// bytes: lines accepted and not yet written to the file (at most
	// record.MaxBacklog plus one line). 0 in memory and in a report.
	RecordBacklogMax int `json:"record_backlog_max"`
}

// RunSummary condenses a run's results: counts per outcome (classified by
// Classify), status, error class and client, latency per status, pacing
// error and race spread. Every distribution is in microseconds; how its
// percentiles are estimated is the producer's to document.
type RunSummary struct {
	Scheduled int `json:"scheduled"`
	Sent      int `json:"sent"` // responses + errors
	Responses int `json:"responses"`
	Errors    int `json:"errors"`
	NotSent   int `json:"not_sent"`
	Accepted  int `json:"accepted"`
	// Delayed counts the accepted answers held well above the rest (a
	// queueing limiter), when the producer judges it (report does; run
	// does not).
	Delayed  int `json:"delayed,omitempty"`
	Rejected int `json:"rejected"`
	Other    int `json:"other"`
	// Statuses counts responses by status code ("200": n).
	Statuses map[string]int `json:"statuses"`
	// ErrorClasses counts errors by class (ErrRefused …).
	ErrorClasses map[string]int `json:"error_classes,omitempty"`
	// NotSentReasons counts not-sent results by reason.
	NotSentReasons map[string]int `json:"not_sent_reasons,omitempty"`
	// Clients has one entry per client identity, in order of their labels.
	Clients []ClientSummary `json:"clients"`
	// Latency is the distribution, per status code, of Result.Latency.
	Latency map[string]Dist `json:"latency"`
	// Pacing is the distribution of the send error (Result.SendTimes);
	// negative errors count as 0.
	Pacing Dist `json:"pacing_error"`
	// Late counts sends whose pacing error exceeds LateThreshold.
	Late int `json:"late"`
	// Races counts releases: two or more sent results of one agent and
	// phase with the same sched.
	Races int `json:"races"`
	// RaceWroteSpread is the distribution over releases of max − min of
	// wrote: how closely the client released its requests.
	RaceWroteSpread Dist `json:"race_wrote_spread"`
	// RaceArrivalSpread is the distribution over releases of max − min of
	// the server-echoed arrival (releases with at least two echoes).
	RaceArrivalSpread Dist `json:"race_arrival_spread"`
	// DelayedThresholdMS is the latency from which an accepted answer
	// counts as delayed; 0 when not judged.
	DelayedThresholdMS float64 `json:"delayed_threshold_ms,omitempty"`
	// DurationS is the span from the first send to the last completion.
	DurationS float64 `json:"duration_s"`
	// SentPerS is Sent / DurationS (0 when the span is empty).
	SentPerS float64 `json:"sent_per_s"`
}

// ClientSummary counts one client's results.
type ClientSummary struct {
	Client   string `json:"client"`
	Sent     int    `json:"sent"`
	Accepted int    `json:"accepted"`
	Delayed  int    `json:"delayed,omitempty"`
	Rejected int    `json:"rejected"`
	Other    int    `json:"other"`
	Errors   int    `json:"errors"`
	NotSent  int    `json:"not_sent"`
}
