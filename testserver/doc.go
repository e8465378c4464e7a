// Package testserver is rlprobe's reference rate-limited HTTP server: every
// algorithm of package limiter, every header dialect of package headers, and
// the classic mistakes and lies of real limiters, so that each finding of
// the verifier has something real to catch.
//
// The pieces, from the inside out:
//
//   - [Backend] decides one request of a key at a time given by the caller.
//     [MemoryBackend] keeps states in a limiter.Store; [RedisBackend] keeps
//     them in Redis, atomically in Lua (identical decisions), or with
//     RedisOptions.NonAtomic as the check-then-act race of a naive
//     distributed counter; [NonAtomicMemoryBackend] is that race in memory,
//     where a synctest bubble can run it. The memory backends are
//     [OrderedBackend]s: they number their decisions, and the Handler
//     reports the number beside the arrival echo (headers.DecisionHeader),
//     since an arrival stamp does not fix the order of decisions.
//   - [Handler] routes requests by exact path to a [Policy] (limiter,
//     key, reject status, header dialects, Retry-After honesty, faults) and
//     answers with honest headers unless told to lie.
//   - [Server] serves a Handler on TCP (HTTP/1.1, HTTP/2 over TLS, h2c) or
//     on a [MemListener], whose connections are in-memory pipes that work
//     inside a testing/synctest bubble.
//   - [RouteSpec] and [LoadConfig] read the serve flags and config files.
//
// `rlprobe serve` is a thin shell over Server.
package testserver
