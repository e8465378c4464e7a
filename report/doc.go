// Package report renders rlprobe's stored runs — the record files of
// package record with the check, analyze and infer documents appended to
// them — for people and machines: a terminal table, the JSON document
// rlprobe.report/v1, JUnit XML, Markdown, and a self-contained HTML page
// whose SVG timeline shows every request at its send time.
//
// An [Input] holds what is drawn: every request in a compact form (about 70
// bytes each, so a million-request run fits comfortably in memory), the
// runs' headers, and the documents decoded into the types of the packages
// that write them: each check or analyze document is a [verify.Report]
// (kept in a [Verdict] with its time and file), each infer document an
// [*infer.Inference], and the run summary a [record.RunDoc]. Build one
// with [ReadFiles] or [Read] (record files, streamed), or [FromMerged]
// (runs already in memory), and add documents that are not in the files
// with [Input.AddDocument].
//
// The renderers ([Table], [JSON], [JUnit], [Markdown], [HTML], or [Render]
// by [Format]) never judge: verdicts and findings come from the documents
// (package verify wrote them). Stored verdicts are never added up: each is
// shown with its own policy and time, the latest first, and the report's
// verdict is the latest one's. What this package computes — the display
// classes, the run summary, trailing-window counts, Retry-After claims —
// is for display, from every record; only the drawing is downsampled.
// The HTML page is the embedded html/template html.tmpl, which escapes
// every text it is given; svg.go computes the geometry of its SVG panels.
//
// Outcome classes are record.Classify's, under every reject status a
// stored policy or inference declares. For display an accepted request is
// also "delayed" when its latency is well above the rest (see
// [DelayedThreshold]), which is how leaky-bucket queueing looks from
// outside. Numbers, rates and durations for people are written in the one
// display format of package units (HumanNumber, HumanRate, HumanDuration).
//
// Times are int64 nanoseconds relative to the Input's start, as in record
// files. Renderers are safe for concurrent use on distinct Inputs; an Input
// is not safe for concurrent use.
package report
