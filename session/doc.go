// Package session is one probing session over a resolved target: what
// `rlprobe run`, `check` and `infer` do between parsing their flags and
// printing their results, as a library a second front end (a watch daemon,
// a test, another program) calls the same way.
//
// A Session owns
//
//   - the probe engines (one per run, per rule of a check, per key-spoof
//     variant), built from Config.Probe;
//   - the record file's life: its header (targets, plan or policy, seed,
//     the clock measured against Config.TimeRef), one Seq space over every
//     engine (each schedule gets a block of consecutive Seqs, in schedule
//     order), the end line with its reason, counts and the clock estimated
//     from the answers' Date headers, and the verdict or inference;
//   - the preflight request of Check and Infer, the safety caps, the wait
//     for Config.StartAt, the guard against answers that are neither
//     accepted nor rejected, and the progress callbacks.
//
// Build a Config with Target.Resolve (the target flags of contract.md) or
// by hand, then call one of Run, Check and Infer once. Each returns its
// typed result — probe.Summary, *verify.Report, *infer.Inference — and an
// error whose Class says how a front end should exit (see ClassOf): the
// classes are the exit codes of contract.md. Record returns what was
// recorded, as the record file holds it, for reports.
//
// A session with an empty Config.Out keeps its record in memory only; the
// examples run that way over in-memory connections to a reference server.
package session
