// Package probe is rlprobe's open-loop traffic engine. An [Engine] sends a
// schedule of requests ([Send]: "request i is due at offset At, as client
// c") at absolute deadlines, whatever the target's latency, and records
// exactly one [record.Result] per send: a response (any status), a
// transport error classified as refused, timeout, reset, dns, tls or other,
// or not-sent (the run was interrupted, aborted or out of budget).
// [Engine.Run] takes the schedule as a slice and returns every result;
// [Engine.Stream] takes it as an iterator, keeps the state of a send only
// while it is in flight and hands the results to the sink alone, so a
// schedule of any length runs in bounded memory.
//
// The engine builds its own transports from a [DialFunc], so tests run it
// over in-memory connections and it controls pooling, source addresses and
// the timing of every byte:
//
//   - HTTP/1.1 runs on a lean path of its own: requests are serialised once
//     per client and target, written on pooled keep-alive connections (one
//     request per connection at a time, so a burst of N uses N connections,
//     dialled before the first deadline). The dispatcher writes each
//     request itself; a goroutine per connection, already waiting in the
//     network poller, reads the response, with a lean parser for the
//     common head (HTTP/1.1, Content-Length) and net/http's reader for any
//     other. A send that finds no idle connection at its deadline dials
//     one (at most 256 dials at a time per engine, Options.Connections,
//     default 256, per client and target) or, past those bounds, waits in its pool, without
//     a goroutine, for a connection freed meanwhile (whose reader then
//     writes it) or room to dial, whichever comes first; it is then late,
//     and counted so.
//   - Reads are bounded, whatever the server sends: a response head over
//     Options.MaxHeaderBytes (1 MiB; over HTTP/2 the header list size the
//     client advertises) is an error of class header-too-large and its
//     connection is closed; at most Options.MaxBodyBytes (1 MiB) of a body
//     are read, and a longer answer is still a response, on a connection
//     then closed.
//   - Result times bracket what the server saw: Sent is taken just before
//     the write carrying the request's first byte and Wrote just before the
//     write carrying its last byte (equal when one write carries both), so
//     the server cannot hold the whole request before Wrote; TTFB is when
//     the first response byte was read and Done the end of the response.
//   - On Linux, plain HTTP/1.1 runs with the default dialer go through an
//     event loop instead: one goroutine locked to its OS thread paces the
//     sends (a timerfd in its epoll set, then a short spin), writes the
//     pre-built requests on non-blocking sockets, parses the responses as
//     epoll reports them and hands results in batches to a sink goroutine;
//     a response the lean parser declines is read by net/http's reader in
//     a goroutine that gives the connection back. Races are prepared and
//     released by the same loop: every member's connection is made ready
//     (last-byte: all of its request written but the final byte), then one
//     pass writes every final byte (or every whole request, barrier), in
//     member order. The net.Conn path above serves TLS, HTTP/2, custom
//     dialers (in-memory connections under testing/synctest) and
//     Preflight.
//   - HTTP/2 is used when a TLS server offers it (ALPN h2) or with H2C, one
//     multiplexed connection per client and target (and per Send.Conn).
//   - A send chooses its connection with Send.Conn. 0 (the default) means
//     any of the client's shared connections to the target, as above; n ≥
//     1 means the client's n-th dedicated connection to the target (each
//     URL replica has its own): one connection, dialled for its first use
//     (ahead of the run, as any other), kept alive however long it is idle,
//     and dialled anew only once the server closed it or a request on it
//     failed. Its requests go one after another, never pipelined: a send
//     due while the connection is busy waits for it in the same queue as
//     any late send, and is late. Shared and dedicated connections never
//     carry each other's sends, and the result's src says which connection
//     carried each. A race member with a Conn is prepared on that
//     connection, waiting for it when it is busy (two members of one batch
//     cannot share one; a single-packet race, which opens connections of
//     its own, takes no Conn). Over HTTP/2 a dedicated Conn is an HTTP/2
//     connection of its own, whose streams are multiplexed as on the
//     shared one (a last-byte member, which needs HTTP/1.1, gets an
//     HTTP/1.1 connection beside it). Both send paths honour it, through the dispatch core's
//     cap (one connection) and idle rule.
//   - Client identity is a header value, a source address, or both.
//     Several URLs are replicas: each client goes round-robin over them.
//   - Batches race in one of three modes: barrier, last-byte (every request
//     written but its final byte, then all final bytes written by one
//     loop, in member order, Wrote stamped before each) and
//     single-packet (HTTP/2: every stream's final frame withheld, then all
//     flushed in one write per connection). A server that handles a request
//     on its HEADERS, before the end of the stream (Go's does, unless the
//     handler reads the body), answers before the release: such results
//     have TTFB before Wrote.
//
// Secrets never reach a result: URLs, captured headers and identity values
// pass through the Options.Redactor. [Summarize] condenses results into
// counts, HDR-histogram latency percentiles, pacing error and race spread.
package probe
