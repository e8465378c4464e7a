// Package record defines rlprobe's record file: JSON Lines, one object per
// line, each with a "type". The first line is a Header, then one Result per
// scheduled request (in completion order), an End line, and any finding and
// inference documents that check, infer and analyze add (before or after the
// End line).
//
// Times inside a file are int64 nanoseconds relative to Header.Start, because
// absolute Unix nanoseconds overflow JavaScript numbers.
//
// The package has five parts:
//
//   - a streaming [Writer] (and [Create] to open its file safely), safe for
//     many goroutines, that flushes at least every [FlushInterval] and every
//     [FlushRecords] records so a killed process loses little; an [Appender]
//     adds findings and inferences to an existing file;
//   - a tolerant reader, [Read] for a whole file and [NewReader] to stream
//     one, that accepts a truncated last line, names corrupt lines by number
//     and refuses unknown major formats with a [*FormatError];
//   - [Merge], which puts several agents' files on one timeline;
//   - a [Redactor], which replaces secrets (credentials in headers, query
//     parameters and URLs) by a stable [Fingerprint] before anything is
//     written;
//   - the definitions every summary of a run shares: a result's pacing
//     error and latency ([Result.SendTimes], [Result.Latency]) and the
//     distribution type of the run document ([Dist]).
//
// The package imports nothing but the standard library.
package record

import (
	"encoding/json"
	"net/http"
	"time"
)

// FormatMajor is the major version of the file format this package writes.
// A reader refuses files with another major version.
const FormatMajor = 1

// Record types: the value of every line's "type" member.
const (
	TypeHeader    = "header"
	TypeResult    = "result"
	TypeFinding   = "finding"
	TypeInference = "inference"
	TypeEnd       = "end"
)

// Header is the first line of a record file. [NewWriter] fills Type and
// Format; everything else is the caller's.
type Header struct {
	Type   string `json:"type"`   // always "header"
	Format int    `json:"format"` // the file's major format; FormatMajor when written by this package
	Tool   string `json:"tool"`   // "rlprobe vX.Y.Z"
	Go     string `json:"go"`     // runtime.Version()
	// Start is the instant every relative time of the file counts from, on
	// this agent's clock; written in UTC as RFC 3339 with nanoseconds, and
	// read back in UTC. Choose it before the first send so that a relative
	// time of 0 can mean "did not happen" (see Result).
	Start time.Time `json:"start"`
	Agent string    `json:"agent"` // this agent's name; refs are "agent:seq" (see Merge)
	Host  string    `json:"host"`  // the machine the agent ran on
	// Targets are the target URLs (secrets redacted).
	Targets []string `json:"targets"`
	// Plan and Policy are the traffic plan and declared policy as raw JSON,
	// secrets redacted; nil when absent (omitted from the file). The reader
	// returns them compacted, with a JSON null read as nil.
	Plan   json.RawMessage `json:"plan,omitempty"`
	Policy json.RawMessage `json:"policy,omitempty"`
	Seed   uint64          `json:"seed"` // the seed of every randomised schedule
	// ClockOffsetNS is this agent's clock minus the reference clock (the
	// target's), and ClockUncertaintyNS its half-width; subtract the offset
	// to put this agent's times on the reference clock. Both are zero for a
	// single agent that made no clock measurement.
	ClockOffsetNS      int64 `json:"clock_offset_ns"`
	ClockUncertaintyNS int64 `json:"clock_uncertainty_ns"`
	// Captured lists the response header names kept in results.
	Captured []string `json:"captured"`
	// Proxy is the forward proxy the targets were reached through, its
	// secrets redacted (several, comma-separated, when targets differ);
	// empty when every target was reached directly.
	Proxy string `json:"proxy,omitempty"`
}

// Outcome says what became of one scheduled request.
type Outcome string

// Outcomes.
const (
	OutcomeResponse Outcome = "response" // an HTTP answer arrived (any status)
	OutcomeError    Outcome = "error"    // no HTTP answer; see Result.Err
	OutcomeNotSent  Outcome = "not-sent" // scheduled but never sent (cap, abort, signal)
)

// Error classes of Result.Err.
const (
	ErrRefused = "refused"
	ErrTimeout = "timeout"
	ErrReset   = "reset"
	ErrDNS     = "dns"
	ErrTLS     = "tls"
	ErrProxy   = "proxy" // the proxy could not be reached, or refused the tunnel
	ErrOther   = "other"
	// ErrHeaderTooLarge: the response head exceeded the engine's cap.
	ErrHeaderTooLarge = "header-too-large"
)

