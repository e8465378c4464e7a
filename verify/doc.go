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
// verify never imports the probe engine: it reads records (package record),
// which is what makes offline re-analysis and engine-free tests possible.
//
// Times are int64 nanoseconds on the reference clock (the target's),
// relative to the run's start, as record files keep them. Nothing in this
// package reads the clock except Suite, whose Elapsed defaults to the time
// since its Zero.
package verify
