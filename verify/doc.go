// Package verify answers "does this rate limiter keep its promise?".
//
// It holds the declared policy (Policy: from flags, the RateLimit-Policy
// draft syntax with ParseDraftPolicy, or YAML/JSON files with
// ParsePolicyFile; Validate reports every problem at once), counts of
// accepted requests with certainty (MaxInWindow, MaxInFixedWindows,
// MaxBucketExcess: each request's arrival is known only within bounds, so
// a count is certain when it holds for every arrival time within them and
// possible when it holds for some), the header checks, the findings of the
// contract (Analyze turns merged records and a policy into the check /
// analyze document, Report), and the check suite (Suite, PlanSuite,
// PlanDuration): experiments designed as patterns.Schedules and run
// through the small Engine interface the command line implements.
//
// Certain means certain: a finding is certain only when it holds for every
// decision time and every decision order the evidence allows. A request's
// decision lies in [wrote, TTFB] widened by the agent's clock uncertainty;
// an arrival echo raises the lower bound only (DecisionBounds). Two
// requests are ordered only when their bounds do not overlap or the
// reference server numbered its decisions (record.Result.Decision).
//
// The analysis is one file per check family: windows.go and buckets.go
// (the counts of each policy family), admission.go (no limiting, under-
// admission), race.go (race and key-spoof), retryafter.go and grade.go
// (Retry-After; GradeRetryAfter grades one value for check and infer),
// headers.go (statuses, grammar, remaining and reset consistency, policy)
// and cacheable.go. Each check returns its findings; analyze.go's group
// decides which run and which silence others. A new finding adds its id
// and a row to the finding table (finding.go) and its check to its
// family's file.
//
// verify never imports the probe engine: it reads records (package record),
// which is what makes offline re-analysis and engine-free tests possible.
//
// Times are int64 nanoseconds on the reference clock (the target's),
// relative to the run's start, as record files keep them. Nothing in this
// package reads the clock except Suite, whose Elapsed defaults to the time
// since its Zero.
package verify