// Result is exactly one scheduled request. All times are nanoseconds since
// Header.Start on this agent's clock; a zero Sent, Wrote, TTFB or Done means
// "did not happen" (and is omitted from the file), while Sched is always
// present. The zero Result is not meaningful; a writer fills at least Seq,
// Method, URL, Sched and Outcome.
type Result struct {
	Type   string `json:"type"`             // always "result"
	Seq    int64  `json:"seq"`              // unique per agent, in schedule order from 0
	Agent  string `json:"agent,omitempty"`  // the agent that sent it; Merge sets it to the agent's merged name
	Client string `json:"client,omitempty"` // client identity (key value or source address)
	Src    string `json:"src,omitempty"`    // local address used, "ip:port"
	Method string `json:"method"`
	URL    string `json:"url"`             // secrets redacted
	Phase  string `json:"phase,omitempty"` // which probe/pattern phase
	Sched  int64  `json:"sched"`           // when it was scheduled to go out
	Sent   int64  `json:"sent,omitempty"`  // first byte written
	Wrote  int64  `json:"wrote,omitempty"` // last byte written
	TTFB   int64  `json:"ttfb,omitempty"`  // first response byte read
	Done   int64  `json:"done,omitempty"`  // response fully read, or error seen
	// Outcome: response, error or not-sent.
	Outcome Outcome `json:"outcome"`
	Status  int     `json:"status,omitempty"`
	// Err is the error class (ErrRefused …) when Outcome is error; ErrMsg
	// the error text. For not-sent, Err says why (cap, abort, signal).
	Err    string `json:"err,omitempty"`
	ErrMsg string `json:"err_msg,omitempty"`
	// Headers are the captured response headers, verbatim (one entry per
	// field line), named as the server spelled them (HTTP/2: lower case;
	// look them up with headers.Get, in any case), secrets redacted (see
	// Redactor). The
	// reader returns nil, never an empty map, when there are none.
	Headers http.Header `json:"headers,omitempty"`
	// Arrival is the server's echoed receive time, when the server echoes
	// it: the echoed Unix nanoseconds (server clock, the reference clock)
	// minus Header.Start's Unix nanoseconds. Header.Start + Arrival is thus
	// the arrival on the reference clock; unlike the times above, no clock
	// offset is to be subtracted. Nil when there was no echo.
	Arrival *int64 `json:"arrival,omitempty"`
	// Decision is the reference server's decision sequence number: the
	// order in which its limiter decided the requests it received (1 for
	// the first decision after the route's backend started, then 2, 3 …;
	// one counter per route, so numbers compare within a route only).
	// Arrival stamps do not fix that order — a server
	// stamps before it decides — so only a Decision makes the order of two
	// close requests evidence. Nil when the server sent none (every server
	// but rlprobe's own).
	Decision *int64 `json:"decision,omitempty"`
}

// End closes the results of a file; a file without one was cut short (the
// process was killed). Only finding and inference lines may follow it.
type End struct {
	Type      string `json:"type"`      // always "end"
	Reason    string `json:"reason"`    // ReasonCompleted, ReasonInterrupted, ReasonAborted or ReasonBudget
	Scheduled int64  `json:"scheduled"` // requests scheduled (= results written)
	Sent      int64  `json:"sent"`      // requests that went out (outcome response or error)
	// ClockOffsetNS and ClockUncertaintyNS are this agent's clock offset
	// (agent − reference) and its half-width as known when the run ended,
	// in the Header's sense; ClockSource says where they come from
	// (ClockSourceDate or ClockSourceTimeRef). All three are zero (and
	// omitted from the file) when the agent has no estimate, and in files
	// written before they existed. The header is written before the run,
	// so an estimate made from the run's own responses can only be
	// recorded here; Run.Clock says which of the two a merge uses.
	ClockOffsetNS      int64  `json:"clock_offset_ns,omitempty"`
	ClockUncertaintyNS int64  `json:"clock_uncertainty_ns,omitempty"`
	ClockSource        string `json:"clock_source,omitempty"`
}

// Clock sources: where an End's clock estimate comes from.
const (
	// ClockSourceDate: estimated after the run from the run's own
	// responses — their Date headers, or the reference server's arrival
	// echoes when present — each bracketed by its request's last byte
	// written and first response byte (no extra requests).
	ClockSourceDate = "date"
	// ClockSourceTimeRef: measured before the run against --time-ref, as
	// in the Header.
	ClockSourceTimeRef = "time-ref"
)

// End reasons.
const (
	ReasonCompleted   = "completed"
	ReasonInterrupted = "interrupted"
	ReasonAborted     = "aborted"
	ReasonBudget      = "budget"
)
