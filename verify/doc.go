// Package verify answers "does this rate limiter keep its promise?": the
// declared policy (flags, the RateLimit-Policy draft syntax, YAML/JSON
// files), counts of accepted requests in any window with certainty bounds,
// header checks, the findings of the contract, the check suite's
// experiments designed as schedules, and the check/analyze documents.
//
// verify never imports the probe engine: it reads records (package record)
// and, for the live check suite, runs schedules through the small Engine
// interface that the command line hands it.
//
// Times are int64 nanoseconds on the reference clock (the target's), as
// record files keep them: relative to the run's start.
package verify
