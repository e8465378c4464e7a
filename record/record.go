// Package record defines rlprobe's record file: JSON Lines, one object per
// line, each with a "type". The first line is a Header, then one Result per
// scheduled request (in completion order), Finding and Inference documents
// appended by check, infer and analyze, and an End line last.
//
// Times inside a file are int64 nanoseconds relative to Header.Start, because
// absolute Unix nanoseconds overflow JavaScript numbers.
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

// Header is the first line of a record file.
type Header struct {
	Type   string    `json:"type"`   // always "header"
	Format int       `json:"format"` // FormatMajor
	Tool   string    `json:"tool"`   // "rlprobe vX.Y.Z"
	Go     string    `json:"go"`     // runtime.Version()
	Start  time.Time `json:"start"`  // RFC 3339 with ns; every relative time counts from here
	Agent  string    `json:"agent"`  // this agent's name; refs are "agent:seq"
	Host   string    `json:"host"`
	// Targets are the target URLs (secrets redacted).
	Targets []string `json:"targets"`
	// Plan and Policy are the traffic plan and declared policy as raw JSON,
	// secrets redacted; null when absent.
	Plan   json.RawMessage `json:"plan,omitempty"`
	Policy json.RawMessage `json:"policy,omitempty"`
	Seed   uint64          `json:"seed"`
	// ClockOffsetNS is this agent's clock minus the reference clock (the
	// target's), and ClockUncertaintyNS its half-width; subtract the offset
	// to put this agent's times on the reference clock.
	ClockOffsetNS      int64 `json:"clock_offset_ns"`
	ClockUncertaintyNS int64 `json:"clock_uncertainty_ns"`
	// Captured lists the response header names kept in results.
	Captured []string `json:"captured"`
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
	ErrOther   = "other"
)

// Result is exactly one scheduled request. All times are nanoseconds since
// Header.Start on this agent's clock; a zero time means "did not happen"
// except Sched, which is always set.
type Result struct {
	Type   string `json:"type"` // always "result"
	Seq    int64  `json:"seq"`  // unique per agent, in schedule order from 0
	Agent  string `json:"agent,omitempty"`
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
	// field line), canonical keys, secrets redacted.
	Headers http.Header `json:"headers,omitempty"`
	// Arrival is the server's echoed receive time converted to nanoseconds
	// since Header.Start on the server's clock, when the server echoes it.
	Arrival *int64 `json:"arrival,omitempty"`
}

// End is the last line of a complete file.
type End struct {
	Type      string `json:"type"`   // always "end"
	Reason    string `json:"reason"` // completed, interrupted, aborted, budget
	Scheduled int64  `json:"scheduled"`
	Sent      int64  `json:"sent"`
}

// End reasons.
const (
	ReasonCompleted   = "completed"
	ReasonInterrupted = "interrupted"
	ReasonAborted     = "aborted"
	ReasonBudget      = "budget"
)
