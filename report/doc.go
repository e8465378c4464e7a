// Package report renders rlprobe's stored runs — the record files of
// package record with the check, analyze and infer documents appended to
// them — for people and machines: a terminal table, the JSON document
// rlprobe.report/v1, JUnit XML, Markdown, and a self-contained HTML page
// whose SVG timeline shows every request at its send time.
//
// An [Input] holds what is drawn: every request in a compact form (about 50
// bytes each, so a million-request run fits comfortably in memory), the
// runs' headers, and the documents decoded into this package's own view
// types ([Check], [Finding], [Inference]), which mirror the contract's JSON
// documents field for field. Build one with [ReadFiles] or [Read] (record
// files, streamed), or [FromMerged] (runs already in memory), and add
// documents that are not in the files with [Input.AddDocument].
//
// The renderers ([Table], [JSON], [JUnit], [Markdown], [HTML], or [Render]
// by [Format]) never judge: verdicts and findings come from the documents
// (package verify wrote them). What this package computes — outcome
// classes, the run summary, trailing-window counts, Retry-After claims — is
// for display, from every record; only the drawing is downsampled.
//
// Outcome classes follow the contract: accepted is a 2xx answer; rejected
// the declared reject status, else 429 or 503; other any other status;
// error no HTTP answer; not-sent never sent. For display an accepted
// request is also "delayed" when its latency is well above the rest (see
// [DelayedThreshold]), which is how leaky-bucket queueing looks from
// outside.
//
// Times are int64 nanoseconds relative to the Input's start, as in record
// files. Renderers are safe for concurrent use on distinct Inputs; an Input
// is not safe for concurrent use.
package report
